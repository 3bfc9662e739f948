import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadSettings } from '../../src/config/load.js';
import { renderArtefacts } from '../../src/render/artefacts.js';
import type { RenderOptions } from '../../src/render/rule-types.js';
import { SIM_HEADER, startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { startPrometheus, type PromAlert, type PrometheusServer } from '../helpers/prometheus-server.js';
import { startTestSidecar } from '../helpers/sidecar.js';

/**
 * The alerts as on-call meets them, from both scrapes of one sidecar: a Prometheus 2.42 scraping
 * text with the classic rules, and one with `--enable-feature=native-histograms` (protobuf first:
 * the classic `_bucket`, `_count` and `_sum` series of the request histograms are not ingested) with
 * the rules rendered `--histograms native`, as docs/native-histograms.md tells users to switch. Both
 * see the same traffic, at a fiftieth of the rule windows (5m is 6 s, 1h is 72 s):
 *
 * - chat: first tokens at 400 ms against a 250 ms budget, every request;
 * - api: an upstream answering 503 to every request at once (the model server down: a fast
 *   failure, no first token, no full answer).
 *
 * In each Prometheus the P99 ticket must fire for chat, and the burn-rate page for api's TTFT and
 * e2e SLOs; and every metric the alerting groups read must have series there, since a rule over a
 * series that is never ingested is an alert that never fires.
 */

const CONFIG = `
workloads:
  - name: chat
    match: { header: { x-workload: chat } }
    slo: { objective: 0.99, ttft: 250ms }
  - name: api
    match: { header: { x-workload: api } }
    slo: { objective: 0.99, ttft: 250ms, e2e: 2s }
  - name: default
metrics:
  histograms: both
alerts:
  grafana_url: https://grafana.example.com
  runbook_base_url: https://runbooks.example.com/tokentap
  p99_ttft_for: 5m
  p99_ttft_min_requests: 10
`;
const WINDOW_SCALE = 0.02;
/** Bounds on the traffic: it runs until both Prometheus servers fire every expected alert, or this long. */
const TRAFFIC_MAX_MS = 120_000;
const TRAFFIC_MAX_REQUESTS = 4_000;
const ALERTING_GROUPS = new Set(['tokentap-slo', 'tokentap-latency', 'tokentap-meta']);
type HistogramsKind = NonNullable<RenderOptions['histograms']>;
const KINDS: HistogramsKind[] = ['classic', 'native'];

let simulator: RunningSimulator;
let sidecar: Awaited<ReturnType<typeof startTestSidecar>>;
let rulesDir: string;
const prometheus = new Map<HistogramsKind, PrometheusServer>();
/** Every alert each Prometheus showed firing while the traffic ran. */
const fired = new Map<HistogramsKind, PromAlert[]>();
let sent = 0;

function request(workload: 'chat' | 'api'): Promise<void> {
  sent++;
  const headers: Record<string, string> = { 'content-type': 'application/json', 'x-workload': workload, [SIM_HEADER.outputTokens]: '3', [SIM_HEADER.itlMs]: '5' };
  if (workload === 'chat') headers[SIM_HEADER.ttftMs] = '400';
  else headers[SIM_HEADER.fault] = 'status:503';
  return fetch(`${sidecar.proxyUrl}/v1/chat/completions`, {
    method: 'POST',
    headers,
    body: JSON.stringify({ model: 'sim-model', stream: true, max_tokens: 3, messages: [{ role: 'user', content: 'hi' }] }),
    signal: AbortSignal.timeout(20_000),
  }).then((response) => response.arrayBuffer().then(() => undefined));
}

const EXPECTED = [
  { alertname: 'TokentapTTFTP99OverBudget', workload: 'chat', slo: 'ttft', severity: 'warning' },
  { alertname: 'TokentapErrorBudgetBurn', workload: 'api', slo: 'ttft', severity: 'critical' },
  { alertname: 'TokentapErrorBudgetBurn', workload: 'api', slo: 'e2e', severity: 'critical' },
];
const has = (alerts: PromAlert[], want: Record<string, string>) =>
  alerts.some((a) => a.state === 'firing' && Object.entries(want).every(([k, v]) => a.labels[k] === v));

beforeAll(async () => {
  simulator = await startSimulator({ port: 0 });
  sidecar = await startTestSidecar(simulator.url, CONFIG);
  const settings = loadSettings({ flags: { config: 'test.yaml' }, env: {}, readFile: () => CONFIG });
  rulesDir = await mkdtemp(join(tmpdir(), 'tokentap-both-scrapes-'));
  for (const kind of KINDS) {
    const rules = renderArtefacts(settings, { windowScale: WINDOW_SCALE, histograms: kind }).find((a) => a.path === 'prometheus/rules.yaml');
    const file = join(rulesDir, `${kind}.yaml`);
    await writeFile(file, rules?.content ?? '');
    prometheus.set(kind, await startPrometheus({
      scrapeTargets: [{ url: `${sidecar.adminUrl}/metrics`, job: 'tokentap' }],
      ruleFiles: [file],
      featureFlags: kind === 'native' ? ['native-histograms'] : [],
    }));
    fired.set(kind, []);
  }
  // A readiness probe, as the kubelet sends every 5 s: it sets tokentap_upstream_ready, which TokentapUpstreamDown reads.
  expect((await fetch(`${sidecar.adminUrl}/readyz`)).status).toBe(200);
  for (const server of prometheus.values()) await server.waitFor('the sidecar scraped', 'up', (r) => r[0]?.value === 1, 30_000);

  // Two chat lanes (about 4 requests a second: 25 first tokens per 6 s window, above the guard of
  // 10) and one api lane with a pause (its 503s take milliseconds).
  let stop = false;
  const started = performance.now();
  const done = () => stop || sent >= TRAFFIC_MAX_REQUESTS || performance.now() - started > TRAFFIC_MAX_MS;
  const lane = async (workload: 'chat' | 'api', pauseMs: number) => {
    while (!done()) {
      await request(workload);
      if (pauseMs > 0) await new Promise((resolve) => setTimeout(resolve, pauseMs));
    }
  };
  const watch = async () => {
    while (!done()) {
      for (const [kind, server] of prometheus) {
        const alerts = await server.alerts();
        fired.get(kind)?.push(...alerts.filter((a) => a.state === 'firing'));
      }
      if (KINDS.every((kind) => EXPECTED.every((want) => has(fired.get(kind) ?? [], want)))) stop = true;
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
  };
  await Promise.all([lane('chat', 0), lane('chat', 0), lane('api', 100), watch()]);
}, TRAFFIC_MAX_MS + 90_000);

afterAll(async () => {
  for (const server of prometheus.values()) await server.stop();
  await sidecar?.close();
  await simulator?.close();
  if (rulesDir) await rm(rulesDir, { recursive: true, force: true });
});

describe.each(KINDS)('the %s rules in the Prometheus that scrapes for them', (kind) => {
  it('fire the P99 ticket for first tokens slower than the budget (its sample guard counts samples this Prometheus stores)', () => {
    expect(has(fired.get(kind) ?? [], EXPECTED[0] as Record<string, string>)).toBe(true);
  });

  it('page for an upstream that fails every request at once, on the TTFT and the e2e SLO', () => {
    expect(has(fired.get(kind) ?? [], EXPECTED[1] as Record<string, string>)).toBe(true);
    expect(has(fired.get(kind) ?? [], EXPECTED[2] as Record<string, string>)).toBe(true);
  });

  it('read in their alerting groups only metrics that have series in this Prometheus', async () => {
    const server = prometheus.get(kind) as PrometheusServer;
    const response = await fetch(`${server.url}/api/v1/rules`);
    const body = (await response.json()) as { data: { groups: Array<{ name: string; rules: Array<{ query: string }> }> } };
    const groups = body.data.groups.filter((g) => ALERTING_GROUPS.has(g.name));
    expect(groups.map((g) => g.name).sort()).toEqual([...ALERTING_GROUPS].sort());
    // Metric names: tokentap's and the GenAI conventions', outside quoted label values.
    const names = new Set(groups.flatMap((g) => g.rules.flatMap((r) => [...r.query.replace(/"(?:[^"\\]|\\.)*"/g, '""').matchAll(/\b(?:tokentap|gen_ai)_[a-z0-9_]+/g)].map((m) => m[0]))));
    expect(names.size).toBeGreaterThan(3);
    const missing: string[] = [];
    for (const name of names) if ((await server.query(`count({__name__="${name}"})`)).length === 0) missing.push(name);
    expect(missing).toEqual([]);
  });
});
