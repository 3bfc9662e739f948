import { metrics } from '@opentelemetry/sdk-node';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { loadSettings } from '../../../src/config/load.js';
import { directMetricsOf, HistogramSeries } from '../../../src/metrics/direct-metrics.js';
import { Recorder } from '../../../src/metrics/recorder.js';
import { Telemetry } from '../../../src/metrics/telemetry.js';
import { parsePrometheusText } from '../../helpers/prometheus-text.js';
import { requestSummary } from '../../helpers/request-summary.js';
import { comparable, SdkReference, TestReader } from '../../helpers/sdk-reference.js';

const telemetries: Telemetry[] = [];
afterEach(async () => {
  vi.restoreAllMocks();
  await Promise.all(telemetries.splice(0).map((t) => t.shutdown()));
});

const ITL_NAMES = ['tokentap.inter_chunk_latency', 'tokentap.inter_token_latency'];

/** A Telemetry and its Recorder; `reference`: what the SDK's own instruments make of every sample they take (cumulative, explicit buckets, as the Prometheus reader asks). */
function setup(): { telemetry: Telemetry; recorder: Recorder; reference: SdkReference } {
  const telemetry = new Telemetry();
  telemetries.push(telemetry);
  const settings = loadSettings({ flags: {}, env: {}, readFile: () => '' });
  const buckets = { ...settings.buckets, itlChunk: [0.001, 0.005, 0.02, 0.05], itlToken: [0.001, 0.005, 0.02, 0.05] };
  const recorder = new Recorder(telemetry.meter, buckets);
  return { telemetry, recorder, reference: new SdkReference(directMetricsOf(telemetry.meter)!, new TestReader()) };
}

interface Point {
  readonly metric: string;
  readonly attributes: Record<string, unknown>;
  readonly counts: number[];
  readonly count: number;
  readonly sum: number;
  readonly min: number | undefined;
  readonly max: number | undefined;
}

async function itlPoints(collected: metrics.ResourceMetrics): Promise<Point[]> {
  const points: Point[] = [];
  for (const scope of collected.scopeMetrics) {
    for (const metric of scope.metrics) {
      if (!ITL_NAMES.includes(metric.descriptor.name)) continue;
      for (const point of metric.dataPoints as metrics.DataPoint<metrics.Histogram>[]) {
        const v = point.value;
        points.push({ metric: metric.descriptor.name, attributes: { ...point.attributes }, counts: [...v.buckets.counts], count: v.count, sum: v.sum ?? Number.NaN, min: v.min, max: v.max });
      }
    }
  }
  return points.sort((a, b) => `${a.metric}${JSON.stringify(a.attributes)}`.localeCompare(`${b.metric}${JSON.stringify(b.attributes)}`));
}

/** Gaps in ms and tokens per chunk: bucket bounds exactly (inclusive), beyond the last bound, zero, multi-token chunks. */
const SAMPLES: ReadonlyArray<readonly [model: string, gapMs: number, tokens: number]> = [
  ['a', 20, 1],
  ['a', 5, 1],
  ['a', 1, 1],
  ['a', 0, 1],
  ['a', 60, 3],
  ['a', 50, 1],
  ['a', 100, 1],
  ['b', 15, 3],
  ['b', 0.7, 1],
  ['a', 4.99, 2],
  ['b', 19.999, 1],
];

/** Bucket counts computed on their own: a value belongs to the first bucket whose bound is >= it (the last, +Inf, beyond them all). */
function referenceCounts(boundaries: readonly number[], values: readonly number[]): number[] {
  const counts = new Array<number>(boundaries.length + 1).fill(0);
  for (const value of values) {
    let index = boundaries.findIndex((bound) => bound >= value);
    if (index === -1) index = boundaries.length;
    counts[index]!++;
  }
  return counts;
}

