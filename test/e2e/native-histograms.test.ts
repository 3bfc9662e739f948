import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadSettings } from '../../src/config/load.js';
import { METRICS } from '../../src/metrics/definitions.js';
import { bucketIndex, upperBound } from '../../src/metrics/native-buckets.js';
import { decodeDelimited } from '../../src/metrics/protobuf-exposition.js';
import { renderArtefacts } from '../../src/render/artefacts.js';
import { classicOrNativeQuantile } from '../../src/render/native-dashboard-queries.js';
import { allPanels, substituteVariables, type DashboardJson } from '../helpers/dashboard-json.js';
import { SIM_HEADER, startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { startPrometheus, type PrometheusServer } from '../helpers/prometheus-server.js';
import { histogram, parsePrometheusText } from '../helpers/prometheus-text.js';
import { startTestSidecar } from '../helpers/sidecar.js';

/**
 * Native histograms end to end: the simulator as upstream, the sidecar in front with
 * `metrics.histograms: both`, and the Debian Prometheus 2.42 with `--enable-feature=native-histograms`
 * scraping it every second (by protobuf: the flag puts protobuf first in its Accept header). On the
 * same finished traffic, what Prometheus computes from the native series must agree with the classic
 * buckets the sidecar serves to a text scraper: histogram_count and histogram_sum exactly, the
 * fraction at a threshold that is a bucket boundary of the schema (0.25 s, 0.5 s) exactly, and at
 * any other threshold within the share of events in the one native bucket that straddles it. The
 * rendered native rules must load and evaluate in that Prometheus, and the bad share the native
 * histogram gives at the boundary threshold must equal the SLO event counters'.
 */

const CONFIG = `
workloads:
  - name: chat
    match: { header: { x-workload: chat } }
    slo: { objective: 0.99, ttft: 250ms, itl: 30ms }
  - name: default
metrics:
  histograms: both
alerts:
  grafana_url: https://grafana.example.com
  runbook_base_url: https://runbooks.example.com/tokentap
`;
/** Rules at a tenth of their windows: the 5m SLI window is 30 s, which still spans the whole traffic when queried. */
const WINDOW_SCALE = 0.1;
const TTFTS_MS = [20, 120, 180, 230, 270, 320, 60, 520];
const ITLS_MS = [4, 12, 20, 26, 34, 70];
const REQUESTS = 24;
/** The first part: fast and slow first tokens (TTFTS_MS[0..7]), so both TTFT results exist from the start. */
const WARM_UP = 8;
const LANES = 3;

const TTFT = METRICS.ttft.promName;
const ITL = METRICS.itlToken.promName;

let simulator: RunningSimulator;
let sidecar: Awaited<ReturnType<typeof startTestSidecar>>;
let prometheus: PrometheusServer;
let rulesDir: string;
/** Unix seconds at which every comparison is queried: after the last scrape that saw the finished traffic. */
let at: number;
/** Unix seconds after the first part was scraped and before the rest was sent. */
let warmedUp: number;

/** Requests `from` to `to` - 1 of the plan, in LANES concurrent lanes. */
async function sendTraffic(from: number, to: number): Promise<void> {
  let next = from;
  const lane = async () => {
    for (let i = next++; i < to; i = next++) {
      const response = await fetch(`${sidecar.proxyUrl}/v1/chat/completions`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'x-workload': 'chat',
          [SIM_HEADER.ttftMs]: String(TTFTS_MS[i % TTFTS_MS.length]),
          [SIM_HEADER.itlMs]: String(ITLS_MS[i % ITLS_MS.length]),
          [SIM_HEADER.outputTokens]: String(4 + (i % 4)),
        },
        body: JSON.stringify({ model: 'sim-model', stream: true, max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] }),
        signal: AbortSignal.timeout(20_000),
      });
      await response.arrayBuffer();
    }
  };
  await Promise.all(Array.from({ length: LANES }, lane));
}

