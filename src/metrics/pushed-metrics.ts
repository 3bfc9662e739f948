import type { HrTime } from '@opentelemetry/api';
import { hrTime } from '@opentelemetry/core';
import { emptyResource } from '@opentelemetry/resources';
import { metrics } from '@opentelemetry/sdk-node';
import { DIRECT_SCOPE, type DirectMetrics, type HistogramSeriesSet, type SumSeries, type SumSeriesSet } from './direct-metrics.js';
import type { ExplicitInterval, ExponentialPart } from './pushed-histogram.js';

type AggregationTemporality = metrics.AggregationTemporality;
type InstrumentType = metrics.InstrumentType;
type MetricData = metrics.MetricData;

/**
 * DirectMetrics' series as the OTLP push reader asks for them, as a MetricProducer of that reader:
 * what the SDK's own instruments would have exported from the same samples. Temporality per
 * instrument type comes from the exporter (OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE: delta
 * for counters and histograms, up-down counters stay cumulative, as the SDK's selectors say);
 * histograms are explicit or exponential as the series were made (DirectMetrics.pushed).
 *
 * Why not the SDK's instruments for OTLP: with them every request series went through
 * `record()`/`add()` again, whose cost direct-metrics.ts describes, and the per-token histograms took
 * one `record()` per token: measured on the benchmark's paired cell (64 streams of 64 tokens), OTLP
 * on cost 1.38x the CPU per token of OTLP off; an upstream claiming 1,024 tokens per event made
 * 1,024 calls of it per event.
 *
 * A delta export holds what was recorded since the previous export of this producer, as the SDK's
 * delta aggregation does: a series without any sample or add() in the interval is left out. A
 * point starts where the series' previous point ended (its first, when the series was made), so a
 * series' points are contiguous; the SDK starts a series' first point after a quiet interval at its
 * first sample instead (both are valid OTLP: no two points of a series overlap).
 *
 * Exponential histograms are the SDK's own accumulation, kept one per series for its life
 * (cumulative) or per interval (delta). The SDK's cumulative export merges each interval's
 * accumulation into the last and so can lower the scale for good after an interval of zeros only
 * (its scale getter reads 0 for an accumulation holding only zeros); one accumulation does not.
 */
export class PushedMetrics implements metrics.MetricProducer {
  private readonly direct: DirectMetrics;
  private readonly temporalityOf: (type: InstrumentType) => AggregationTemporality;
  /** Delta sums: each series' add() count and end time at its last exported point. */
  private readonly exportedSums = new WeakMap<SumSeries, { adds: number; endTime: HrTime }>();

  constructor(direct: DirectMetrics, temporalityOf: (type: InstrumentType) => AggregationTemporality) {
    this.direct = direct;
    this.temporalityOf = temporalityOf;
  }

  async collect(): Promise<metrics.CollectionResult> {
    this.direct.runCollectHooks();
    const endTime = hrTime();
    // As the series were made (Telemetry asked the same exporter when it made DirectMetrics).
    const histogramDelta = this.direct.pushed?.delta ?? false;
    const out: MetricData[] = [];
    for (const set of this.direct.histograms) {
      const data = this.histogramData(set, histogramDelta, endTime);
      if (data.dataPoints.length > 0) out.push(data);
    }
    for (const set of this.direct.sums) {
      const type = set.isMonotonic ? metrics.InstrumentType.COUNTER : metrics.InstrumentType.UP_DOWN_COUNTER;
      const data = this.temporalityOf(type) === metrics.AggregationTemporality.DELTA ? this.deltaSumData(set, endTime) : set.metricData(endTime);
      if (data.dataPoints.length > 0) out.push(data);
    }
    return { resourceMetrics: { resource: emptyResource(), scopeMetrics: [{ scope: DIRECT_SCOPE, metrics: out }] }, errors: [] };
  }

  private histogramData(set: HistogramSeriesSet, delta: boolean, endTime: HrTime): MetricData {
    const temporality = delta ? metrics.AggregationTemporality.DELTA : metrics.AggregationTemporality.CUMULATIVE;
    if (this.direct.pushed?.exponentialMaxSize !== undefined) {
      const dataPoints: metrics.DataPoint<metrics.ExponentialHistogram>[] = [];
      for (const series of set.allSeries()) {
        const part = series.pushed as ExponentialPart;
        if (!part.sampled) continue;
        const { startTime, value } = part.take(delta, endTime);
        dataPoints.push({ attributes: series.attributes, startTime, endTime, value });
      }
      return { descriptor: set.descriptor, aggregationTemporality: temporality, dataPointType: metrics.DataPointType.EXPONENTIAL_HISTOGRAM, dataPoints };
    }
    if (!delta) return set.metricData(endTime);
    const dataPoints: metrics.DataPoint<metrics.Histogram>[] = [];
    for (const series of set.allSeries()) {
      const part = series.pushed as ExplicitInterval;
      if (!part.sampled) continue;
      const { startTime, value } = part.take(set.bucketBoundaries, endTime);
      dataPoints.push({ attributes: series.attributes, startTime, endTime, value });
    }
    return { descriptor: set.descriptor, aggregationTemporality: temporality, dataPointType: metrics.DataPointType.HISTOGRAM, dataPoints };
  }

  private deltaSumData(set: SumSeriesSet, endTime: HrTime): MetricData {
    const dataPoints: metrics.DataPoint<number>[] = [];
    for (const series of set.allSeries()) {
      const exported = this.exportedSums.get(series);
      if (exported !== undefined && exported.adds === series.adds) continue;
      dataPoints.push({ attributes: series.attributes, startTime: exported?.endTime ?? series.startTime, endTime, value: series.sinceExport });
      series.sinceExport = 0;
      this.exportedSums.set(series, { adds: series.adds, endTime });
    }
    return { descriptor: set.descriptor, aggregationTemporality: metrics.AggregationTemporality.DELTA, dataPointType: metrics.DataPointType.SUM, isMonotonic: set.isMonotonic, dataPoints };
  }
}
