import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadSettings, type Settings } from '../../src/config/load.js';
import { renderArtefacts } from '../../src/render/artefacts.js';
import { CAPACITY_ROW_TITLE } from '../../src/render/capacity-panels.js';
import { dashboardFileText, renderDashboards } from '../../src/render/dashboards.js';
import { allPanels, substituteVariables, type DashboardJson, type DashboardPanel } from '../helpers/dashboard-json.js';
import { startPrometheus, type PrometheusServer } from '../helpers/prometheus-server.js';

/**
 * The row "Capacity and cost" against a real Prometheus 2.42: every panel query of it, with the
 * capacity recording rules of `tokentap render` loaded (windows scaled by 0.01, so a week is 1h41m
 * and the group runs every 3 s), over synthetic series of two pods served by a loopback exporter
 * whose counters grow at fixed rates. They are the series the sidecar exports for capacity (the
 * by-concurrency histograms, e2e, requests, in flight) and for cost (accelerator-seconds, price,
 * busy and idle time, cached input), which lets each panel be checked against a known value:
 *
 * - every workload with a TTFT SLO: per pod 20 requests a second in band 5-8, all within the
 *   threshold, and 20 in band 9-16, half of them late: capacity 8 in flight, knee 16;
 * - e2e 0.5 s on average: 8 / 0.5 = 16 requests a second per pod;
 * - per pod and workload 2 generation requests a second and 0.5 accelerator-seconds a second
 *   (0.1 prefill, 0.4 decode), at 2.5 USD per accelerator-hour: 0.5 x 2.5 / 3600 / 2 USD a request;
 *   100 input and 40 output tokens a second: per 1M input 0.1 x 2.5 / 3600 / 100 x 1e6;
 * - cached input: 2 reporting requests a second, 1.5 of them with cached input (request-level hit
 *   rate 0.75), mean cached share 0.3; the engine (vLLM's counters, scraped from the engine's own
 *   target as the engine container is) 45 of 100 queried prompt tokens hit: 0.45.
 */
const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const PODS = ['vllm-0', 'vllm-1'];
const PRICE = 2.5;
/** Grafana's $__rate_interval for this Prometheus' 1 s scrape interval is 4 s; 10 s keeps several scrapes in every rate. */
const BUILTINS = { __rate_interval: '10s', __interval: '15s', __range: '1h', namespace: '.*', workload: '.*', pod: '.*', model: '.*' };

const example = loadSettings({ flags: { config: join(ROOT, 'deploy', 'tokentap.yaml') }, env: {} });
const settings: Settings = { ...example, capacity: { ...example.capacity, minSamplesPerBand: 10, plannedPeakRps: 64 } };
const dashboard = JSON.parse(dashboardFileText(renderDashboards(settings)[0] as Parameters<typeof dashboardFileText>[0])) as DashboardJson;
const row = allPanels(dashboard).find((p) => p.type === 'row' && p.title === CAPACITY_ROW_TITLE) as DashboardPanel & { panels?: DashboardPanel[] };

let exporter: Server;
let prometheus: PrometheusServer;
const startedMs = Date.now();

