import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { loadSettings } from '../../src/config/load.js';
import { dashboardFileText, renderDashboards } from '../../src/render/dashboards.js';
import { allPanels, substituteVariables, type DashboardJson } from '../helpers/dashboard-json.js';
import { requireTools } from '../helpers/required-tools.js';

beforeAll(() => requireTools('promtool'));

/**
 * The dashboard's per-workload panels under a real PromQL engine (`promtool test rules`, no rule
 * file) with two deployments of workload chat, in namespaces prod and staging, and every variable
 * at All: each panel draws one series per namespace, with that namespace's own values, never one
 * merged series. Same traffic as the first group of namespaces.promtool.yaml: 100 chat requests a
 * minute in each namespace; in prod 40 of them reach their first token between 200ms and 400ms.
 * The per-workload panels are those of chat's copy of the repeated rows (`$workload` = chat).
 *
 * And workload rag, quiet: its counters exist in prod but no longer move (its traffic stopped): its
 * ratios and quantiles are NaN, which the panels show as "No traffic"; a workload with no series
 * at all (`gone`: not scraped) answers nothing, which the panels show as "No data".
 */
const HERE = fileURLToPath(new URL('.', import.meta.url));

/**
 * promtool's time, measured on the shared 2-core machine: one-page.promtool.yaml takes 6 s of CPU
 * (11 s wall at load 8), the other files 1-4 s. With two busy loops beside the suite it gets a
 * fraction of a core, so the default 30 s test timeout failed correct rules. promtool is given 120 s
 * (killed then, its output shown) and each test 150 s, so a hung promtool still fails the test.
 */
const PROMTOOL_TIMEOUT_MS = 120_000;
const PROMTOOL_TEST_TIMEOUT_MS = 150_000;
const ALL = { namespace: '.*', workload: '.*', pod: '(chat-prod-0|chat-staging-0|rag-prod-0)', model: '.*', __rate_interval: '5m' };

function series(namespace: string, name: string, labels: string, values: string): { series: string; values: string } {
  return { series: `${name}{namespace="${namespace}", pod="chat-${namespace}-0", workload="chat", gen_ai_request_model="m"${labels}}`, values };
}

/** The counters of the quiet workload rag: they exist, and stopped moving at 5m; it is evaluated at 70m. */
function quiet(name: string, labels: string): { series: string; values: string } {
  return { series: `${name}{namespace="prod", pod="rag-prod-0", workload="rag", gen_ai_request_model="m"${labels}}`, values: '0+10x5 50x65' };
}
const QUIET_AT = '70m';

const INPUT = [
  quiet('tokentap_slo_events_total', ', slo="ttft", result="good"'),
  quiet('tokentap_requests_total', ', outcome="completed", http_status_class="2xx"'),
  quiet('gen_ai_server_time_to_first_token_seconds_bucket', ', le="+Inf"'),
  quiet('gen_ai_server_time_to_first_token_seconds_sum', ''),
  quiet('gen_ai_server_time_to_first_token_seconds_count', ''),
  series('prod', 'tokentap_slo_events_total', ', slo="ttft", result="good"', '0+60x70'),
  series('prod', 'tokentap_slo_events_total', ', slo="ttft", result="bad"', '0+40x70'),
  series('staging', 'tokentap_slo_events_total', ', slo="ttft", result="good"', '0+100x70'),
  ...['prod', 'staging'].map((ns) => series(ns, 'tokentap_requests_total', ', outcome="completed", http_status_class="2xx"', '0+100x70')),
  ...['prod', 'staging'].map((ns) => series(ns, 'tokentap_requests_in_flight', '', '3x70')),
  ...[
    ['0.1', '0+60x70', '0+100x70'],
    ['0.2', '0+60x70', '0+100x70'],
    ['0.4', '0+100x70', '0+100x70'],
    ['+Inf', '0+100x70', '0+100x70'],
  ].flatMap(([le, prod, staging]) => [
    series('prod', 'gen_ai_server_time_to_first_token_seconds_bucket', `, le="${le}"`, prod as string),
    series('staging', 'gen_ai_server_time_to_first_token_seconds_bucket', `, le="${le}"`, staging as string),
  ]),
];

