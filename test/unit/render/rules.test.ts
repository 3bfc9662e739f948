import { PrometheusRule } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PrometheusRule';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { loadSettings } from '../../../src/config/load.js';
import { GPU_METRICS, METRICS } from '../../../src/metrics/definitions.js';
import { renderAlertmanagerConfig } from '../../../src/render/alertmanager-config.js';
import { renderArtefacts } from '../../../src/render/artefacts.js';
import { formatPromDuration } from '../../../src/render/prometheus-duration.js';
import { renderPrometheusRule } from '../../../src/render/prometheus-rule-crd.js';
import { renderPrometheusRules } from '../../../src/render/prometheus-rules.js';
import type { AlertingRule, RecordingRule, RuleFile } from '../../../src/render/rule-types.js';

const CONFIG = `
workloads:
  - name: chat
    match: { header: { x-workload: chat } }
    slo: { objective: 0.99, ttft: 200ms, itl: 50ms }
  - name: rag
    match: { header: { x-workload: rag } }
    slo: { objective: 0.995, ttft: 300ms, e2e: 3s }
  - name: default
`;

const load = (yaml: string) => loadSettings({ flags: { config: 't.yaml' }, env: {}, readFile: () => yaml });
const render = (yaml = CONFIG, windowScale = 1) => renderPrometheusRules(load(yaml), { windowScale });
const alerts = (file: RuleFile) => file.groups.flatMap((g) => g.rules).filter((r): r is AlertingRule => 'alert' in r);
const recordings = (file: RuleFile) => file.groups.flatMap((g) => g.rules).filter((r): r is RecordingRule => 'record' in r);

describe('formatPromDuration', () => {
  it('writes the largest units first, as Prometheus does', () => {
    expect([300_000, 3_600_000, 86_400_000, 259_200_000, 2_592_000, 3500, 6000].map(formatPromDuration)).toEqual(['5m', '1h', '1d', '3d', '43m12s', '3s500ms', '6s']);
  });

  it('refuses what no rule can use', () => {
    expect(() => formatPromDuration(0)).toThrow(RangeError);
    expect(() => formatPromDuration(1.5)).toThrow(RangeError);
  });
});

