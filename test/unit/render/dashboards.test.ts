import { mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { loadSettings, SLO_KINDS, type Settings } from '../../../src/config/load.js';
import { GPU_METRICS, METRICS } from '../../../src/metrics/definitions.js';
import { dashboardFileText, renderDashboards } from '../../../src/render/dashboards.js';
import { allPanels, variableReferences, type DashboardJson } from '../../helpers/dashboard-json.js';

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

      it('shows "No traffic" for no data and for NaN on every panel', () => {
        for (const panel of allPanels(json).filter((p) => p.type !== 'row')) {
          expect(panel.fieldConfig?.defaults?.noValue, panel.title).toBe('No traffic');
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
        const exprs = allPanels(json).flatMap((p) => (p.targets ?? []).map((t) => t.expr));
        for (const expr of exprs) {
          for (const [name] of expr.matchAll(/\b(?:tokentap|gen_ai)_[a-z_]+\b(?=\s*[{[(])/g)) expect(emitted.has(name), `${name} in ${expr}`).toBe(true);
          for (const [name] of expr.matchAll(/\bDCGM_FI_[A-Z_]+\b/g)) expect(name, expr).toMatch(/^DCGM_FI_DEV_(FB_USED|FB_FREE|FB_RESERVED|FB_TOTAL|GPU_UTIL)$/);
        }
      });

      it('guards every division: each denominator is filtered with > 0 or is a constant', () => {
        const exprs = allPanels(json).flatMap((p) => (p.targets ?? []).map((t) => t.expr));
        let divisions = 0;
        for (const expr of exprs) {
          expect(expr, 'a division not written as ") / "').not.toMatch(/[^)] \/ /);
          for (const match of expr.matchAll(/\) \/ /g)) {
            divisions++;
            const rest = expr.slice((match.index ?? 0) + match[0].length);
            const guarded = /^\(.*> 0\)/.test(rest) || /^\d/.test(rest);
            expect(guarded, `unguarded division in ${expr}`).toBe(true);
          }
        }
        expect(divisions).toBeGreaterThan(20);
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

  it('draws each workload budget as a threshold line on its latency panel, in seconds', () => {
    const settings = exampleSettings();
    const json = overview(settings);
    const panels = allPanels(json);
    const panelTitle = { ttft: 'TTFT p50 / p90 / p99', itl: 'ITL p50 / p90 / p99', e2e: 'e2e latency p50 / p90 / p99' } as const;
    let checked = 0;
    for (const workload of settings.workloads) {
      for (const kind of SLO_KINDS) {
        const panel = panels.find((p) => p.title === `${workload.name}: ${panelTitle[kind]}`);
        expect(panel, `${workload.name} ${kind}`).toBeDefined();
        const threshold = workload.slo?.thresholdsS[kind];
        const steps = panel?.fieldConfig?.defaults?.thresholds?.steps ?? [];
        const lines = steps.filter((s) => s.value !== null).map((s) => s.value);
        expect(lines, `${workload.name} ${kind}`).toEqual(threshold === undefined ? [] : [threshold]);
        expect(panel?.fieldConfig?.defaults?.custom?.thresholdsStyle, `${workload.name} ${kind}`).toEqual({ mode: threshold === undefined ? 'off' : 'dashed' });
        if (threshold !== undefined) checked++;
      }
    }
    expect(checked).toBeGreaterThanOrEqual(8);
  });

  it('gives every workload with an SLO attainment, error budget and burn rate panels with one query per configured SLO', () => {
    const settings = exampleSettings();
    const json = overview(settings);
    for (const workload of settings.workloads.filter((w) => w.slo !== undefined)) {
      const kinds = SLO_KINDS.filter((k) => workload.slo?.thresholdsS[k] !== undefined);
      for (const title of [`${workload.name}: SLO attainment (30d)`, `${workload.name}: error budget remaining (30d)`, `${workload.name}: burn rate (1h)`]) {
        const panel = allPanels(json).find((p) => p.title === title);
        expect(panel?.targets?.map((t) => t.legendFormat), title).toEqual(kinds.map((k) => `${({ ttft: 'TTFT', itl: 'ITL', e2e: 'e2e' })[k]} {{namespace}}`));
        for (const [i, t] of (panel?.targets ?? []).entries()) expect(t.expr, title).toContain(`workload="${workload.name}", gen_ai_request_model=~"$model", slo="${kinds[i]}"`);
      }
    }
  });

  it('computes SLO attainment, error budget and burn rate across all pods: $pod (the pods seen in the time range) would drop pods a rollout replaced', () => {
    const exprs = allPanels(overview(exampleSettings())).flatMap((p) => (p.targets ?? []).map((t) => t.expr));
    const sloQueries = exprs.filter((e) => e.includes(METRICS.sloEvents.promName));
    expect(sloQueries.length).toBeGreaterThan(20);
    for (const expr of sloQueries) expect(expr).not.toContain('$pod');
    // The latency and traffic panels still follow the pod selection.
    expect(exprs.filter((e) => e.includes(`${METRICS.ttft.promName}_bucket`)).every((e) => e.includes('pod=~"$pod"'))).toBe(true);
  });

  it('keeps namespaces apart in every per-workload panel, so staging and prod are two lines under $namespace = All', () => {
    const targets = allPanels(overview(exampleSettings())).flatMap((p) => (p.targets ?? []).map((t) => ({ title: p.title, ...t })));
    const tokentap = targets.filter((t) => /\b(tokentap_|gen_ai_)/.test(t.expr) && !t.expr.includes('tokentap_gpu_') && !t.expr.includes('tokentap_dcgm_'));
    expect(tokentap.length).toBeGreaterThan(40);
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

  it('a workload-free configuration still renders a valid dashboard for the catch-all workload', () => {
    const settings = loadSettings({ flags: {}, env: {} });
    const json = overview(settings);
    expect(allPanels(json).map((p) => p.title)).toContain('default: TTFT p50 / p90 / p99');
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