/** The exposition at `seconds` since start: every counter its rate times the seconds. */
function exposition(seconds: number): string {
  const lines: string[] = [];
  const add = (name: string, labels: Record<string, string>, value: number) =>
    lines.push(`${name}{${Object.entries(labels).map(([k, v]) => `${k}="${v}"`).join(',')}} ${value}`);
  for (const workload of settings.workloads) {
    const base = { workload: workload.name, gen_ai_request_model: 'm' };
    const ttft = workload.slo?.thresholdsS.ttft;
    if (ttft !== undefined) {
      for (const [band, good] of [['5-8', 20], ['9-16', 10]] as const) {
        const histogram = 'tokentap_time_to_first_token_by_concurrency_seconds';
        add(`${histogram}_bucket`, { ...base, in_flight: band, le: String(ttft) }, good * seconds);
        add(`${histogram}_bucket`, { ...base, in_flight: band, le: '+Inf' }, 20 * seconds);
        add(`${histogram}_count`, { ...base, in_flight: band }, 20 * seconds);
      }
    }
    add('gen_ai_server_request_duration_seconds_sum', base, 0.5 * 40 * seconds);
    add('gen_ai_server_request_duration_seconds_count', base, 40 * seconds);
    add('tokentap_requests_total', { ...base, operation: 'generation', outcome: 'completed' }, 2 * seconds);
    add('tokentap_requests_in_flight', base, 3);
    add('tokentap_tokens_total', { ...base, gen_ai_token_type: 'input' }, 100 * seconds);
    add('tokentap_tokens_total', { ...base, gen_ai_token_type: 'output' }, 40 * seconds);
    add('tokentap_accelerator_seconds_total', { ...base, phase: 'prefill' }, 0.1 * seconds);
    add('tokentap_accelerator_seconds_total', { ...base, phase: 'decode' }, 0.4 * seconds);
    for (const [le, share] of [['0.5', 0.5], ['1', 1], ['+Inf', 1]] as const) add('tokentap_request_accelerator_seconds_bucket', { ...base, le }, 2 * share * seconds);
    add('tokentap_request_cached_input_ratio_sum', base, 0.6 * seconds);
    add('tokentap_request_cached_input_ratio_count', base, 2 * seconds);
    add('tokentap_requests_with_cached_input_total', base, 1.5 * seconds);
  }
  add('tokentap_pod_busy_seconds_total', {}, 0.75 * seconds);
  add('tokentap_pod_idle_seconds_total', {}, 0.25 * seconds);
  add('tokentap_accelerators', {}, 1);
  add('tokentap_accelerator_price_per_hour', { currency: 'USD' }, PRICE);
  return `${lines.join('\n')}\n`;
}

/** The engine container's /metrics at `seconds`: vLLM's prefix-cache counters, labelled as vLLM labels them (test/fixtures/streams/vllm/server-metrics.prom). */
function engineExposition(seconds: number): string {
  return [
    `vllm:prefix_cache_queries_total{engine="0",model_name="m"} ${100 * seconds}`,
    `vllm:prefix_cache_hits_total{engine="0",model_name="m"} ${45 * seconds}`,
    '',
  ].join('\n');
}