describe('rendered rules', () => {
  it('records the SLI error ratio per namespace, workload and SLO over the seven burn-rate windows', () => {
    const names = recordings(render()).map((r) => r.record).filter((n) => n.startsWith('tokentap:slo_error_ratio:'));
    expect(names).toEqual(['5m', '30m', '1h', '2h', '6h', '1d', '3d'].map((w) => `tokentap:slo_error_ratio:rate${w}`));
    const oneHour = recordings(render()).find((r) => r.record === 'tokentap:slo_error_ratio:rate1h') as RecordingRule;
    expect(oneHour.expr).toContain('sum by (namespace, workload, slo) (rate(tokentap_slo_events_total{result="bad"}[1h]))');
    expect(oneHour.expr).toContain('(sum by (namespace, workload, slo) (rate(tokentap_slo_events_total[1h])) > 0)');
  });

  it('records p50, p90 and p99 of TTFT, ITL per token and e2e per namespace and workload from the classic buckets', () => {
    const quantiles = recordings(render()).filter((r) => /_seconds:p\d+_rate5m$/.test(r.record));
    expect(quantiles.map((r) => r.record)).toEqual(
      ['ttft', 'itl', 'e2e'].flatMap((l) => ['p50', 'p90', 'p99'].map((p) => `tokentap:${l}_seconds:${p}_rate5m`)),
    );
    const p99 = quantiles.find((r) => r.record === 'tokentap:itl_seconds:p99_rate5m') as RecordingRule;
    expect(p99.expr).toBe(`histogram_quantile(0.99, sum by (namespace, workload, le) (rate(${METRICS.itlToken.promName}_bucket[5m])))`);
  });

  it('has a page and a ticket burn-rate alert for each configured threshold, and none for workloads or SLOs without one', () => {
    const burn = alerts(render()).filter((a) => a.alert === 'TokentapErrorBudgetBurn');
    expect(burn.map((a) => `${a.labels.workload}/${a.labels.slo}/${a.labels.severity}`)).toEqual([
      'chat/ttft/page',
      'chat/ttft/ticket',
      'chat/itl/page',
      'chat/itl/ticket',
      'rag/ttft/page',
      'rag/ttft/ticket',
      'rag/e2e/page',
      'rag/e2e/ticket',
    ]);
  });

  it('pages on 1h and 5m above 14.4x or 6h and 30m above 6x the budget, each pair with a traffic guard over its long window', () => {
    const page = alerts(render()).find((a) => a.labels.workload === 'rag' && a.labels.slo === 'e2e' && a.labels.severity === 'page') as AlertingRule;
    expect(page.expr).toBe(
      [
        '(',
        '  tokentap:slo_error_ratio:rate1h{workload="rag", slo="e2e"} > (14.4 * 0.005)',
        '  and on (namespace, workload, slo)',
        '  tokentap:slo_error_ratio:rate5m{workload="rag", slo="e2e"} > (14.4 * 0.005)',
        '  and on (namespace, workload)',
        '  sum by (namespace, workload) (rate(tokentap_requests_total{workload="rag", operation!="other"}[1h])) * 3600 >= 60',
        ')',
        'or',
        '(',
        '  tokentap:slo_error_ratio:rate6h{workload="rag", slo="e2e"} > (6 * 0.005)',
        '  and on (namespace, workload, slo)',
        '  tokentap:slo_error_ratio:rate30m{workload="rag", slo="e2e"} > (6 * 0.005)',
        '  and on (namespace, workload)',
        '  sum by (namespace, workload) (rate(tokentap_requests_total{workload="rag", operation!="other"}[6h])) * 3600 >= 60',
        ')',
      ].join('\n'),
    );
  });

  it('opens a ticket on 1d and 2h above 3x or 3d and 6h above 1x the budget', () => {
    const ticket = alerts(render()).find((a) => a.labels.workload === 'chat' && a.labels.slo === 'ttft' && a.labels.severity === 'ticket') as AlertingRule;
    expect(ticket.expr).toMatch(/rate1d\{workload="chat", slo="ttft"\} > \(3 \* 0\.01\)\n.*\n.*rate2h\{workload="chat", slo="ttft"\} > \(3 \* 0\.01\)/);
    expect(ticket.expr).toMatch(/rate3d\{workload="chat", slo="ttft"\} > \(1 \* 0\.01\)\n.*\n.*rate6h\{workload="chat", slo="ttft"\} > \(1 \* 0\.01\)/);
    expect(ticket.expr).toContain('[1d])) * 3600 >= 60');
    expect(ticket.expr).toContain('[3d])) * 3600 >= 60');
  });

  it('fires TokentapTTFTP99OverBudget per workload with a TTFT threshold after 10m by default, as a page', () => {
    const p99 = alerts(render()).filter((a) => a.alert === 'TokentapTTFTP99OverBudget');
    expect(p99.map((a) => [a.labels, a.for])).toEqual([
      [{ severity: 'page', workload: 'chat', slo: 'ttft' }, '10m'],
      [{ severity: 'page', workload: 'rag', slo: 'ttft' }, '10m'],
    ]);
    expect(p99[0]?.expr).toBe(
      'tokentap:ttft_seconds:p99_rate5m{workload="chat"} > 0.2\nand on (namespace, workload)\nsum by (namespace, workload) (rate(tokentap_requests_total{workload="chat", operation!="other"}[5m])) * 3600 >= 60',
    );
  });

  it('follows the alerts section of the config', () => {
    const file = render(`${CONFIG}
alerts:
  p99_ttft_for: 15m
  p99_ttft_severity: ticket
  min_requests_per_hour: 6
  runbook_url: https://wiki.example.com/runbooks/tokentap
  dashboard_url: https://grafana.example.com/d/abc?orgId=2
`);
    const p99 = alerts(file).find((a) => a.alert === 'TokentapTTFTP99OverBudget') as AlertingRule;
    expect(p99.for).toBe('15m');
    expect(p99.labels.severity).toBe('ticket');
    expect(p99.expr).toContain('* 3600 >= 6');
    expect(p99.annotations.runbook_url).toBe('https://wiki.example.com/runbooks/tokentap#tokentapttftp99overbudget');
    expect(p99.annotations.dashboard_url).toBe('https://grafana.example.com/d/abc?orgId=2&var-workload=chat{{ with $labels.namespace }}&var-namespace={{ . | urlquery }}{{ end }}');
  });

  it('gives every alert severity, workload and slo labels and summary, description, runbook and dashboard links', () => {
    const all = alerts(render());
    expect(all.map((a) => a.alert)).toContain('Watchdog');
    for (const alert of all) {
      expect(Object.keys(alert.labels).sort()).toEqual(['severity', 'slo', 'workload']);
      expect(Object.keys(alert.annotations).sort()).toEqual(['dashboard_url', 'description', 'runbook_url', 'summary']);
      for (const text of Object.values(alert.annotations)) expect(text.length).toBeGreaterThan(0);
    }
  });

  it('names only metrics the sidecar emits or the rules record', () => {
    const file = render();
    const emitted = new Set(
      [...Object.values(METRICS), ...Object.values(GPU_METRICS)].flatMap((m) =>
        m.kind === 'histogram' ? [`${m.promName}_bucket`, `${m.promName}_sum`, `${m.promName}_count`] : [m.promName],
      ),
    );
    const recorded = new Set(recordings(file).map((r) => r.record));
    const functions = new Set(['sum', 'by', 'rate', 'or', 'and', 'on', 'vector', 'histogram_quantile', 'le']);
    for (const rule of file.groups.flatMap((g) => g.rules)) {
      // Identifiers outside label matchers, range selectors and string literals.
      const bare = rule.expr.replace(/\{[^}]*\}/g, '').replace(/\[[^\]]*\]/g, '').replace(/"[^"]*"/g, '');
      for (const name of bare.match(/[a-zA-Z_:][a-zA-Z0-9_:]*/g) ?? []) {
        if (functions.has(name) || /^(namespace|workload|slo|outcome|gen_ai_token_type)$/.test(name)) continue;
        expect(emitted.has(name) || recorded.has(name), `${name} in ${rule.expr}`).toBe(true);
      }
    }
  });

  it('keeps the namespace in every aggregation and every match, so one workload name in two namespaces is two SLIs and two alerts', () => {
    const rules = render().groups.flatMap((g) => g.rules);
    const clauses = rules.flatMap((r) => r.expr.match(/\b(by|on) \([^)]*\)/g) ?? []);
    expect(clauses.length).toBeGreaterThan(50);
    for (const clause of clauses) expect(clause, clause).toMatch(/^(by|on) \(namespace, workload\b/);
    // Every binary `and` names what it matches on; a bare one would match on whatever labels the sides carry.
    for (const rule of rules) expect(rule.expr, rule.expr).not.toMatch(/\band\s*\n/);
  });

  it('names the namespace in alert texts and dashboard links only when the alert has one', () => {
    const p99 = alerts(render()).find((a) => a.alert === 'TokentapTTFTP99OverBudget') as AlertingRule;
    expect(p99.annotations.summary).toBe('chat{{ with $labels.namespace }} in namespace {{ . }}{{ end }}: P99 TTFT above its 200ms budget');
    expect(p99.annotations.dashboard_url).toBe('/d/tokentap-slo-overview?var-workload=chat{{ with $labels.namespace }}&var-namespace={{ . | urlquery }}{{ end }}');
    const watchdog = alerts(render()).find((a) => a.alert === 'Watchdog') as AlertingRule;
    expect(watchdog.annotations.dashboard_url).toBe('/d/tokentap-slo-overview');
  });

  it('selects no bucket by an exact le (Prometheus 3 writes integer le values as "3.0")', () => {
    for (const rule of render().groups.flatMap((g) => g.rules)) expect(rule.expr).not.toMatch(/\ble\s*=\s*"/);
  });
});

