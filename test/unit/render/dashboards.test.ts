import { mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { loadSettings, SLO_KINDS, type Settings } from '../../../src/config/load.js';
import { GPU_METRICS, METRICS, MODEL_INFO } from '../../../src/metrics/definitions.js';
import { COST_SERIES } from '../../../src/render/capacity-panels.js';
import { dashboardFileText, renderDashboards } from '../../../src/render/dashboards.js';
import { runbookUrl } from '../../../src/render/alert-links.js';
import { allPanels, expandRows, substituteVariables, variableReferences, type DashboardJson } from '../../helpers/dashboard-json.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const EXAMPLE_CONFIG = join(ROOT, 'deploy', 'tokentap.yaml');
const COMMITTED = join(ROOT, 'grafana');

function exampleSettings(): Settings {
  return loadSettings({ flags: { config: EXAMPLE_CONFIG }, env: {} });
}

function rendered(settings = exampleSettings()): Array<{ fileName: string; json: DashboardJson; text: string }> {
  return renderDashboards(settings).map((r) => ({ fileName: r.fileName, json: JSON.parse(dashboardFileText(r)) as DashboardJson, text: dashboardFileText(r) }));
}

function overview(settings: Settings): DashboardJson {
  const found = rendered(settings).find((r) => r.fileName === 'tokentap-slo-overview.json');
  if (found === undefined) throw new Error('no tokentap-slo-overview.json rendered');
  return found.json;
}

/** The per-workload constants written into a query: `label_replace(vector(0.2), "workload", "chat", "", "")` terms. */
function constantsOf(expr: string): Record<string, number> {
  return Object.fromEntries([...expr.matchAll(/label_replace\(vector\(([^)]+)\), "workload", "([^"]+)", "", ""\)/g)].map((m) => [m[2] as string, Number(m[1])]));
}

/** Grafana's built-in variables a query may use without defining them. */
const GRAFANA_BUILTINS = new Set(['__rate_interval', '__interval', '__range', '__all']);

describe('rendered dashboards pass the checks Grafana applies on import', () => {
  for (const { fileName, json } of rendered()) {
    describe(fileName, () => {
      it('has a stable uid Grafana accepts (at most 40 of [A-Za-z0-9_-]), a title and a numeric schemaVersion', () => {
        expect(json.uid).toMatch(/^[A-Za-z0-9_-]{1,40}$/);
        expect(fileName).toBe(`${json.uid}.json`);
        expect(json.title.length).toBeGreaterThan(0);
        expect(Number.isInteger(json.schemaVersion)).toBe(true);
        // Grafana 10.0 writes schemaVersion 38; the dashboard uses no feature newer than that.
        expect(json.schemaVersion).toBeGreaterThanOrEqual(38);
      });

      it('has unique positive integer panel ids, rows included', () => {
        const ids = allPanels(json).map((p) => p.id);
        expect(ids.every((id) => Number.isInteger(id) && id > 0)).toBe(true);
        expect(new Set(ids).size).toBe(ids.length);
      });

      it('places every panel inside the 24 columns, without overlaps', () => {
        const panels = allPanels(json);
        for (const { title, gridPos: g } of panels) {
          expect([g.x, g.y, g.w, g.h].every(Number.isInteger), title).toBe(true);
          expect(g.x >= 0 && g.y >= 0 && g.w >= 1 && g.h >= 1 && g.x + g.w <= 24, `${title} ${JSON.stringify(g)}`).toBe(true);
        }
        for (let i = 0; i < panels.length; i++) {
          for (let j = i + 1; j < panels.length; j++) {
            const a = panels[i]!.gridPos;
            const b = panels[j]!.gridPos;
            const overlap = a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;
            expect(overlap, `${panels[i]!.title} overlaps ${panels[j]!.title}`).toBe(false);
          }
        }
      });

      it('resolves every data source reference to the datasource variable, which offers Prometheus data sources', () => {
        const variable = json.templating.list.find((v) => v.type === 'datasource');
        expect(variable).toMatchObject({ name: 'datasource', query: 'prometheus' });
        const viaVariable = { type: 'prometheus', uid: '${datasource}' };
        for (const panel of allPanels(json)) {
          if (panel.type === 'row') continue;
          expect(panel.datasource, panel.title).toEqual(viaVariable);
          expect(panel.targets?.length, panel.title).toBeGreaterThan(0);
          for (const target of panel.targets ?? []) expect(target.datasource, `${panel.title} ${target.refId}`).toEqual(viaVariable);
        }
        for (const v of json.templating.list.filter((v) => v.type === 'query')) expect(v.datasource, v.name).toEqual(viaVariable);
        // The only other reference is Grafana's built-in annotation source.
        for (const a of json.annotations?.list ?? []) expect(a).toMatchObject({ builtIn: 1, datasource: { type: 'grafana' } });
      });

      it('defines every template variable a query uses, with namespace, workload, pod and model among them', () => {
        const names = json.templating.list.map((v) => v.name);
        expect(new Set(names).size).toBe(names.length);
        expect(names).toEqual(expect.arrayContaining(['datasource', 'namespace', 'pod', 'workload', 'model']));
        const texts = [
          ...allPanels(json).flatMap((p) => (p.targets ?? []).map((t) => t.expr)),
          ...json.templating.list.map((v) => (typeof v.query === 'string' ? v.query : '')),
        ];
        for (const text of texts) {
          for (const name of variableReferences(text)) expect(names.includes(name) || GRAFANA_BUILTINS.has(name), `$${name} in ${text}`).toBe(true);
        }
      });

      it('gives every query a refId unique in its panel', () => {
        for (const panel of allPanels(json)) {
          const refIds = (panel.targets ?? []).map((t) => t.refId);
          expect(new Set(refIds).size, panel.title).toBe(refIds.length);
        }
      });

      it('tells no data (no series: what is not scraped) from no traffic (NaN: counters that did not move) on every panel', () => {
        for (const panel of allPanels(json).filter((p) => p.type !== 'row')) {
          const noValue = panel.fieldConfig?.defaults?.noValue ?? '';
          // Empty answers name what to check; only the DCGM error counter is empty when all is well.
          expect(noValue, panel.title).toMatch(panel.title === 'DCGM scrape errors (sidecar)' ? /^No DCGM scrape error counted \(or .*not scraped\)$/ : /^No data: .*scraped/);
          expect(panel.fieldConfig?.defaults?.mappings, panel.title).toContainEqual({ type: 'special', options: { match: 'null+nan', result: { text: 'No traffic' } } });
        }
      });

      it('names only metrics tokentap emits (definitions.ts) or DCGM exporter fields', () => {
        const emitted = new Set<string>();
        for (const def of Object.values(METRICS)) {
          emitted.add(def.promName);
          if (def.kind === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) emitted.add(`${def.promName}${suffix}`);
        }
        for (const def of Object.values(GPU_METRICS)) emitted.add(def.promName);
        emitted.add(MODEL_INFO.promName);
        // The cost accounting's series (issue 25 items 2-3), read by the Capacity and cost row.
        for (const name of COST_SERIES) emitted.add(name);
        const exprs = allPanels(json).flatMap((p) => (p.targets ?? []).map((t) => t.expr));
        for (const expr of exprs) {
          for (const [name] of expr.matchAll(/\b(?:tokentap|gen_ai)_[a-z_]+\b(?=\s*[{[(])/g)) expect(emitted.has(name), `${name} in ${expr}`).toBe(true);
          for (const [name] of expr.matchAll(/\bDCGM_FI_[A-Z_]+\b/g)) expect(name, expr).toMatch(/^DCGM_FI_DEV_(FB_USED|FB_FREE|FB_RESERVED|FB_TOTAL|GPU_UTIL)$/);
        }
      });

      it('guards every division: each denominator is filtered with > 0, is a constant, or the error budget ratios (1 - objective, never 0)', () => {
        const exprs = allPanels(json).flatMap((p) => (p.targets ?? []).map((t) => t.expr));
        let divisions = 0;
        for (const expr of exprs) {
          expect(expr, 'a division not written as ") / "').not.toMatch(/[^)] \/ /);
          for (const match of expr.matchAll(/\) \/ /g)) {
            divisions++;
            const rest = expr.slice((match.index ?? 0) + match[0].length);
            const guarded = /^\(.*> 0\)/.test(rest) || /^\d/.test(rest) || /^on \(workload\) group_left \(\) \(label_replace\(vector\(0\.\d+\), "workload", "[a-z]/.test(rest);
            expect(guarded, `unguarded division in ${expr}`).toBe(true);
          }
        }
        expect(divisions).toBeGreaterThan(15);
      });
    });
  }
});

describe('dashboards follow the configuration', () => {
  it('show client errors apart from the server\'s failures, in a panel of their own', () => {
    const panels = allPanels(overview(exampleSettings()));
    const clientErrors = panels.filter((p) => JSON.stringify(p.targets ?? []).includes('outcome=\\"client_error\\"'));
    expect(clientErrors.map((p) => p.title)).toEqual(['Client error rate']);
    expect(JSON.stringify(clientErrors[0]?.targets)).not.toContain('upstream_error');
  });

  it('draws each workload\'s own budget on its latency panels: a dashed red series of the configured thresholds, in seconds, per workload', () => {
    const settings = exampleSettings();
    const panels = allPanels(overview(settings));
    const panelTitle = { ttft: 'TTFT p50 / p90 / p99', itl: 'ITL p50 / p90 / p99', e2e: 'e2e latency p50 / p90 / p99' } as const;
    for (const kind of SLO_KINDS) {
      const panel = panels.find((p) => p.title === `$workload: ${panelTitle[kind]}`);
      const budget = panel?.targets?.find((t) => t.legendFormat === 'budget');
      expect(budget, kind).toBeDefined();
      const expected = Object.fromEntries(settings.workloads.flatMap((w) => (w.slo?.thresholdsS[kind] === undefined ? [] : [[w.name, w.slo.thresholdsS[kind]]])));
      expect(constantsOf(budget?.expr ?? ''), kind).toEqual(expected);
      // Drawn like a threshold: its own query, dashed, red, unfilled.
      const overrides = (panel as { fieldConfig?: { overrides?: Array<{ matcher: unknown; properties: Array<{ id: string; value: unknown }> }> } }).fieldConfig?.overrides ?? [];
      const style = overrides.find((o) => JSON.stringify(o.matcher) === JSON.stringify({ id: 'byFrameRefID', options: budget?.refId }));
      expect(style?.properties, kind).toEqual(
        expect.arrayContaining([
          { id: 'custom.lineStyle', value: { fill: 'dash', dash: [10, 10] } },
          { id: 'color', value: { mode: 'fixed', fixedColor: 'red' } },
        ]),
      );
    }
    expect(Object.keys(constantsOf(panels.find((p) => p.title === '$workload: TTFT p50 / p90 / p99')?.targets?.at(-1)?.expr ?? ''))).toHaveLength(4);
  });

  it('divides each workload\'s error ratio by its own error budget (1 - its objective) and shows the objective beside the attainment', () => {
    const settings = exampleSettings();
    const panels = allPanels(overview(settings));
    const withSlo = settings.workloads.filter((w) => w.slo !== undefined);
    const budgets = Object.fromEntries(withSlo.map((w) => [w.name, Number((1 - (w.slo?.objective ?? 0)).toPrecision(12))]));
    for (const title of ['$workload: error budget remaining (30d)', '$workload: burn rate (1h)']) {
      const [target, ...others] = panels.find((p) => p.title === title)?.targets ?? [];
      expect(others, title).toEqual([]);
      expect(target?.legendFormat, title).toBe('{{slo}} {{namespace}}');
      expect(constantsOf(target?.expr ?? ''), title).toEqual(budgets);
      expect(target?.expr, title).toContain('sum by (namespace, workload, slo)');
    }
    const attainment = panels.find((p) => p.title === '$workload: SLO attainment (30d)');
    expect(attainment?.targets?.map((t) => t.legendFormat)).toEqual(['{{slo}} {{namespace}}', 'objective']);
    expect(constantsOf(attainment?.targets?.[1]?.expr ?? '')).toEqual(Object.fromEntries(withSlo.map((w) => [w.name, w.slo?.objective])));
  });

  it('computes SLO attainment, error budget and burn rate across all pods: $pod (the pods seen in the time range) would drop pods a rollout replaced', () => {
    const exprs = allPanels(overview(exampleSettings())).flatMap((p) => (p.targets ?? []).map((t) => t.expr));
    const sloQueries = exprs.filter((e) => e.includes(METRICS.sloEvents.promName));
    expect(sloQueries.length).toBe(4);
    for (const expr of sloQueries) expect(expr).not.toContain('$pod');
    // The latency and traffic panels still follow the pod selection.
    expect(exprs.filter((e) => e.includes(`${METRICS.ttft.promName}_bucket`)).every((e) => e.includes('pod=~"$pod"'))).toBe(true);
  });

  it('keeps namespaces apart in every per-workload panel, so staging and prod are two lines under $namespace = All', () => {
    const targets = allPanels(overview(exampleSettings())).flatMap((p) => (p.targets ?? []).map((t) => ({ title: p.title, ...t })));
    // The configured constants (budget lines, objectives) are one value per workload, not per namespace.
    const tokentap = targets.filter((t) => /\b(tokentap_|gen_ai_)/.test(t.expr) && !t.expr.includes('tokentap_gpu_') && !t.expr.includes('tokentap_dcgm_') && !t.expr.startsWith('(label_replace(vector('));
    expect(tokentap.length).toBeGreaterThan(30);
    for (const t of tokentap) {
      const groupings = t.expr.match(/\bsum(?: by \([^)]*\))? \(/g) ?? [];
      expect(groupings.length, t.title).toBeGreaterThan(0);
      // Requests by outcome is a total over everything selected: rates add up across namespaces.
      if (t.title === 'Requests per second by outcome') continue;
      for (const grouping of groupings) expect(grouping, `${t.title}: ${t.expr}`).toMatch(/^sum by \([^)]*\bnamespace\b/);
      expect(t.legendFormat, t.title).toContain('{{namespace}}');
    }
  });

  it('draws a burn-rate line at every factor the burn-rate alerts use', () => {
    const panels = allPanels(overview(exampleSettings())).filter((p) => p.title.endsWith(': burn rate (1h)'));
    expect(panels.length).toBeGreaterThan(0);
    for (const panel of panels) {
      const lines = (panel.fieldConfig?.defaults?.thresholds?.steps ?? []).filter((s) => s.value !== null).map((s) => s.value);
      expect(lines, panel.title).toEqual([1, 3, 6, 14.4]);
    }
  });

  it('renders the same bytes every time (stable ids, uids and order)', () => {
    const first = rendered().map((r) => r.text);
    const second = rendered().map((r) => r.text);
    expect(second).toEqual(first);
  });

  it('a workload-free configuration still renders a valid dashboard, whose repeated row serves the catch-all workload', () => {
    // No workloads; the alerts' runbook base only, which render requires and the panels' runbook links use.
    const settings = loadSettings({ flags: { config: 't.yaml' }, env: {}, readFile: () => 'alerts: { runbook_base_url: https://runbooks.example.com/tokentap }\n' });
    const json = overview(settings);
    const titles = allPanels(json).map((p) => p.title);
    expect(titles).toContain('$workload: TTFT p50 / p90 / p99');
    // No SLO anywhere: nothing to attain or burn, no budget line.
    expect(titles.filter((t) => /attainment|budget|burn/.test(t))).toEqual(['SLO attainment (30d)']);
    expect(allPanels(json).flatMap((p) => p.targets ?? []).filter((t) => t.legendFormat === 'budget')).toEqual([]);
  });
});

describe('the $workload variable filters the per-workload rows (Grafana row repeat), as the alerts\' dashboard links expect', () => {
  const settings = exampleSettings();
  const json = overview(settings);
  const workloads = settings.workloads.map((w) => w.name);
  /** Every tokentap series selector of a query: `name{matchers}`. */
  const selectors = (expr: string): string[] => [...expr.matchAll(/\b(?:tokentap|gen_ai)_[a-z_]+\{[^}]*\}/g)].map((m) => m[0]);

  it('opened with ?var-workload=chat (an alert\'s link), shows chat\'s rows only, and every per-workload query selects workload chat and no other', () => {
    const rows = expandRows(json, { workload: ['chat'] });
    expect(rows.map((r) => r.title)).toEqual([
      'Service levels (selected workloads)',
      'Workload chat: SLOs and latency',
      'Workload chat: where the time goes (goodput, TTFT split, capacity, engine)',
      'LoRA adapters and base models (selected workloads)',
      'Capacity and cost',
      'GPU of the selected pods (DCGM exporter)',
      'GPU as read by the tokentap sidecar (dcgm.url)',
    ]);
    const perWorkload = rows.filter((r) => r.repeat !== undefined);
    expect(perWorkload).toHaveLength(2);
    let checked = 0;
    for (const row of perWorkload) {
      for (const panel of row.panels) {
        expect(substituteVariables(panel.title, { workload: 'chat' }), row.title).toMatch(/^chat: /);
        for (const target of panel.targets ?? []) {
          const expr = substituteVariables(target.expr, { workload: 'chat', namespace: '.*', pod: '.*', model: '.*', __rate_interval: '1m' });
          for (const selector of selectors(expr)) {
            expect(selector, `${panel.title}: ${expr}`).toContain('workload=~"chat"');
            checked++;
          }
          // No workload is written into a selector: only the variable chooses.
          for (const other of workloads) expect(expr, panel.title).not.toContain(`workload="${other}"`);
        }
      }
    }
    expect(checked).toBeGreaterThan(40);
    // One row per workload, not 14 rows and 101 panels whatever the selection; and the 9 panels of Capacity and cost.
    expect(rows.flatMap((r) => r.panels)).toHaveLength(31 + 9);
  });

  it('with workload at All, repeats each per-workload row once per workload, in the variable\'s order', () => {
    const rows = expandRows(json, { workload: workloads });
    for (const title of ['SLOs and latency', 'where the time goes (goodput, TTFT split, capacity, engine)']) {
      expect(rows.filter((r) => r.title.endsWith(title)).map((r) => r.repeat?.value)).toEqual(workloads);
    }
    const variable = json.templating.list.find((v) => v.name === 'workload') as { multi?: boolean; includeAll?: boolean };
    // Grafana repeats only over a variable that can hold several values.
    expect(variable.multi && variable.includeAll).toBe(true);
  });

  it('opens with the first row expanded and every row below it collapsed', () => {
    const rows = json.panels.filter((p) => p.type === 'row') as Array<{ title: string; collapsed?: boolean; panels?: unknown[] }>;
    expect(rows.map((r) => r.collapsed === true)).toEqual([false, ...rows.slice(1).map(() => true)]);
    for (const row of rows.slice(1)) expect(row.panels?.length, row.title).toBeGreaterThan(0);
    // Below the first collapsed row, no panel sits outside its row.
    const firstCollapsed = json.panels.findIndex((p) => p.type === 'row' && (p as { collapsed?: boolean }).collapsed === true);
    expect(json.panels.slice(firstCollapsed).every((p) => p.type === 'row')).toBe(true);
  });

  it('links each SLO and latency panel to the runbooks of the alerts about it, at the alerts\' own runbook URLs', () => {
    const custom = loadSettings({
      flags: { config: EXAMPLE_CONFIG },
      env: {},
      readFile: () => readFileSync(EXAMPLE_CONFIG, 'utf8').replace(/^  runbook_base_url: \S+/m, '  runbook_base_url: https://runbooks.example.com/tokentap'),
    });
    const panels = allPanels(overview(custom));
    const links = (title: string): string[] => ((panels.find((p) => p.title === title) as { links?: Array<{ url: string; targetBlank: boolean }> } | undefined)?.links ?? []).map((l) => l.url);
    const burn = (kind: string) => runbookUrl(custom.alerts, 'TokentapErrorBudgetBurn', kind);
    expect(burn('ttft')).toMatch(/^https:\/\/runbooks\.example\.com\/tokentap\//);
    const every = SLO_KINDS.map(burn);
    for (const title of ['SLO attainment (30d)', '$workload: SLO attainment (30d)', '$workload: error budget remaining (30d)', '$workload: burn rate (1h)']) expect(links(title), title).toEqual(every);
    expect(links('$workload: TTFT p50 / p90 / p99')).toEqual([burn('ttft'), runbookUrl(custom.alerts, 'TokentapTTFTP99OverBudget')]);
    expect(links('$workload: ITL p50 / p90 / p99')).toEqual([burn('itl')]);
    expect(links('$workload: e2e latency p50 / p90 / p99')).toEqual([burn('e2e')]);
  });
});

describe('committed dashboards under grafana/', () => {
  it('match what the example config renders (regenerate with UPDATE_GOLDEN=1 npx vitest run test/unit/render/dashboards.test.ts)', () => {
    const current = rendered();
    if (process.env.UPDATE_GOLDEN === '1') {
      mkdirSync(COMMITTED, { recursive: true });
      for (const { fileName, text } of current) writeFileSync(join(COMMITTED, fileName), text);
    }
    const committed = readdirSync(COMMITTED).filter((n) => n.endsWith('.json')).sort();
    expect(committed).toEqual(current.map((r) => r.fileName).sort());
    for (const { fileName, text } of current) {
      expect(readFileSync(join(COMMITTED, fileName), 'utf8') === text, `grafana/${fileName} is stale: regenerate it`).toBe(true);
    }
  });
});
