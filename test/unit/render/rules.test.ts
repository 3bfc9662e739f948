import { PrometheusRule } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PrometheusRule';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { loadSettings } from '../../../src/config/load.js';
import { problemsOf } from '../../helpers/problems.js';
import { mergeTokentapRoutes, type AlertmanagerConfigFile } from '../../helpers/alertmanager-merge.js';
import { fencedBlocks, readDoc } from '../../helpers/docs.js';
import { BUILD_INFO, GPU_METRICS, METRICS, UPSTREAM_READY } from '../../../src/metrics/definitions.js';
import { AlertmanagerConfig } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1alpha1/AlertmanagerConfig';
import { renderAlertmanagerConfigCrd } from '../../../src/render/alertmanager-config-crd.js';
import { renderAlertmanagerRoutes } from '../../../src/render/alertmanager-routes.js';
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
alerts:
  grafana_url: https://grafana.example.com
  runbook_base_url: https://runbooks.example.com/tokentap
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

  it('records p50, p90 and p99 of TTFT, TTFT to the first answer token, ITL per token and e2e per namespace and workload from the classic buckets', () => {
    const quantiles = recordings(render()).filter((r) => /_seconds:p\d+_rate5m$/.test(r.record));
    expect(quantiles.map((r) => r.record)).toEqual(
      ['ttft', 'ttft_answer', 'itl', 'e2e'].flatMap((l) => ['p50', 'p90', 'p99'].map((p) => `tokentap:${l}_seconds:${p}_rate5m`)),
    );
    const p99 = quantiles.find((r) => r.record === 'tokentap:itl_seconds:p99_rate5m') as RecordingRule;
    expect(p99.expr).toBe(`histogram_quantile(0.99, sum by (namespace, workload, le) (rate(${METRICS.itlToken.promName}_bucket[5m])))`);
  });

  it('has a page and a ticket burn-rate alert for each configured threshold, and none for workloads or SLOs without one', () => {
    const burn = alerts(render()).filter((a) => a.alert === 'TokentapErrorBudgetBurn');
    expect(burn.map((a) => `${a.labels.workload}/${a.labels.slo}/${a.labels.severity}`)).toEqual([
      'chat/ttft/critical',
      'chat/ttft/warning',
      'chat/itl/critical',
      'chat/itl/warning',
      'rag/ttft/critical',
      'rag/ttft/warning',
      'rag/e2e/critical',
      'rag/e2e/warning',
    ]);
  });

  it('pages on 1h and 5m above 14.4x or 6h and 30m above 6x the budget, each pair with a traffic guard over its long window', () => {
    const page = alerts(render()).find((a) => a.labels.workload === 'rag' && a.labels.slo === 'e2e' && a.labels.severity === 'critical') as AlertingRule;
    expect(page.expr).toBe(
      [
        '(',
        '  tokentap:slo_error_ratio:rate1h{workload="rag", slo="e2e"} > (14.4 * 0.005)',
        '  and on (namespace, workload, slo)',
        '  tokentap:slo_error_ratio:rate5m{workload="rag", slo="e2e"} > (14.4 * 0.005)',
        '  and on (namespace, workload)',
        '  sum by (namespace, workload) (rate(tokentap_requests_total{workload="rag", operation!="other", outcome!="client_error"}[1h])) * 3600 >= 60',
        ')',
        'or',
        '(',
        '  tokentap:slo_error_ratio:rate6h{workload="rag", slo="e2e"} > (6 * 0.005)',
        '  and on (namespace, workload, slo)',
        '  tokentap:slo_error_ratio:rate30m{workload="rag", slo="e2e"} > (6 * 0.005)',
        '  and on (namespace, workload)',
        '  sum by (namespace, workload) (rate(tokentap_requests_total{workload="rag", operation!="other", outcome!="client_error"}[6h])) * 3600 >= 60',
        ')',
      ].join('\n'),
    );
  });

  it('opens a ticket on 1d and 2h above 3x or 3d and 6h above 1x the budget', () => {
    const ticket = alerts(render()).find((a) => a.labels.workload === 'chat' && a.labels.slo === 'ttft' && a.labels.severity === 'warning') as AlertingRule;
    expect(ticket.expr).toMatch(/rate1d\{workload="chat", slo="ttft"\} > \(3 \* 0\.01\)\n.*\n.*rate2h\{workload="chat", slo="ttft"\} > \(3 \* 0\.01\)/);
    expect(ticket.expr).toMatch(/rate3d\{workload="chat", slo="ttft"\} > \(1 \* 0\.01\)\n.*\n.*rate6h\{workload="chat", slo="ttft"\} > \(1 \* 0\.01\)/);
    expect(ticket.expr).toContain('[1d])) * 3600 >= 60');
    expect(ticket.expr).toContain('[3d])) * 3600 >= 60');
  });

  it('fires TokentapTTFTP99OverBudget per workload with a TTFT threshold after 15m by default, as a ticket, with at least 100 first tokens in its window', () => {
    const p99 = alerts(render()).filter((a) => a.alert === 'TokentapTTFTP99OverBudget');
    expect(p99.map((a) => [a.labels, a.for])).toEqual([
      [{ severity: 'warning', workload: 'chat', slo: 'ttft' }, '15m'],
      [{ severity: 'warning', workload: 'rag', slo: 'ttft' }, '15m'],
    ]);
    expect(p99[0]?.expr).toBe(
      'tokentap:ttft_seconds:p99_rate5m{workload="chat"} > 0.2\nand on (namespace, workload)\nsum by (namespace, workload) (increase(gen_ai_server_time_to_first_token_seconds_count{workload="chat"}[5m])) >= 100',
    );
  });

  it('judges a workload with ttft_on first_answer on the P99 of its first answer tokens, with their own sample guard', () => {
    const p99 = alerts(render(CONFIG.replace('slo: { objective: 0.99, ttft: 200ms, itl: 50ms }', 'slo: { objective: 0.99, ttft: 200ms, itl: 50ms, ttft_on: first_answer }'))).filter(
      (a) => a.alert === 'TokentapTTFTP99OverBudget',
    );
    expect(p99.map((a) => a.expr)).toEqual([
      'tokentap:ttft_answer_seconds:p99_rate5m{workload="chat"} > 0.2\nand on (namespace, workload)\nsum by (namespace, workload) (increase(tokentap_time_to_first_answer_token_seconds_count{workload="chat"}[5m])) >= 100',
      'tokentap:ttft_seconds:p99_rate5m{workload="rag"} > 0.3\nand on (namespace, workload)\nsum by (namespace, workload) (increase(gen_ai_server_time_to_first_token_seconds_count{workload="rag"}[5m])) >= 100',
    ]);
    expect(p99[0]?.annotations.summary).toContain('P99 TTFT to the first answer token above its 200ms threshold');
  });

  it('follows the alerts section of the config', () => {
    const file = render(`${CONFIG.replace('https://runbooks.example.com/tokentap', 'https://wiki.example.com/runbooks/tokentap/')}
  p99_ttft_for: 20m
  p99_ttft_severity: page
  p99_ttft_min_requests: 30
  min_requests_per_hour: 6
  severity_names: { page: P1, ticket: P3 }
  labels: { team: llm-platform, service: inference }
  absent_for: 3m
`);
    const p99 = alerts(file).find((a) => a.alert === 'TokentapTTFTP99OverBudget') as AlertingRule;
    expect(p99.for).toBe('20m');
    expect(p99.labels).toEqual({ severity: 'P1', workload: 'chat', slo: 'ttft', team: 'llm-platform', service: 'inference' });
    expect(p99.expr).toContain('[5m])) >= 30');
    expect(p99.annotations.runbook_url).toBe('https://wiki.example.com/runbooks/tokentap/TokentapTTFTP99OverBudget.md');
    expect(p99.annotations.dashboard_url).toBe('https://grafana.example.com/d/tokentap-slo-overview?var-workload=chat{{ with $labels.namespace }}&var-namespace={{ . | urlquery }}{{ end }}');
    const burn = alerts(file).filter((a) => a.alert === 'TokentapErrorBudgetBurn');
    expect(new Set(burn.map((a) => a.labels.severity))).toEqual(new Set(['P1', 'P3']));
    expect(burn[0]?.expr).toContain('* 3600 >= 6');
    expect(burn[0]?.annotations.runbook_url).toBe('https://wiki.example.com/runbooks/tokentap/TokentapErrorBudgetBurn-ttft.md');
    expect(alerts(file).find((a) => a.alert === 'TokentapMetricsAbsent')?.for).toBe('3m');
    expect(alerts(file).find((a) => a.alert === 'TokentapTargetDown')?.for).toBe('3m');
    for (const alert of alerts(file)) expect(alert.labels, alert.alert).toMatchObject({ team: 'llm-platform', service: 'inference' });
    const routes = renderAlertmanagerRoutes(load(`${CONFIG}\n  severity_names: { page: P1, ticket: P3 }\n`).alerts);
    expect(JSON.stringify(routes)).toContain('"severity=\\"P1\\""');
  });

  it('renders no P99 alert when it is off', () => {
    expect(alerts(render(`${CONFIG}\n  p99_ttft_severity: off\n`)).filter((a) => a.alert === 'TokentapTTFTP99OverBudget')).toEqual([]);
  });

  it('names the bucket bounds the estimated P99 lies between, from the configured TTFT buckets and every workload\'s threshold', () => {
    const p99 = alerts(render(`${CONFIG}\nmetrics:\n  buckets:\n    ttft: [0.1, 0.5, 1]\n`)).find((a) => a.alert === 'TokentapTTFTP99OverBudget') as AlertingRule;
    expect(p99.annotations.description).toContain(
      'the true P99 lies {{ if ge $value 1.0 }}at or above the largest bucket bound, 1s (how far above, the buckets cannot tell){{ else if le $value 0.3 }}between the bucket bounds 200ms and 300ms{{ else if le $value 0.5 }}between the bucket bounds 300ms and 500ms{{ else if le $value 1.0 }}between the bucket bounds 500ms and 1s{{ else }}above 200ms{{ end }}.',
    );
  });

  it('refuses to render without grafana_url or runbook_base_url, naming the config file and each key', () => {
    const settings = load(CONFIG.replace(/alerts:\n(  .*\n)+/, ''));
    expect(problemsOf(() => renderArtefacts(settings, { windowScale: 1 })).map((p) => p.replace(/ required by tokentap render: .*/, ''))).toEqual([
      't.yaml: alerts.grafana_url:',
      't.yaml: alerts.runbook_base_url:',
    ]);
  });

  it('watches the sidecar targets the configured selector names, and each expected namespace for absent metrics', () => {
    const meta = (yaml: string) => alerts(render(yaml)).filter((a) => a.alert === 'TokentapTargetDown' || a.alert === 'TokentapMetricsAbsent');
    expect(meta(CONFIG).map((a) => [a.alert, a.expr, a.labels])).toEqual([
      ['TokentapTargetDown', 'up{job=~"(.+/)?tokentap", endpoint=~"metrics|"} == 0', { severity: 'warning' }],
      ['TokentapMetricsAbsent', 'absent(tokentap_build_info)', { severity: 'warning' }],
    ]);
    const configured = meta(`${CONFIG}  scrape_selector: 'job="kubernetes-pods", container="tokentap"'\n  expected_namespaces: [prod, staging]\n`);
    expect(configured.map((a) => [a.alert, a.expr, a.labels])).toEqual([
      ['TokentapTargetDown', 'up{job="kubernetes-pods", container="tokentap"} == 0', { severity: 'warning' }],
      ['TokentapMetricsAbsent', 'absent(tokentap_build_info{namespace="prod"})', { severity: 'warning', namespace: 'prod' }],
      ['TokentapMetricsAbsent', 'absent(tokentap_build_info{namespace="staging"})', { severity: 'warning', namespace: 'staging' }],
    ]);
  });

  it('gives every alert a severity label and summary, description, runbook and dashboard links; every SLO alert workload and slo', () => {
    const all = alerts(render());
    expect([...new Set(all.map((a) => a.alert))]).toEqual(['TokentapErrorBudgetBurn', 'TokentapTTFTP99OverBudget', 'TokentapCapacityHeadroomLow', 'TokentapWatchdog', 'TokentapTargetDown', 'TokentapUpstreamDown', 'TokentapMetricsAbsent', 'TokentapSLONotInRules']);
    for (const alert of all) {
      const expected = alert.alert === 'TokentapErrorBudgetBurn' || alert.alert === 'TokentapTTFTP99OverBudget' ? ['severity', 'slo', 'workload'] : ['severity'];
      expect(Object.keys(alert.labels).sort(), alert.alert).toEqual(expected);
      expect(Object.keys(alert.annotations).sort()).toEqual(['dashboard_url', 'description', 'runbook_url', 'summary']);
      for (const text of Object.values(alert.annotations)) expect(text.length).toBeGreaterThan(0);
      expect(alert.annotations.dashboard_url, alert.alert).toMatch(/^https:\/\/grafana\.example\.com\/d\/tokentap-slo-overview\?/);
    }
  });

  it('labels the watchdog with its severity and the configured static labels only: no made-up workload or SLO', () => {
    const watchdog = alerts(render(`${CONFIG}  labels: { team: llm-platform }\n`)).find((a) => a.alert === 'TokentapWatchdog') as AlertingRule;
    expect(watchdog.labels).toEqual({ severity: 'none', team: 'llm-platform' });
  });

  it('names only metrics the sidecar emits or the rules record', () => {
    const file = render();
    const emitted = new Set(
      [...Object.values(METRICS), ...Object.values(GPU_METRICS), BUILD_INFO, UPSTREAM_READY].flatMap((m) =>
        m.kind === 'histogram' ? [`${m.promName}_bucket`, `${m.promName}_sum`, `${m.promName}_count`] : [m.promName],
      ),
    );
    const recorded = new Set(recordings(file).map((r) => r.record));
    // `up` is Prometheus' own series of each scrape target.
    const functions = new Set(['sum', 'by', 'rate', 'increase', 'or', 'and', 'on', 'unless', 'absent', 'vector', 'histogram_quantile', 'le', 'up', 'min', 'max', 'max_over_time', 'ceil', 'bool', 'group_left', 'group_right', 'count']);
    for (const rule of file.groups.flatMap((g) => g.rules)) {
      // Identifiers outside label matchers, range selectors and string literals.
      const bare = rule.expr.replace(/\{[^}]*\}/g, '').replace(/\[[^\]]*\]/g, '').replace(/"[^"]*"/g, '');
      for (const name of bare.match(/[a-zA-Z_:][a-zA-Z0-9_:]*/g) ?? []) {
        if (functions.has(name) || /^(namespace|workload|slo|outcome|gen_ai_token_type|in_flight|pod|instance)$/.test(name)) continue;
        expect(emitted.has(name) || recorded.has(name), `${name} in ${rule.expr}`).toBe(true);
      }
    }
  });

  it('keeps the namespace in every aggregation and every match, so one workload name in two namespaces is two SLIs and two alerts', () => {
    const rules = render().groups.flatMap((g) => g.rules);
    const clauses = rules.flatMap((r) => r.expr.match(/\b(by|on) \([^)]*\)/g) ?? []);
    expect(clauses.length).toBeGreaterThan(50);
    // `on (in_flight)` joins a band to its constant upper bound (capacity-rules.ts), and `on (workload,
    // slo)` SLO events to the objective constants (slo-not-in-rules-alert.ts): constants have no namespace.
    for (const clause of clauses.filter((c) => c !== 'on (in_flight)' && c !== 'on (workload, slo)')) expect(clause, clause).toMatch(/^(by|on) \(namespace(, workload\b|, pod, instance\)|\))/);
    // Every binary `and` names what it matches on; a bare one would match on whatever labels the sides carry.
    for (const rule of rules) expect(rule.expr, rule.expr).not.toMatch(/\band\s*\n/);
  });

  it('names the namespace in alert texts and dashboard links only when the alert has one', () => {
    const p99 = alerts(render()).find((a) => a.alert === 'TokentapTTFTP99OverBudget') as AlertingRule;
    expect(p99.annotations.summary).toBe('chat{{ with $labels.namespace }} in namespace {{ . }}{{ end }}: P99 TTFT above its 200ms threshold');
    expect(p99.annotations.dashboard_url).toBe('https://grafana.example.com/d/tokentap-slo-overview?var-workload=chat{{ with $labels.namespace }}&var-namespace={{ . | urlquery }}{{ end }}');
    const watchdog = alerts(render()).find((a) => a.alert === 'TokentapWatchdog') as AlertingRule;
    expect(watchdog.annotations.dashboard_url).toBe('https://grafana.example.com/d/tokentap-slo-overview?{{ with $labels.namespace }}var-namespace={{ . | urlquery }}{{ end }}');
  });

  it('selects no bucket by an exact le (Prometheus 3 writes integer le values as "3.0")', () => {
    for (const rule of render().groups.flatMap((g) => g.rules)) expect(rule.expr).not.toMatch(/\ble\s*=\s*"/);
  });
});

