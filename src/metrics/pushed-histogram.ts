import type { HrTime } from '@opentelemetry/api';
import { hrTime } from '@opentelemetry/core';
import type { metrics } from '@opentelemetry/sdk-node';
// Not exported from the package's index. Its own accumulation rather than a copy of its algorithm:
// the OTLP exponential histograms stay exactly what the SDK's aggregation made of the same
// samples (pushed-metrics.test.ts compares them). sdk-metrics is pinned to an exact version.
import { ExponentialHistogramAccumulation } from '@opentelemetry/sdk-metrics/build/src/aggregator/ExponentialHistogram.js';

/**
 * What the OTLP push reader asks of the histograms beyond the cumulative explicit buckets every
 * series keeps for Prometheus: the SDK would give it exponential buckets (`metrics.otlp_histograms`),
 * or delta temporality (OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE), from the same samples.
 */
export interface PushedHistogramShape {
  /** Exponential histograms of at most this many buckets a side (as the SDK's `maxSize`); undefined: explicit buckets. */
  readonly exponentialMaxSize: number | undefined;
  /** Each export holds the samples since the previous one. */
  readonly delta: boolean;
}

/** One series' samples as the push reader wants them: kept beside the series' own, on the hot path. */
export interface PushedHistogramPart {
  /** `times` samples of `value`; `bucket` is the value's explicit bucket, found once by the series. */
  add(value: number, times: number, bucket: number): void;
  /** Anything to export: any sample at all (cumulative) or since the last export (delta). */
  readonly sampled: boolean;
}

/** The part a series keeps for `shape`; none when the push reader reads the series' cumulative explicit buckets as Prometheus does. */
export function pushedPart(shape: PushedHistogramShape | undefined, boundaries: readonly number[]): PushedHistogramPart | undefined {
  if (shape === undefined) return undefined;
  if (shape.exponentialMaxSize !== undefined) return new ExponentialPart(shape.exponentialMaxSize);
  return shape.delta ? new ExplicitInterval(boundaries.length + 1) : undefined;
}

/** Explicit buckets since the last export (delta temporality), with the interval's own count, sum, min and max. */
export class ExplicitInterval implements PushedHistogramPart {
  private counts: Float64Array;
  private count = 0;
  private sum = 0;
  private min = Infinity;
  private max = -Infinity;
  private startTime: HrTime = hrTime();

  constructor(buckets: number) {
    this.counts = new Float64Array(buckets);
  }

  get sampled(): boolean {
    return this.count > 0;
  }

  add(value: number, times: number, bucket: number): void {
    // One addition per sample, as the SDK adds them (and as the cumulative series does).
    for (let i = 0; i < times; i++) this.sum += value;
    this.count += times;
    if (value < this.min) this.min = value;
    if (value > this.max) this.max = value;
    (this.counts[bucket] as number) += times;
  }

  /** The interval's histogram; the next interval starts at `endTime`. */
  take(boundaries: readonly number[], endTime: HrTime): { startTime: HrTime; value: metrics.Histogram } {
    const taken = {
      startTime: this.startTime,
      value: { buckets: { boundaries: [...boundaries], counts: Array.from(this.counts) }, count: this.count, sum: this.sum, min: this.min, max: this.max },
    };
    this.counts = new Float64Array(this.counts.length);
    this.count = 0;
    this.sum = 0;
    this.min = Infinity;
    this.max = -Infinity;
    this.startTime = endTime;
    return taken;
  }
}

/** Exponential buckets, through the SDK's own accumulation: cumulative, or since the last export (`take`). */
export class ExponentialPart implements PushedHistogramPart {
  private readonly maxSize: number;
  private accumulation: ExponentialHistogramAccumulation;

  constructor(maxSize: number) {
    this.maxSize = maxSize;
    this.accumulation = new ExponentialHistogramAccumulation(hrTime(), maxSize, true);
  }

  get sampled(): boolean {
    return this.accumulation.count > 0;
  }

  add(value: number, times: number): void {
    // One call for an n-token chunk's n per-token samples (the SDK's instruments took n record()s).
    if (times === 1) this.accumulation.record(value);
    else this.accumulation.updateByIncrement(value, times);
  }

  /** The histogram so far (cumulative), or (`restart`) the interval's, the next one starting at `endTime`. */
  take(restart: boolean, endTime: HrTime): { startTime: HrTime; value: metrics.ExponentialHistogram } {
    const accumulation = this.accumulation;
    if (restart) this.accumulation = new ExponentialHistogramAccumulation(endTime, this.maxSize, true);
    const point = accumulation.toPointValue();
    // As the SDK's ExponentialHistogramAggregator.toMetricData gives a histogram instrument's point.
    return {
      startTime: accumulation.startTime,
      value: {
        min: point.hasMinMax ? point.min : undefined,
        max: point.hasMinMax ? point.max : undefined,
        sum: point.sum,
        positive: { offset: point.positive.offset, bucketCounts: point.positive.bucketCounts },
        negative: { offset: point.negative.offset, bucketCounts: point.negative.bucketCounts },
        count: point.count,
        scale: point.scale,
        zeroCount: point.zeroCount,
      },
    };
  }
}