describe('a histogram series finding buckets from the last sample', () => {
  const boundaries = [0.001, 0.002, 0.005, 0.01, 0.02, 0.05];

  it('puts every sample where a search from scratch would, bounds exactly and either side of the last bucket', () => {
    // Each pair moves to a neighbour of the last bucket, onto a bound exactly, or just past one.
    const values = [0.02, 0.02, 0.01, 0.0100001, 0.01, 0.005, 0.002, 0.0020001, 0.001, 0, -1, 0.001, 0.05, 0.0500001, 1, Infinity, 0.05, 0.03, 0.02, 0.0199999];
    const series = new HistogramSeries(boundaries, {});
    for (const value of values) series.record(value);
    expect(series.dataPoint([0, 0]).value.buckets.counts).toEqual(referenceCounts(boundaries, values));
  });

  it('agrees with the search for clustered and scattered samples, one at a time and n at a time', () => {
    let seed = 7;
    const random = (): number => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed / 2147483648;
    };
    const values: number[] = [];
    const series = new HistogramSeries(boundaries, {});
    for (let i = 0; i < 20_000; i++) {
      // Mostly near 20 ms (a decode pace), sometimes anywhere, sometimes on a bound.
      const r = random();
      const value = r < 0.7 ? 0.02 + (random() - 0.5) * 0.004 : r < 0.9 ? random() * 0.06 : (boundaries[Math.floor(random() * boundaries.length)] as number);
      const times = 1 + Math.floor(random() * 3);
      series.recordTimes(value, times);
      for (let k = 0; k < times; k++) values.push(value);
    }
    expect(series.dataPoint([0, 0]).value.buckets.counts).toEqual(referenceCounts(boundaries, values));
  });
});

describe('inter-token histograms outside the SDK', () => {
  it('export what OTel record() exports: same buckets, counts, min and max, and the sum', async () => {
    const { telemetry, recorder, reference } = setup();
    for (const [model, gapMs, tokens] of SAMPLES) {
      // A fresh attribute object per request, as the monitor makes them.
      recorder.interTokenSeries(recorder.requestAttributes('w', model)).record(gapMs, tokens);
    }
    // A collection between samples (a scrape mid-stream) changes nothing in the totals.
    await telemetry.collect();
    await reference.collect();
    const attributes = recorder.requestAttributes('w', 'a');
    recorder.interTokenSeries(attributes).record(30, 2);
    recorder.interTokenSeries(attributes).record(2, 1);
    const ours = await itlPoints(await telemetry.collect());
    const sdk = await itlPoints(await reference.collect());
    expect(sdk).toHaveLength(4);
    expect(ours).toHaveLength(4);
    for (let i = 0; i < sdk.length; i++) {
      const { sum: sdkSum, ...sdkRest } = sdk[i] as Point;
      const { sum: ourSum, ...ourRest } = ours[i] as Point;
      expect(ourRest).toEqual(sdkRest);
      expect(ourSum).toBeCloseTo(sdkSum, 12);
    }
    // The fixture's own arithmetic, so a change to both paths cannot pass unnoticed: model a's
    // chunks are 20, 5, 1, 0, 60, 50, 100, 4.99, 30, 2 ms.
    const chunkA = ours.find((p) => p.metric === 'tokentap.inter_chunk_latency' && p.attributes['gen_ai.request.model'] === 'a');
    expect(chunkA?.counts).toEqual([2, 3, 1, 2, 2]);
    expect(chunkA?.count).toBe(10);
    expect(chunkA?.min).toBe(0);
    expect(chunkA?.max).toBe(0.1);
    // Per token: 60 ms / 3 gives three samples of 0.02, 4.99 / 2 two of 0.002495, 30 / 2 two of 0.015.
    const tokenA = ours.find((p) => p.metric === 'tokentap.inter_token_latency' && p.attributes['gen_ai.request.model'] === 'a');
    expect(tokenA?.count).toBe(14);
    expect(tokenA?.counts).toEqual([2, 4, 6, 1, 1]);
  });

  it('leave a histogram out of the exposition until its first sample, like the SDK', async () => {
    const { telemetry, recorder } = setup();
    expect(await telemetry.scrape()).not.toContain('inter_chunk_latency');
    // A request's series exists from its start; without a sample it is not exported either.
    const series = recorder.interTokenSeries(recorder.requestAttributes('w', 'm'));
    recorder.interTokenSeries(recorder.requestAttributes('w', 'silent'));
    expect(await telemetry.scrape()).not.toContain('inter_chunk_latency');
    series.record(20, 1);
    const text = await telemetry.scrape();
    expect(text).toContain('# TYPE tokentap_inter_chunk_latency_seconds histogram');
    expect(text).toContain('tokentap_inter_chunk_latency_seconds_bucket{workload="w",gen_ai_request_model="m",le="0.02"} 1');
    expect(text).toContain('tokentap_inter_token_latency_seconds_count{workload="w",gen_ai_request_model="m"} 1');
    expect(text).not.toContain('gen_ai_request_model="silent"');
  });
});

