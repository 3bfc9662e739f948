import { metrics } from '@opentelemetry/sdk-node';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { loadSettings } from '../../../src/config/load.js';
import { directMetricsOf } from '../../../src/metrics/direct-metrics.js';
import { Recorder } from '../../../src/metrics/recorder.js';
import { Telemetry } from '../../../src/metrics/telemetry.js';
import type { OtlpHistogramAggregation } from '../../../src/tracing/otlp-pipeline.js';
import { requestSummary } from '../../helpers/request-summary.js';
import { comparable, SdkReference, TestReader, testOtlpPush, type TemporalityPreference } from '../../helpers/sdk-reference.js';

const telemetries: Telemetry[] = [];
afterEach(async () => {
  vi.restoreAllMocks();
  await Promise.all(telemetries.splice(0).map((t) => t.shutdown()));
});

/** A Telemetry whose OTLP push reader is a TestReader, and an SDK reference reader of the same temporality and aggregation. */
function setup(preference: TemporalityPreference, histograms: OtlpHistogramAggregation, maxExponentialBuckets = 160) {
  const { push, pushed } = testOtlpPush(preference, histograms, maxExponentialBuckets);
  const telemetry = new Telemetry(push, undefined, { histograms: 'both', native: { schema: 3, maxBuckets: 160, zeroThreshold: 2 ** -128, maxZeroThreshold: 2 ** -128 } });
  telemetries.push(telemetry);
  const settings = loadSettings({ flags: {}, env: {}, readFile: () => '' });
  const buckets = { ...settings.buckets, itlChunk: [0.001, 0.005, 0.02, 0.05], itlToken: [0.001, 0.005, 0.02, 0.05] };
  const recorder = new Recorder(telemetry.meter, buckets);
  const direct = directMetricsOf(telemetry.meter)!;
  const reference = new SdkReference(
    direct,
    new TestReader({
      aggregationTemporalitySelector: push.temporality,
      aggregationSelector: (type) =>
        histograms === 'exponential' && type === metrics.InstrumentType.HISTOGRAM
          ? { type: metrics.AggregationType.EXPONENTIAL_HISTOGRAM, options: { maxSize: maxExponentialBuckets, recordMinMax: true } }
          : { type: metrics.AggregationType.DEFAULT },
    }),
  );
  const names = () => new Set([...direct.histograms, ...direct.sums].map((set) => set.descriptor.name));
  return { recorder, pushReader: pushed(), reference, names };
}

/** Three intervals of requests: one series only in the first, one added to with zero, a request in flight across them, multi-token chunks. */
function* intervals(recorder: Recorder): Generator<void> {
  const chat = recorder.requestAttributes('chat', 'a');
  const rag = recorder.requestAttributes('rag', 'b');
  recorder.started(chat);
  const itl = recorder.interTokenSeries(chat, '1-8');
  for (const [gapMs, tokens] of [[20, 1], [5, 1], [60, 3], [0, 1], [0.7, 1], [35, 7]] as const) itl.record(gapMs, tokens);
  recorder.finished(chat, requestSummary({}));
  recorder.started(rag);
  recorder.interTokenSeries(rag).record(120, 1);
  recorder.finished(rag, requestSummary({ outcome: 'upstream_error', statusClass: '5xx', ttftMs: Number.NaN, tpotMs: Number.NaN, e2eMs: 2, inputTokens: Number.NaN, outputTokens: 0, tokenSource: 'counted' }));
  recorder.tapProblem(chat, 'malformed_event');
  recorder.sloEvents(chat, 'itl', 12, 1);
  yield;
  recorder.started(chat); // in flight across the next export
  const itl2 = recorder.interTokenSeries(chat);
  for (let i = 0; i < 11; i++) itl2.record(19 + i, 1);
  itl2.record(400, 64);
  recorder.sloEvents(chat, 'itl', 0, 0);
  recorder.tapProblem(chat, 'malformed_event');
  yield;
  itl2.record(1e-6, 1);
  itl2.end();
  recorder.finished(chat, requestSummary({ ttftMs: 250, e2eMs: 3100, tokenCountMismatch: true }));
  yield;
  // Nothing in this interval.
  yield;
}

describe('the request series pushed over OTLP', () => {
  for (const preference of ['cumulative', 'delta', 'lowmemory'] as const) {
    for (const histograms of ['explicit', 'exponential'] as const) {
      it(`are what the SDK's instruments export from the same samples: ${histograms} histograms, ${preference} temporality, four exports`, async () => {
        const { recorder, pushReader, reference, names } = setup(preference, histograms);
        let exports = 0;
        for (const _ of intervals(recorder)) {
          const ours = comparable((await pushReader.collect()).resourceMetrics, names());
          const sdk = comparable(await reference.collect(), names());
          expect(ours).toEqual(sdk);
          exports++;
        }
        expect(exports).toBe(4);
      });
    }
  }

  it('hold what the fixture says, so a change to both sides cannot pass unnoticed', async () => {
    const { recorder, pushReader } = setup('delta', 'exponential');
    const collected: metrics.ResourceMetrics[] = [];
    for (const _ of intervals(recorder)) collected.push((await pushReader.collect()).resourceMetrics);
    const metric = (i: number, name: string) => collected[i]!.scopeMetrics.flatMap((s) => s.metrics).find((m) => m.descriptor.name === name);
    const token = metric(1, 'tokentap.inter_token_latency');
    expect(token?.dataPointType).toBe(metrics.DataPointType.EXPONENTIAL_HISTOGRAM);
    expect(token?.aggregationTemporality).toBe(metrics.AggregationTemporality.DELTA);
    // The second interval: 11 one-token gaps and 64 tokens of one 400 ms chunk.
    expect((token?.dataPoints[0]?.value as metrics.ExponentialHistogram).count).toBe(75);
    const requests = metric(2, 'tokentap.requests');
    expect(requests?.dataPoints.map((p) => p.value)).toEqual([1]);
    // The in-flight gauge stays cumulative under a delta preference (as the SDK's selector has it).
    expect(metric(1, 'tokentap.requests.in_flight')?.aggregationTemporality).toBe(metrics.AggregationTemporality.CUMULATIVE);
    // The quiet fourth interval exports no request series at all.
    expect(collected[3]!.scopeMetrics.flatMap((s) => s.metrics).filter((m) => m.descriptor.name.startsWith('tokentap.')).map((m) => m.descriptor.name)).toEqual(['tokentap.requests.in_flight']);
  });
});