async function classicText() {
  const response = await fetch(`${sidecar.adminUrl}/metrics`, { headers: { accept: 'text/plain;version=0.0.4' } });
  return parsePrometheusText(await response.text());
}

/** The sidecar's own native histogram of `name` for chat, decoded: absolute count per bucket index. */
async function nativeOf(name: string): Promise<{ schema: number; buckets: Map<number, number>; count: number }> {
  const response = await fetch(`${sidecar.adminUrl}/metrics`, {
    headers: { accept: 'application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited' },
  });
  const families = decodeDelimited(new Uint8Array(await response.arrayBuffer())) as Array<{ name: string; metric: Array<{ label: Array<{ name: string; value: string }>; histogram: Record<string, unknown> }> }>;
  const metric = families.find((f) => f.name === name)?.metric.find((m) => m.label.some((l) => l.name === 'workload' && l.value === 'chat'));
  if (metric === undefined) throw new Error(`no native ${name} for chat`);
  const h = metric.histogram as { schema: number; sample_count: number; positive_span: Array<{ offset?: number; length?: number }>; positive_delta: number[] };
  const buckets = new Map<number, number>();
  let index = 0;
  let count = 0;
  let d = 0;
  for (const span of h.positive_span) {
    index += span.offset ?? 0; // the first span's offset is absolute, the others are gaps
    for (let k = 0; k < (span.length ?? 0); k++) {
      count += h.positive_delta[d++] as number;
      buckets.set(index, count);
      index++;
    }
  }
  return { schema: h.schema ?? 0, buckets, count: h.sample_count };
}

async function one(expr: string, time = at): Promise<number> {
  const result = await prometheus.query(expr, time);
  expect(result, expr).toHaveLength(1);
  return (result[0] as { value: number }).value;
}

beforeAll(async () => {
  simulator = await startSimulator({ port: 0 });
  sidecar = await startTestSidecar(simulator.url, CONFIG);
  const settings = loadSettings({ flags: { config: 'test.yaml' }, env: {}, readFile: () => CONFIG });
  rulesDir = await mkdtemp(join(tmpdir(), 'tokentap-native-'));
  const rules = renderArtefacts(settings, { windowScale: WINDOW_SCALE, histograms: 'native' }).find((a) => a.path === 'prometheus/rules.yaml');
  await writeFile(join(rulesDir, 'rules.yaml'), rules?.content ?? '');
  prometheus = await startPrometheus({ scrapeTargets: [`${sidecar.adminUrl}/metrics`], ruleFiles: [join(rulesDir, 'rules.yaml')], featureFlags: ['native-histograms'] });
  // A first part, scraped before the rest, so every series (the histograms, both SLO event
  // results) has a sample before the window's traffic: rate() then extrapolates every series
  // alike, and the native and classic SLIs over the same window can be compared exactly.
  await prometheus.waitFor('the sidecar scraped', 'up', (r) => r[0]?.value === 1, 30_000);
  await sendTraffic(0, WARM_UP);
  await prometheus.waitFor('the first part scraped', `histogram_count(sum(${TTFT}{workload="chat"}))`, (r) => r[0]?.value === WARM_UP, 30_000);
  await new Promise((resolve) => setTimeout(resolve, 1_500));
  warmedUp = Date.now() / 1000;
  await sendTraffic(WARM_UP, REQUESTS);
  const finalCount = histogram(await classicText(), TTFT, { workload: 'chat' }).count;
  expect(finalCount).toBe(REQUESTS);
  await prometheus.waitFor('the finished traffic scraped natively', `histogram_count(sum(${TTFT}{workload="chat"}))`, (r) => r[0]?.value === REQUESTS, 30_000);
  // One more rule evaluation after that scrape.
  await new Promise((resolve) => setTimeout(resolve, 2_500));
  at = Date.now() / 1000;
}, 120_000);