describe("a request's one-token gaps, held and recorded together", () => {
  const countOf = (text: string, metric: string, model: string): number => {
    const match = new RegExp(`^${metric}_count\\{workload="w",gen_ai_request_model="${model}"(?:,in_flight="[^"]*")?\\} (\\d+)$`, 'm').exec(text);
    return match === null ? 0 : Number(match[1]);
  };

  it('are all in a scrape taken mid-stream, whatever the request still holds', async () => {
    const { telemetry, recorder } = setup();
    const series = recorder.interTokenSeries(recorder.requestAttributes('w', 'm'), '1-8');
    // Three gaps: fewer than a batch, so nothing has gone into the series on its own yet.
    for (const gapMs of [20, 21, 19]) series.record(gapMs, 1);
    const text = await telemetry.scrape();
    expect(countOf(text, 'tokentap_inter_chunk_latency_seconds', 'm')).toBe(3);
    expect(countOf(text, 'tokentap_inter_token_latency_seconds', 'm')).toBe(3);
    expect(countOf(text, 'tokentap_inter_token_latency_by_concurrency_seconds', 'm')).toBe(3);
    // Nothing counted twice by the next scrape, and later gaps join them.
    for (let i = 0; i < 11; i++) series.record(20, 1);
    series.record(40, 2);
    const later = await telemetry.scrape();
    expect(countOf(later, 'tokentap_inter_chunk_latency_seconds', 'm')).toBe(15);
    expect(countOf(later, 'tokentap_inter_token_latency_seconds', 'm')).toBe(16);
    expect(countOf(later, 'tokentap_inter_token_latency_by_concurrency_seconds', 'm')).toBe(16);
  });

  it('leave no finished request held: end() records the rest and later samples go straight in', async () => {
    const { telemetry, recorder } = setup();
    const open = (recorder as unknown as { pendingInterTokens: Set<unknown> }).pendingInterTokens;
    for (let request = 0; request < 100; request++) {
      const series = recorder.interTokenSeries(recorder.requestAttributes('w', 'm'));
      for (let i = 0; i < 5; i++) series.record(20, 1);
      series.end();
      // A straggler after the end (an event the tap read after the request was cut).
      series.record(30, 1);
    }
    expect(open.size).toBe(0);
    const text = await telemetry.scrape();
    expect(countOf(text, 'tokentap_inter_chunk_latency_seconds', 'm')).toBe(600);
  });
});

/** Every tokentap metric family of a scrape, series sorted, help text kept: what Prometheus would store. */
function ourFamilies(text: string) {
  const ours = [...parsePrometheusText(text).values()].filter((f) => f.name.startsWith('tokentap_') || f.name.startsWith('gen_ai_'));
  return ours
    .map((f) => ({ ...f, metrics: [...f.metrics].sort((a, b) => JSON.stringify(a.labels).localeCompare(JSON.stringify(b.labels))) }))
    .sort((a, b) => a.name.localeCompare(b.name));
}