describe('the Alertmanager example', () => {
  it('groups and inhibits per namespace, workload and SLO: a page in prod neither merges with nor silences staging', () => {
    const config = renderAlertmanagerConfig() as { route: { group_by: string[] }; inhibit_rules: Array<{ equal: string[] }> };
    expect(config.route.group_by).toEqual(['alertname', 'namespace', 'workload', 'slo']);
    expect(config.inhibit_rules.map((r) => r.equal)).toEqual([['namespace', 'workload', 'slo']]);
  });
});

describe('test-sized windows', () => {
  it('scales every rule window and for: duration but keeps the recorded names', () => {
    const file = render(CONFIG, 0.01);
    const ratio = recordings(file).find((r) => r.record === 'tokentap:slo_error_ratio:rate1h') as RecordingRule;
    expect(ratio.expr).toContain('[36s]');
    const page = alerts(file).find((a) => a.labels.severity === 'page' && a.alert === 'TokentapErrorBudgetBurn') as AlertingRule;
    expect(page.expr).toContain('tokentap:slo_error_ratio:rate1h{');
    expect(page.expr).toContain('[36s])) * 3600 >= 60');
    expect(page.annotations.description).toContain('over both 36s and 3s');
    const p99 = alerts(file).find((a) => a.alert === 'TokentapTTFTP99OverBudget') as AlertingRule;
    expect(p99.for).toBe('6s');
    expect(recordings(file).find((r) => r.record === 'tokentap:ttft_seconds:p99_rate5m')?.expr).toContain('[3s]');
  });
});

describe('generated files', () => {
  it('are byte-for-byte the same on every render and start with the generated-file header', () => {
    const first = renderArtefacts(load(CONFIG), { windowScale: 1 });
    const second = renderArtefacts(load(CONFIG), { windowScale: 1 });
    expect(second).toEqual(first);
    for (const artefact of first.filter((a) => a.path.endsWith('.yaml'))) {
      expect(artefact.content.startsWith('# generated by tokentap render; do not edit\n')).toBe(true);
    }
  });

  it('write the rule file that was rendered, readable as YAML without anchors', () => {
    const settings = load(CONFIG);
    const rulesFile = renderArtefacts(settings, { windowScale: 1 }).find((a) => a.path === 'prometheus/rules.yaml');
    expect(rulesFile?.content).not.toMatch(/[&*]a\d/);
    expect(parse(rulesFile?.content ?? '')).toEqual(JSON.parse(JSON.stringify(renderPrometheusRules(settings, { windowScale: 1 }))));
  });

  it('wraps the same groups in a PrometheusRule that passes the prometheus-operator schema', () => {
    const rules = render();
    const crd = new PrometheusRule(renderPrometheusRule(rules) as ConstructorParameters<typeof PrometheusRule>[0]);
    expect(() => crd.validate()).not.toThrow();
    expect(crd.spec?.groups).toEqual(rules.groups);
  });
});