beforeAll(async () => {
  exporter = createServer((req, res) => {
    const seconds = (Date.now() - startedMs) / 1000;
    res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' }).end(req.url === '/engine' ? engineExposition(seconds) : exposition(seconds));
  });
  await new Promise<void>((resolve) => exporter.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(exporter.address() as AddressInfo).port}`;
  const dir = mkdtempSync(join(tmpdir(), 'tokentap-capacity-rules-'));
  const rules = renderArtefacts(settings, { windowScale: 0.01 }).find((a) => a.path === 'prometheus/rules.yaml');
  writeFileSync(join(dir, 'rules.yaml'), rules?.content ?? '');
  prometheus = await startPrometheus({ scrapeTargets: PODS.flatMap((pod) => [
      { url, job: `tokentap-${pod}`, labels: { namespace: 'llm', pod } },
      { url: `${url}/engine`, job: `vllm-${pod}`, labels: { namespace: 'llm', pod } },
    ]), ruleFiles: [join(dir, 'rules.yaml')] });
  // The capacity group runs every 3 s; a rate over 10 s is exact once the series are 10 s old.
  await prometheus.waitFor('pods needed at the planned peak', 'tokentap:mix_pods_needed:planned_peak', (r) => r.length === 1, 90_000);
  const perPod = 2 * settings.workloads.length;
  await prometheus.waitFor('10 s of requests', `sum by (pod) (rate(tokentap_requests_total[10s]))`, (r) => r.length === 2 && r.every((s) => Math.abs(s.value / perPod - 1) < 1e-3), 90_000);
}, 180_000);

afterAll(async () => {
  await prometheus?.stop();
  await new Promise((resolve) => (exporter === undefined ? resolve(undefined) : exporter.close(resolve)));
});

async function answer(panelTitle: string, legendStart: string): Promise<Array<{ metric: Record<string, string>; value: number }>> {
  const panel = (row.panels ?? []).find((p) => p.title === panelTitle);
  const target = (panel?.targets ?? []).find((t) => (t.legendFormat ?? '').startsWith(legendStart));
  expect(target, `${panelTitle} / ${legendStart}`).toBeDefined();
  return prometheus.query(substituteVariables(target?.expr ?? '', BUILTINS));
}

describe('the Capacity and cost row against a real Prometheus', () => {
  it('has capacity and cost panels, and every query of them returns data', async () => {
    const panels = row.panels ?? [];
    expect(panels.length).toBe(9);
    const empty: string[] = [];
    for (const panel of panels) {
      for (const target of panel.targets ?? []) {
        const result = await prometheus.query(substituteVariables(target.expr, BUILTINS));
        if (result.length === 0) empty.push(`${panel.title} (${target.legendFormat ?? target.refId})`);
      }
    }
    expect(empty).toEqual([]);
  }, 120_000);

  it('shows the known capacity: 8 in flight below the knee at 16, 16 requests a second per pod, pods needed for the planned 64', async () => {
    const capacity = await answer('Capacity at SLO per pod (requests in flight)', 'pod mix {{');
    expect(capacity.map((s) => s.value)).toEqual([8]);
    const sustainable = await answer('Sustainable requests per second per pod', 'pod mix');
    expect(sustainable[0]?.value).toBeCloseTo(16, 6);
    const planned = await answer('Pods needed at the observed and the planned peak, and pods running', 'needed at the planned');
    expect(planned.map((s) => s.value)).toEqual([4]);
    const running = await answer('Pods needed at the observed and the planned peak, and pods running', 'running');
    expect(running.map((s) => s.value)).toEqual([2]);
  }, 60_000);

  it('shows the known cost per request and per 1M tokens, on a usage and an allocation basis', async () => {
    const usage = await answer('Cost per request (usage and allocation basis)', '{{workload}} usage');
    expect(usage.length).toBe(settings.workloads.length);
    for (const sample of usage) {
      expect(sample.metric.currency).toBe('USD');
      expect(sample.value / ((0.5 * PRICE) / 3600 / 2)).toBeCloseTo(1, 6);
    }
    // Allocation: 1 accelerator per pod all the time, over every workload's requests of the namespace.
    const allocation = await answer('Cost per request (usage and allocation basis)', 'allocation');
    // A gauge over a rate: the rate is the scrapes' own timing, within 0.1 % of the exporter's.
    expect((allocation[0]?.value ?? 0) / ((2 * PRICE) / 3600 / (2 * 2 * settings.workloads.length))).toBeCloseTo(1, 2);
    const perInput = await answer('Cost per 1M input and output tokens (usage basis)', '{{workload}} per 1M input');
    for (const sample of perInput) expect(sample.value / ((0.1 * PRICE) / 3600 / 100 * 1e6)).toBeCloseTo(1, 6);
    const cached = await answer('Cached input share per request', '{{workload}} mean cached share');
    for (const sample of cached) expect(sample.value).toBeCloseTo(0.3, 6);
  }, 60_000);

  it("shows the request-level prefix-cache hit rate beside the engine's own pod-level one", async () => {
    const requestLevel = await answer('Cached input share per request', '{{workload}} requests with cached input');
    expect(requestLevel.length).toBe(settings.workloads.length);
    for (const sample of requestLevel) expect(sample.value).toBeCloseTo(0.75, 6);
    const engine = await answer('Cached input share per request', 'engine hit rate');
    expect(engine.map((s) => s.metric.pod).sort()).toEqual(PODS);
    for (const sample of engine) expect(sample.value).toBeCloseTo(0.45, 6);
  }, 60_000);
});