describe('request metrics outside the SDK', () => {
  it('are exactly what the SDK instruments make of the same requests', async () => {
    const { telemetry, recorder, reference } = setup();
    const chat = recorder.requestAttributes('chat', 'a');
    const rag = recorder.requestAttributes('rag', 'b');
    for (const [attributes, s] of [
      [chat, requestSummary({})],
      [chat, requestSummary({ ttftMs: 250, e2eMs: 3100, tokenCountMismatch: true })],
      [chat, requestSummary({ outcome: 'client_cancelled', statusClass: '2xx', tpotMs: Number.NaN, inputTokens: Number.NaN, outputTokens: 3, tokenSource: 'counted' })],
      [rag, requestSummary({ outcome: 'upstream_error', statusClass: '5xx', ttfbMs: 2, ttftMs: Number.NaN, tpotMs: Number.NaN, e2eMs: 2, inputTokens: Number.NaN, outputTokens: 0, tokenSource: 'counted' })],
      [rag, requestSummary({ outcome: 'timeout', statusClass: 'none', ttfbMs: Number.NaN, ttftMs: Number.NaN, tpotMs: Number.NaN, e2eMs: 300_000, inputTokens: Number.NaN, outputTokens: 0, tokenSource: 'counted' })],
    ] as const) {
      recorder.started(attributes);
      recorder.interTokenSeries(attributes).record(20, 1);
      recorder.finished(attributes, s);
    }
    recorder.started(rag); // still in flight
    recorder.tapProblem(chat, 'malformed_event');
    recorder.tapProblem(chat, 'malformed_event');
    recorder.tapProblem(rag, 'oversized_event');
    recorder.sloEvents(chat, 'ttft', 1, 0);
    recorder.sloEvents(chat, 'itl', 120, 8);
    recorder.sloEvents(rag, 'e2e', 0, 1);
    // A scrape in between changes no total.
    await telemetry.scrape();
    await reference.collect();
    recorder.sloEvents(chat, 'ttft', 0, 1);
    const direct = directMetricsOf(telemetry.meter)!;
    const names = new Set([...direct.histograms, ...direct.sums].map((set) => set.descriptor.name));
    const sdk = comparable(await reference.collect(), names);
    expect(sdk.length).toBeGreaterThan(10);
    expect(comparable(await telemetry.collect(), names)).toEqual(sdk);
    const ours = ourFamilies(await telemetry.scrape());
    // The fixture's own arithmetic, so a change to both paths cannot pass unnoticed.
    const requests = ours.find((f) => f.name === 'tokentap_requests_total');
    expect(requests?.metrics.map((m) => [m.labels['workload'], m.labels['outcome'], m.labels['http_status_class'], m.value])).toEqual([
      ['chat', 'client_cancelled', '2xx', '1'],
      ['chat', 'completed', '2xx', '2'],
      ['rag', 'timeout', 'none', '1'],
      ['rag', 'upstream_error', '5xx', '1'],
    ]);
    const inFlight = ours.find((f) => f.name === 'tokentap_requests_in_flight');
    expect(inFlight?.metrics.map((m) => [m.labels['workload'], m.value])).toEqual([
      ['chat', '0'],
      ['rag', '1'],
    ]);
    const slo = ours.find((f) => f.name === 'tokentap_slo_events_total');
    expect(slo?.metrics.find((m) => m.labels['slo'] === 'ttft' && m.labels['result'] === 'bad')?.value).toBe('1');
  });
});

describe('a value the SDK counter drops', () => {
  it('leave a counter as the SDK does: a negative add makes no series', async () => {
    const { telemetry, recorder, reference } = setup();
    const attributes = recorder.requestAttributes('chat', 'a');
    const itl = recorder.interTokenSeries(attributes);
    itl.record(20, 1);
    itl.end();
    recorder.tapProblem(attributes, 'malformed_event');
    (directMetricsOf(telemetry.meter)!.sums.find((set) => set.descriptor.name === 'tokentap.accelerator.time'))!.add(-1, recorder.requestAttributes('chat', 'b'));
    const direct = directMetricsOf(telemetry.meter)!;
    const names = new Set([...direct.histograms, ...direct.sums].map((set) => set.descriptor.name));
    const ours = comparable(await telemetry.collect(), names);
    expect(ours).toEqual(comparable(await reference.collect(), names));
    const chunk = ours.find((m) => m.name === 'tokentap.inter_chunk_latency');
    expect(chunk?.points.map((p) => (p.value as metrics.Histogram).count)).toEqual([1]);
    expect(ours.find((m) => m.name === 'tokentap.tap.errors')?.points).toHaveLength(1);
    expect(ours.find((m) => m.name === 'tokentap.accelerator.time')).toBeUndefined();
  });
});