afterAll(async () => {
  await prometheus?.stop();
  await sidecar?.close();
  await simulator?.close();
  if (rulesDir) await rm(rulesDir, { recursive: true, force: true });
});

describe('native histograms in the real Prometheus 2.42', () => {
  it('are ingested from the protobuf scrape as one native series per histogram, without the classic _bucket series (2.42 prefers native)', async () => {
    expect(await one(`count(${TTFT}{workload="chat"})`)).toBe(1);
    expect(await prometheus.query(`${TTFT}_bucket{workload="chat"}`, at)).toEqual([]);
    const [target] = await prometheus.targets();
    expect(target?.health).toBe('up');
  });

  it.each([TTFT, ITL])('%s: histogram_count and histogram_sum equal the classic _count and _sum', async (name) => {
    const classic = histogram(await classicText(), name, { workload: 'chat' });
    expect(await one(`histogram_count(sum(${name}{workload="chat"}))`)).toBe(classic.count);
    expect(await one(`histogram_sum(sum(${name}{workload="chat"}))`)).toBeCloseTo(classic.sum, 9);
  });

  it.each([
    [TTFT, 0.25],
    [TTFT, 0.5],
    [TTFT, 0.2],
    [TTFT, 0.1],
    [ITL, 0.03],
    [ITL, 0.025],
    [ITL, 0.05],
  ])('%s: histogram_fraction(0, %s) agrees with the classic bucket ratio (exactly at a schema boundary, else within the straddling bucket)', async (name, threshold) => {
    const classic = histogram(await classicText(), name, { workload: 'chat' });
    const classicFraction = (classic.buckets.get(threshold) as number) / classic.count;
    expect(classicFraction, 'traffic on both sides of the threshold').toBeGreaterThan(0);
    expect(classicFraction, 'traffic on both sides of the threshold').toBeLessThan(1);
    const nativeFraction = await one(`histogram_fraction(0, ${threshold}, sum(${name}{workload="chat"}))`);
    const native = await nativeOf(name);
    const index = bucketIndex(threshold, native.schema);
    if (upperBound(index, native.schema) === threshold) {
      expect(nativeFraction).toBeCloseTo(classicFraction, 12);
    } else {
      const straddling = (native.buckets.get(index) ?? 0) / native.count;
      expect(Math.abs(nativeFraction - classicFraction)).toBeLessThanOrEqual(straddling + 1e-12);
    }
  });

  it('histogram_quantile over the native series lands within the relative error of the schema around the classic-bucket answer', async () => {
    const classic = histogram(await classicText(), TTFT, { workload: 'chat' });
    // The median's classic bucket bounds the true median; the native estimate must be inside it, widened by the native bucket factor.
    const median = await one(`histogram_quantile(0.5, sum(${TTFT}{workload="chat"}))`);
    const bounds = [...classic.buckets.keys()].sort((a, b) => a - b);
    const half = classic.count / 2;
    const upper = bounds.find((b) => (classic.buckets.get(b) as number) >= half) as number;
    const lower = bounds[bounds.indexOf(upper) - 1] ?? 0;
    const factor = 2 ** (2 ** -(await nativeOf(TTFT)).schema);
    expect(median).toBeGreaterThan(lower / factor);
    expect(median).toBeLessThanOrEqual(upper * factor);
  });

  it('evaluates every rendered native rule without error, and the TTFT bad share from the native histogram equals the SLO event counters\' at the 0.25 s boundary', async () => {
    // A group is first evaluated at an offset within its interval: tokentap-capacity's is 5 minutes,
    // 30 s at this window scale, so wait until every rule has been evaluated once (health not unknown).
    type Rule = { name: string; health: string; lastError?: string };
    const deadline = Date.now() + 90_000;
    let rules: Rule[] = [];
    for (;;) {
      const response = await fetch(`${prometheus.url}/api/v1/rules`);
      const body = (await response.json()) as { data: { groups: Array<{ rules: Rule[] }> } };
      rules = body.data.groups.flatMap((g) => g.rules);
      if (rules.every((rule) => rule.health !== 'unknown') || Date.now() > deadline) break;
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
    expect(rules.length).toBeGreaterThan(10);
    for (const rule of rules) expect(`${rule.name}: ${rule.health} ${rule.lastError ?? ''}`).toBe(`${rule.name}: ok `);

    // The recorded SLI reads tokentap_slo_events_total, in this Prometheus as in a text-scraping one.
    expect(await one('tokentap:slo_error_ratio:rate5m{workload="chat", slo="ttft"}')).toBeGreaterThan(0);

    // Exact: the bad share of the TTFT events between the two instants, from the native histogram
    // (count x (1 - fraction at 0.25 s)) and from the SLO event counters.
    const nativeBad = async (time: number) =>
      (await one(`histogram_count(sum(${TTFT}{workload="chat"}))`, time)) * (1 - (await one(`histogram_fraction(0, 0.25, sum(${TTFT}{workload="chat"}))`, time)));
    const nativeAll = async (time: number) => one(`histogram_count(sum(${TTFT}{workload="chat"}))`, time);
    const events = async (time: number, result: string) => one(`sum(tokentap_slo_events_total{workload="chat", slo="ttft", result="${result}"})`, time);
    const nativeShare = ((await nativeBad(at)) - (await nativeBad(warmedUp))) / ((await nativeAll(at)) - (await nativeAll(warmedUp)));
    const classicBad = (await events(at, 'bad')) - (await events(warmedUp, 'bad'));
    const classicAll = classicBad + (await events(at, 'good')) - (await events(warmedUp, 'good'));
    expect(classicAll).toBe(REQUESTS - WARM_UP);
    expect(classicBad).toBeGreaterThan(0);
    expect(nativeShare).toBeCloseTo(classicBad / classicAll, 9);
    const recorded = await prometheus.query('tokentap:ttft_seconds:p99_rate5m{workload="chat"}', at);
    expect(recorded).toHaveLength(1);
  }, 180_000);

  it('answers the TTFT p99 panel of the dashboard that render --histograms native writes for this metrics.histograms: both sidecar, as docs/native-histograms.md tells users to switch', async () => {
    const settings = loadSettings({ flags: { config: 'test.yaml' }, env: {}, readFile: () => CONFIG });
    const file = renderArtefacts(settings, { windowScale: 1, histograms: 'native' }).find((a) => a.root === 'dashboards');
    const panels = allPanels(JSON.parse(file?.content ?? '{}') as DashboardJson);
    const ttft = panels.find((p) => /: TTFT p50 \/ p90 \/ p99$/.test(p.title ?? ''));
    const p99 = ttft?.targets?.find((t) => t.legendFormat?.startsWith('p99'))?.expr;
    expect(p99, 'the TTFT p99 query').toBeDefined();
    const expr = substituteVariables(p99 as string, { namespace: '.*', pod: '.*', model: '.*', workload: 'chat', __rate_interval: '30s' });
    expect(await one(expr)).toBeGreaterThan(0.3);
  });

  it('answers the dashboard quantile panels of a native config from the native series (no _bucket in this Prometheus)', async () => {
    const grafana = (expr: string) => expr.replaceAll('$__rate_interval', '30s').replace(/\$(namespace|pod|model)/g, '.*');
    const expr = grafana(classicOrNativeQuantile(0.99, 'ttft', 'chat'));
    const [classicPart] = expr.split('\nor\n');
    expect(await prometheus.query(classicPart as string, at)).toEqual([]);
    const p99 = await one(expr);
    expect(p99).toBeCloseTo(await one(`histogram_quantile(0.99, sum(rate(${TTFT}{workload="chat"}[30s])))`), 12);
    expect(p99).toBeGreaterThan(0.3);
  });
});