/** Panel title and legend → per namespace, the expected value of round(query * scale), and the labels besides namespace. */
const EXPECTED: Array<{ title: string; legend: string; scale: number; prod: number; staging: number; labels: string }> = [
  { title: '$workload: SLO attainment (30d)', legend: '{{slo}} {{namespace}}', scale: 1000, prod: 600, staging: 1000, labels: ', slo="ttft", workload="chat"' },
  { title: '$workload: error budget remaining (30d)', legend: '{{slo}} {{namespace}}', scale: 1, prod: -39, staging: 1, labels: ', slo="ttft", workload="chat"' },
  { title: '$workload: burn rate (1h)', legend: '{{slo}} {{namespace}}', scale: 1, prod: 40, staging: 0, labels: ', slo="ttft", workload="chat"' },
  // Prod: rank 99 of 100 is the 39th of 40 in (0.2, 0.4]: 0.2 + 0.2 * 39/40. Staging: 0.1 * 99/100.
  { title: '$workload: TTFT p50 / p90 / p99', legend: 'p99 {{namespace}}', scale: 1000, prod: 395, staging: 99, labels: '' },
  { title: 'Requests in flight', legend: '{{workload}} {{namespace}}', scale: 1, prod: 3, staging: 3, labels: ', workload="chat"' },
];

/**
 * Queries of the repeated rows (panel title, legend) that must tell a quiet workload (NaN) from one
 * not scraped (nothing): those over the quiet counters' last hour. The 30-day panels still see the
 * traffic of the first minutes, as they should.
 */
const QUIET_QUERIES: Array<[string, string]> = [
  ['$workload: burn rate (1h)', '{{slo}} {{namespace}}'],
  ['$workload: TTFT p50 / p90 / p99', 'p99 {{namespace}}'],
  ['$workload: where TTFT goes', 'wire TTFT {{namespace}}'],
  ['$workload: requests per second and goodput', 'requests {{namespace}}'],
];

let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tokentap-dashboard-ns-'));
});

afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

function promtoolTest(file: string): Promise<{ code: number; output: string }> {
  return new Promise((resolve) => {
    execFile('promtool', ['test', 'rules', file], { cwd: dir, timeout: PROMTOOL_TIMEOUT_MS }, (error, stdout, stderr) => {
      resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : -1, output: `${stdout}${stderr}` });
    });
  });
}

describe('dashboard panels with two namespaces under Prometheus', { timeout: PROMTOOL_TEST_TIMEOUT_MS }, () => {
  it('draw one series per namespace with its own value, every variable at All, and tell a quiet workload (NaN: "No traffic") from one never scraped (no series: "No data")', async () => {
    const config = await readFile(join(HERE, 'tokentap.yaml'), 'utf8');
    const settings = loadSettings({ flags: { config: 'tokentap.yaml' }, env: {}, readFile: () => config });
    const [rendered] = renderDashboards(settings);
    const panels = allPanels(JSON.parse(dashboardFileText(rendered as NonNullable<typeof rendered>)) as DashboardJson);
    const tests = EXPECTED.map(({ title, legend, scale, prod, staging, labels }) => {
      const target = panels.find((p) => p.title === title)?.targets?.find((t) => t.legendFormat === legend);
      expect(target, `${title} / ${legend}`).toBeDefined();
      const workload = title.startsWith('$workload') ? 'chat' : ALL.workload;
      return {
        expr: `round((${substituteVariables(target?.expr as string, { ...ALL, workload })}) * ${scale})`,
        eval_time: '60m',
        exp_samples: [
          { labels: `{namespace="prod"${labels}}`, value: prod },
          { labels: `{namespace="staging"${labels}}`, value: staging },
        ],
      };
    });
    // Only NaN is unequal to itself: `x != x` keeps exactly the NaN samples.
    for (const [title, legend] of QUIET_QUERIES) {
      const expr = panels.find((p) => p.title === title)?.targets?.find((t) => t.legendFormat === legend)?.expr;
      expect(expr, `${title} / ${legend}`).toBeDefined();
      const quietExpr = substituteVariables(expr as string, { ...ALL, workload: 'rag' });
      // A rate is 0 for a flat counter (shown as 0); a ratio or quantile of one is NaN ("No traffic").
      const quietSample = legend.startsWith('requests') ? `(${quietExpr}) == 0` : `(${quietExpr}) != (${quietExpr})`;
      tests.push({ expr: `count by (namespace) (${quietSample})`, eval_time: QUIET_AT, exp_samples: [{ labels: '{namespace="prod"}', value: 1 }] });
      tests.push({ expr: `absent(${substituteVariables(expr as string, { ...ALL, workload: 'gone' })})`, eval_time: QUIET_AT, exp_samples: [{ labels: '{}', value: 1 }] });
    }
    const file = { rule_files: [], evaluation_interval: '1m', tests: [{ name: 'per-namespace panels', interval: '1m', input_series: INPUT, promql_expr_test: tests }] };
    await writeFile(join(dir, 'panels.promtool.yaml'), stringify(file, { lineWidth: 0 }));
    const result = await promtoolTest('panels.promtool.yaml');
    expect(result.output).toContain('SUCCESS');
    expect(result.code, result.output).toBe(0);
  }, 60_000);
});