describe('the Alertmanager routes', () => {
  const routes = () =>
    renderAlertmanagerRoutes(load(CONFIG).alerts) as {
      route: { routes: Array<{ matchers: string[]; group_by: string[]; routes: Array<{ receiver: string; matchers: string[]; group_by?: string[] }> }> };
      inhibit_rules: Array<{ source_matchers: string[]; target_matchers: string[]; equal: string[] }>;
    };

  it('take only tokentap alerts, grouped per namespace, workload and SLO, pages per namespace alone, and route them by the configured severity names', () => {
    const [route] = routes().route.routes;
    expect(route?.matchers).toEqual(['alertname=~"Tokentap.+"']);
    expect(route?.group_by).toEqual(['alertname', 'namespace', 'workload', 'slo']);
    expect(route?.routes.map((r) => [r.receiver, r.matchers, r.group_by])).toEqual([
      ['tokentap-watchdog', ['alertname="TokentapWatchdog"'], undefined],
      ['tokentap-page', ['severity="critical"'], ['namespace']],
      ['tokentap-ticket', ['severity="warning"'], undefined],
    ]);
    const crd = renderAlertmanagerConfigCrd(load(CONFIG).alerts) as { spec: { route: { routes: Array<{ receiver: string; groupBy?: string[] }> } } };
    expect(crd.spec.route.routes.map((r) => [r.receiver, r.groupBy])).toEqual([
      ['tokentap-watchdog', undefined],
      ['tokentap-page', ['namespace']],
      ['tokentap-ticket', undefined],
    ]);
  });

  it('are, merged into the "Before" configuration of docs/alerts.md, its "After" configuration as written, receivers and their placeholders included', () => {
    const page = readDoc('docs/alerts.md');
    const section = page.slice(page.indexOf('\nBefore:\n'));
    const [before, after] = fencedBlocks(section, 'yaml').map((block) => parse(block) as AlertmanagerConfigFile);
    const snippet = renderAlertmanagerRoutes(load(CONFIG).alerts) as Parameters<typeof mergeTokentapRoutes>[1];
    const merged = mergeTokentapRoutes(before as AlertmanagerConfigFile, snippet);
    expect(after?.route).toEqual(merged.route);
    expect(after?.inhibit_rules).toEqual(merged.inhibit_rules);
    // Placeholders and PagerDuty links as rendered (amtool accepts them: test/promtool/alerts-page-snippets.test.ts runs it on the page's "After").
    expect(after?.receivers).toEqual(merged.receivers);
  });

  it('hold back tokentap tickets behind a page, and the P99 alert behind the burn-rate page, per namespace, workload and SLO', () => {
    expect(routes().inhibit_rules).toEqual([
      { source_matchers: ['alertname=~"Tokentap.+"', 'severity="critical"'], target_matchers: ['alertname=~"Tokentap.+"', 'severity="warning"'], equal: ['namespace', 'workload', 'slo'] },
      { source_matchers: ['alertname="TokentapErrorBudgetBurn"', 'severity="critical"'], target_matchers: ['alertname="TokentapTTFTP99OverBudget"'], equal: ['namespace', 'workload', 'slo'] },
    ]);
  });

  it('are also an AlertmanagerConfig that passes the prometheus-operator schema, with the same matchers', () => {
    const crd = new AlertmanagerConfig(renderAlertmanagerConfigCrd(load(CONFIG).alerts) as ConstructorParameters<typeof AlertmanagerConfig>[0]);
    expect(() => crd.validate()).not.toThrow();
    expect(crd.spec?.route?.matchers).toEqual([{ name: 'alertname', matchType: '=~', value: 'Tokentap.+' }]);
    // The operator's link text field is `alt`; the links are the plain snippet's.
    const plain = (renderAlertmanagerRoutes(load(CONFIG).alerts) as { receivers: Array<{ name: string; pagerduty_configs?: Array<{ links: Array<{ href: string; text: string }> }> }> }).receivers.find((r) => r.name === 'tokentap-page');
    expect(crd.spec?.receivers?.find((r) => r.name === 'tokentap-page')?.pagerdutyConfigs?.[0]?.pagerDutyLinkConfigs).toEqual(
      plain?.pagerduty_configs?.[0]?.links.map((l) => ({ href: l.href, alt: l.text })),
    );
    expect(crd.spec?.inhibitRules?.map((r) => r.targetMatch)).toEqual([
      [{ name: 'alertname', matchType: '=~', value: 'Tokentap.+' }, { name: 'severity', matchType: '=', value: 'warning' }],
      [{ name: 'alertname', matchType: '=', value: 'TokentapTTFTP99OverBudget' }],
    ]);
  });
});

describe('test-sized windows', () => {
  it('scales every rule window and for: duration but keeps the recorded names', () => {
    const file = render(CONFIG, 0.01);
    const ratio = recordings(file).find((r) => r.record === 'tokentap:slo_error_ratio:rate1h') as RecordingRule;
    expect(ratio.expr).toContain('[36s]');
    const page = alerts(file).find((a) => a.labels.severity === 'critical' && a.alert === 'TokentapErrorBudgetBurn') as AlertingRule;
    expect(page.expr).toContain('tokentap:slo_error_ratio:rate1h{');
    expect(page.expr).toContain('[36s])) * 3600 >= 60');
    expect(page.annotations.description).toContain('over both 36s and 3s');
    const p99 = alerts(file).find((a) => a.alert === 'TokentapTTFTP99OverBudget') as AlertingRule;
    expect(p99.for).toBe('9s');
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