describe('a chunk of many tokens pushed over OTLP', () => {
  it('is one update of each exponential per-token histogram, however many tokens it claims (the SDK took one record() per token)', async () => {
    const { ExponentialHistogramAccumulation } = await import('@opentelemetry/sdk-metrics/build/src/aggregator/ExponentialHistogram.js');
    const { recorder, pushReader } = setup('cumulative', 'exponential');
    const itl = recorder.interTokenSeries(recorder.requestAttributes('chat', 'm'), '1-8');
    const records = vi.spyOn(ExponentialHistogramAccumulation.prototype, 'record');
    const increments = vi.spyOn(ExponentialHistogramAccumulation.prototype, 'updateByIncrement');
    // 10^7 tokens (MAX_TOKENS_PER_REQUEST, what a request may claim in all) in one 2 s chunk.
    itl.record(2000, 10_000_000);
    // Per chunk one record(); per token and per token by band one increment of 10^7 each.
    expect(records).toHaveBeenCalledTimes(1);
    expect(increments.mock.calls.filter(([, increment]) => increment === 10_000_000)).toHaveLength(2);
    const collected = (await pushReader.collect()).resourceMetrics.scopeMetrics.flatMap((s) => s.metrics);
    const token = collected.find((m) => m.descriptor.name === 'tokentap.inter_token_latency');
    const value = token?.dataPoints[0]?.value as metrics.ExponentialHistogram;
    expect(value.count).toBe(10_000_000);
    expect(value.min).toBe(2 / 10_000_000);
  });
});

describe('delta points over OTLP', () => {
  const key = (metric: string, attributes: object) => `${metric} ${JSON.stringify(Object.entries(attributes).sort())}`;

  for (const histograms of ['explicit', 'exponential'] as const) {
    it(`follow one another without gap or overlap per series, across quiet intervals (${histograms} histograms)`, async () => {
      const { recorder, pushReader } = setup('delta', histograms);
      const lastEnd = new Map<string, metrics.DataPoint<unknown>['endTime']>();
      let checked = 0;
      for (const _ of intervals(recorder)) {
        for (const metric of (await pushReader.collect()).resourceMetrics.scopeMetrics.flatMap((s) => s.metrics)) {
          if (metric.aggregationTemporality !== metrics.AggregationTemporality.DELTA) continue;
          for (const point of metric.dataPoints as metrics.DataPoint<unknown>[]) {
            const k = key(metric.descriptor.name, point.attributes);
            const previous = lastEnd.get(k);
            if (previous !== undefined) {
              expect(point.startTime, k).toEqual(previous);
              checked++;
            }
            expect(point.startTime[0] * 1e9 + point.startTime[1]).toBeLessThanOrEqual(point.endTime[0] * 1e9 + point.endTime[1]);
            lastEnd.set(k, point.endTime);
          }
        }
      }
      // The fixture's series reported again after a first point: requests, tap errors, SLO events, ITL, TTFT...
      expect(checked).toBeGreaterThan(5);
    });
  }

  it('sum an interval apart from the running total: 0.123456789 after 3.7e7 is exported as 0.123456789', async () => {
    const { recorder, pushReader } = setup('delta', 'exponential');
    const attributes = recorder.requestAttributes('chat', 'm');
    recorder.acceleratorTime(attributes, 3.7e7, 0, true);
    await pushReader.collect();
    recorder.acceleratorTime(attributes, 0.123456789, 0, true);
    const collected = (await pushReader.collect()).resourceMetrics.scopeMetrics.flatMap((s) => s.metrics);
    const seconds = collected.find((m) => m.descriptor.name === 'tokentap.accelerator.time');
    const prefill = seconds?.dataPoints.find((p) => p.attributes['phase'] === 'prefill');
    expect(prefill?.value).toBe(0.123456789);
  });
});

describe('a cumulative exponential histogram pushed over OTLP', () => {
  it('keeps its scale through an interval of zeros only (one accumulation for the series\' life)', async () => {
    const { recorder, pushReader } = setup('cumulative', 'exponential');
    const itl = recorder.interTokenSeries(recorder.requestAttributes('chat', 'm'));
    const point = async () => {
      const collected = (await pushReader.collect()).resourceMetrics.scopeMetrics.flatMap((s) => s.metrics);
      return collected.find((m) => m.descriptor.name === 'tokentap.inter_chunk_latency')?.dataPoints[0]?.value as metrics.ExponentialHistogram;
    };
    itl.record(20, 2);
    itl.record(21, 2);
    const before = await point();
    itl.record(0, 2);
    await point();
    itl.record(20.5, 2);
    const after = await point();
    expect(after.count).toBe(4);
    expect(after.zeroCount).toBe(1);
    expect(after.scale).toBe(before.scale);
    expect(before.scale).toBeGreaterThan(5);
  });
});
