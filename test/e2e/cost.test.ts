import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadSettings } from '../../src/config/load.js';
import { renderArtefacts } from '../../src/render/artefacts.js';
import { SIM_HEADER, startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { startPrometheus, type PrometheusServer } from '../helpers/prometheus-server.js';
import { startTestSidecar } from '../helpers/sidecar.js';

/**
 * Accelerator time and the cost rules end to end: the simulator as upstream, the sidecar with
 * `cost:` in front, overlapping chat and batch streams, and the Debian Prometheus 2.42 scraping the
 * sidecar every second and evaluating the rendered rules (windows at a tenth: the 5m rate is 30 s).
 * What real traffic cannot fix in advance is checked as relations that hold exactly: the shares add
 * up to the busy time, and each recorded cost equals its definition evaluated at the rule's own
 * evaluation time, with the real target labels (`job`, `instance`) the joins use.
 */

const PRICE_PER_HOUR = 3.6;
const ACCELERATORS = 2;
const CONFIG = `
cost: { accelerator_price_per_hour: ${PRICE_PER_HOUR}, accelerators: ${ACCELERATORS} }
workloads:
  - name: chat
    match: { header: { x-workload: chat } }
    slo: { objective: 0.99, ttft: 1s }
  - name: batch
alerts:
  grafana_url: https://grafana.example.com
  runbook_base_url: https://runbooks.example.com/tokentap
`;
const WINDOW = '30s';
const CHAT = 12;
const BATCH = 6;

let simulator: RunningSimulator;
let sidecar: Awaited<ReturnType<typeof startTestSidecar>>;
let prometheus: PrometheusServer;
let rulesDir: string;
/** The evaluation time of the recorded cost read by the tests, Unix seconds. */
let evaluatedAt: number;

async function stream(workload: string, i: number): Promise<void> {
  const response = await fetch(`${sidecar.proxyUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-workload': workload, [SIM_HEADER.ttftMs]: String(30 + (i % 3) * 40), [SIM_HEADER.itlMs]: '15', [SIM_HEADER.outputTokens]: String(4 + (i % 5)) },
    body: JSON.stringify({ model: 'sim-model', stream: true, max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] }),
    signal: AbortSignal.timeout(20_000),
  });
  await response.arrayBuffer();
}

async function one(expr: string, time = evaluatedAt): Promise<number> {
  const result = await prometheus.query(expr, time);
  expect(result, expr).toHaveLength(1);
  return (result[0] as { value: number }).value;
}

beforeAll(async () => {
  simulator = await startSimulator({ port: 0 });
  sidecar = await startTestSidecar(simulator.url, CONFIG);
  const settings = loadSettings({ flags: { config: 'test.yaml' }, env: {}, readFile: () => CONFIG });
  rulesDir = await mkdtemp(join(tmpdir(), 'tokentap-cost-'));
  const rules = renderArtefacts(settings, { windowScale: 0.1 }).find((a) => a.path === 'prometheus/rules.yaml');
  await writeFile(join(rulesDir, 'rules.yaml'), rules?.content ?? '');
  // Rules evaluated every 1.3 s against scrapes every 1 s: with equal intervals the two keep one
  // phase, and when a scrape runs across every evaluation no evaluation is clean (CI: 20 of 20).
  prometheus = await startPrometheus({ scrapeTargets: [`${sidecar.adminUrl}/metrics`], ruleFiles: [join(rulesDir, 'rules.yaml')], evaluationInterval: '1300ms' });
  await prometheus.waitFor('the sidecar scraped', 'up', (r) => r[0]?.value === 1, 30_000);
  // Three chat lanes and two batch lanes at once: requests overlap, in flight from 1 to 5.
  const lanes = (workload: string, count: number, width: number) => {
    let next = 0;
    return Array.from({ length: width }, async () => {
      for (let i = next++; i < count; i = next++) await stream(workload, i);
    });
  };
  // One request of each first, scraped before the rest: a counter's rate() counts only what it
  // grew after its first sample, so every series must exist before the traffic it is to measure.
  await Promise.all([stream('chat', 0), stream('batch', 0)]);
  await prometheus.waitFor('the first requests scraped', 'sum(tokentap_requests_total)', (r) => r[0]?.value === 2, 30_000);
  await new Promise((resolve) => setTimeout(resolve, 1_500));
  await Promise.all([...lanes('chat', CHAT, 3), ...lanes('batch', BATCH, 2)]);
  await prometheus.waitFor('every request scraped', 'sum(tokentap_requests_total)', (r) => r[0]?.value === 2 + CHAT + BATCH, 30_000);
  evaluatedAt = await evaluationNoScrapeStraddled(Date.now() / 1000 + 1);
}, 120_000);

/**
 * The time of a cost evaluation after `afterS` that no scrape straddled. A rule evaluated at T reads
 * the samples stored by then; a query at T made later also reads a scrape stamped before T (its
 * start) but stored after T (its end), which a loaded machine makes likely: the definition would
 * then be computed over one sample more than the rule was (relative differences of 0.23 seen).
 */
async function evaluationNoScrapeStraddled(afterS: number): Promise<number> {
  const recorded = 'timestamp(tokentap:cost:rate5m{workload="chat", cost_basis="usage"})';
  let after = afterS;
  for (let attempt = 0; attempt < EVALUATIONS_TRIED; attempt++) {
    const [evaluation] = await prometheus.waitFor('the cost recorded after the last request', recorded, (r) => (r[0]?.value ?? 0) > after, 30_000);
    const at = (evaluation as { value: number }).value;
    const scrapeStartedS = await one('timestamp(scrape_duration_seconds)', at);
    const scrapeTookS = await one('scrape_duration_seconds', at);
    // Stored is a little after the scrape's end: 50 ms of margin.
    if (scrapeStartedS + scrapeTookS + 0.05 < at) return at;
    after = at;
  }
  throw new Error(`every cost evaluation of ${EVALUATIONS_TRIED} had a scrape of the sidecar running across it`);
}

/** At a phase drift of 0.3 s an evaluation, ten cover every phase three times. */
const EVALUATIONS_TRIED = 10;

afterAll(async () => {
  await prometheus?.stop();
  await sidecar?.close();
  await simulator?.close();
  if (rulesDir) await rm(rulesDir, { recursive: true, force: true });
});

describe('accelerator time and cost in the real Prometheus 2.42', () => {
  it('scrapes accelerator-seconds whose sum over requests is the pod busy time times the accelerators', async () => {
    const acceleratorSeconds = await one('sum(tokentap_accelerator_seconds_total)');
    const busy = await one('tokentap_pod_busy_seconds_total');
    expect(busy).toBeGreaterThan(0);
    expect(Math.abs(acceleratorSeconds / ACCELERATORS - busy) / busy).toBeLessThan(1e-9);
    expect(await one('count(tokentap_accelerator_seconds_total{workload="chat", phase="decode"} > 0)')).toBe(1);
    expect(await one('sum(tokentap_request_accelerator_seconds_count{workload="chat"})')).toBe(1 + CHAT);
    expect(await one('tokentap_accelerators')).toBe(ACCELERATORS);
    expect(await one('tokentap_accelerator_price_per_hour{currency="USD"}')).toBe(PRICE_PER_HOUR);
  });

  it('counts busy plus idle time as the wall time: a second per second between two scrapes', async () => {
    // Read between two scrapes' own timestamps rather than by rate(), whose window may reach back
    // before the first scrape of this young Prometheus.
    const wall = 'tokentap_pod_busy_seconds_total + tokentap_pod_idle_seconds_total';
    const earlier = evaluatedAt - 3;
    const elapsed = (await one(wall)) - (await one(wall, earlier));
    const scraped = (await one('timestamp(tokentap_pod_idle_seconds_total)')) - (await one('timestamp(tokentap_pod_idle_seconds_total)', earlier));
    expect(scraped).toBeGreaterThanOrEqual(2);
    expect(elapsed / scraped).toBeGreaterThan(0.95);
    expect(elapsed / scraped).toBeLessThan(1.05);
  });

  it('records the usage cost as the accelerator-seconds at the price, joined by the real target labels', async () => {
    const recorded = await one('tokentap:cost:rate5m{workload="chat", cost_basis="usage", currency="USD"}');
    const defined = await one(`sum(rate(tokentap_accelerator_seconds_total{workload="chat"}[${WINDOW}])) * ${PRICE_PER_HOUR} / 3600`);
    expect(recorded).toBeGreaterThan(0);
    expect(Math.abs(recorded - defined) / defined).toBeLessThan(1e-9);
  });

  it('spreads the whole pod cost, busy and idle, over the workloads on the allocation basis', async () => {
    const allocated = await one('sum(tokentap:cost:rate5m{cost_basis="allocation"})');
    const podCost = await one(`(rate(tokentap_pod_busy_seconds_total[${WINDOW}]) + rate(tokentap_pod_idle_seconds_total[${WINDOW}])) * ${ACCELERATORS} * ${PRICE_PER_HOUR} / 3600`);
    expect(Math.abs(allocated - podCost) / podCost).toBeLessThan(1e-9);
    const usage = await one('sum(tokentap:cost:rate5m{cost_basis="usage"})');
    expect(usage).toBeLessThan(allocated);
  });

  it('divides the cost by requests, tokens and good requests; batch, without an SLO, has no cost per good request', async () => {
    const cost = await one('tokentap:cost:rate5m{workload="chat", cost_basis="usage"}');
    const requests = await one(`sum(rate(tokentap_requests_total{workload="chat", operation!="other"}[${WINDOW}]))`);
    const perRequest = await one('tokentap:cost_per_request:rate5m{workload="chat", cost_basis="usage"}');
    expect(Math.abs(perRequest - cost / requests) / perRequest).toBeLessThan(1e-9);
    const output = await one(`sum(rate(tokentap_tokens_total{workload="chat", gen_ai_token_type="output"}[${WINDOW}]))`);
    const decodeShare = await one(
      `sum(rate(tokentap_accelerator_seconds_total{workload="chat", phase="decode"}[${WINDOW}])) / sum(rate(tokentap_accelerator_seconds_total{workload="chat"}[${WINDOW}]))`,
    );
    const perMillionOutput = await one('tokentap:cost_per_million_output_tokens:rate5m{workload="chat", cost_basis="usage"}');
    expect(Math.abs(perMillionOutput - (cost * decodeShare * 1e6) / output) / perMillionOutput).toBeLessThan(1e-9);
    expect(await one('tokentap:cost_per_good_request:rate5m{workload="chat", cost_basis="allocation"}')).toBeGreaterThan(0);
    expect(await prometheus.query('tokentap:cost_per_good_request:rate5m{workload="batch"}', evaluatedAt)).toEqual([]);
  });
});
