import type { Attributes } from '@opentelemetry/api';
import { AggregationTemporalityPreference, OTLPMetricExporter } from '@opentelemetry/exporter-metrics-otlp-http';
import { metrics } from '@opentelemetry/sdk-node';
import { vi } from 'vitest';
import { HistogramSeries, SumSeriesSet, type DirectMetrics } from '../../src/metrics/direct-metrics.js';
import type { OtlpHistogramAggregation, OtlpMetricPush } from '../../src/tracing/otlp-pipeline.js';

/** A pull reader standing in for the periodic one: the test collects it when it likes. */
export class TestReader extends metrics.MetricReader {
  protected override async onShutdown(): Promise<void> {}
  protected override async onForceFlush(): Promise<void> {}
}

export type TemporalityPreference = 'cumulative' | 'delta' | 'lowmemory';

/**
 * OTLP metrics as Telemetry takes them (startOtlp's OtlpMetricPush), with the real OTLP exporter's
 * temporality for `preference` (what OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE sets) and a
 * TestReader in place of the periodic one: `pushed()` is that reader once Telemetry has made it.
 */
export function testOtlpPush(preference: TemporalityPreference, histograms: OtlpHistogramAggregation, maxExponentialBuckets = 160): { push: OtlpMetricPush; pushed: () => TestReader } {
  const temporalityPreference = { cumulative: AggregationTemporalityPreference.CUMULATIVE, delta: AggregationTemporalityPreference.DELTA, lowmemory: AggregationTemporalityPreference.LOWMEMORY }[preference];
  const exporter = new OTLPMetricExporter({ url: 'http://127.0.0.1:9/v1/metrics', temporalityPreference });
  const temporality = (type: metrics.InstrumentType) => exporter.selectAggregationTemporality(type);
  let reader: TestReader | undefined;
  const push: OtlpMetricPush = {
    histograms,
    maxExponentialBuckets,
    temporality,
    reader: (producer) => {
      reader = new TestReader({ metricProducers: [producer], aggregationTemporalitySelector: temporality });
      return reader;
    },
  };
  return {
    push,
    pushed: () => {
      if (reader === undefined) throw new Error('no push reader made yet');
      return reader;
    },
  };
}

type Call = { readonly series: HistogramSeries; readonly value: number; readonly times: number } | { readonly set: SumSeriesSet; readonly value: number; readonly attributes: Attributes };

/**
 * What the OpenTelemetry SDK's own instruments make of the samples a DirectMetrics takes: every
 * record(), recordTimes() and add() on its series is logged (spies on the prototypes, calling
 * through) and, at each collect(), replayed into SDK instruments of the same name, unit,
 * description and buckets on a reader of the test's choosing (temporality, aggregation). Samples
 * are replayed one record() each, as tokentap's Recorder once recorded them through the SDK.
 * Call restore() (or vi.restoreAllMocks) when done.
 */
export class SdkReference {
  private readonly direct: DirectMetrics;
  private readonly reader: metrics.MetricReader;
  private readonly meter;
  private readonly calls: Call[] = [];
  private readonly histograms = new Map<string, ReturnType<typeof this.meter.createHistogram>>();
  private readonly sums = new Map<string, { add(value: number, attributes: Attributes): void }>();

  constructor(direct: DirectMetrics, reader: metrics.MetricReader) {
    this.direct = direct;
    this.reader = reader;
    this.meter = new metrics.MeterProvider({ readers: [reader] }).getMeter('tokentap');
    const calls = this.calls;
    const record = HistogramSeries.prototype.record;
    const recordTimes = HistogramSeries.prototype.recordTimes;
    const add = SumSeriesSet.prototype.add;
    vi.spyOn(HistogramSeries.prototype, 'record').mockImplementation(function (this: HistogramSeries, value: number) {
      calls.push({ series: this, value, times: 1 });
      record.call(this, value);
    });
    vi.spyOn(HistogramSeries.prototype, 'recordTimes').mockImplementation(function (this: HistogramSeries, value: number, times: number) {
      calls.push({ series: this, value, times });
      recordTimes.call(this, value, times);
    });
    vi.spyOn(SumSeriesSet.prototype, 'add').mockImplementation(function (this: SumSeriesSet, value: number, attributes: Attributes) {
      calls.push({ set: this, value, attributes });
      add.call(this, value, attributes);
    });
  }

  /** The reference reader's collection, after replaying every sample taken since the last one. */
  async collect(): Promise<metrics.ResourceMetrics> {
    this.direct.runCollectHooks();
    const owner = new Map<HistogramSeries, (typeof this.direct.histograms)[number]>();
    for (const set of this.direct.histograms) for (const series of set.allSeries()) owner.set(series, set);
    for (const call of this.calls.splice(0)) {
      if ('series' in call) {
        const set = owner.get(call.series);
        if (set === undefined || Number.isNaN(call.value)) continue;
        const d = set.descriptor;
        let histogram = this.histograms.get(d.name);
        if (histogram === undefined) {
          histogram = this.meter.createHistogram(d.name, { unit: d.unit, description: d.description, advice: { explicitBucketBoundaries: [...set.bucketBoundaries] } });
          this.histograms.set(d.name, histogram);
        }
        for (let i = 0; i < call.times; i++) histogram.record(call.value, call.series.attributes);
      } else {
        if (!this.direct.sums.includes(call.set)) continue;
        const d = call.set.descriptor;
        let sum = this.sums.get(d.name);
        if (sum === undefined) {
          const options = { unit: d.unit, description: d.description };
          sum = call.set.isMonotonic ? this.meter.createCounter(d.name, options) : this.meter.createUpDownCounter(d.name, options);
          this.sums.set(d.name, sum);
        }
        sum.add(call.value, call.attributes);
      }
    }
    return (await this.reader.collect()).resourceMetrics;
  }

  restore(): void {
    vi.restoreAllMocks();
  }
}

/** A metric's data with what must agree: names, types, temporality, attributes and values (sums to 12 digits apart); points sorted by attributes. */
export function comparable(resourceMetrics: metrics.ResourceMetrics, names: ReadonlySet<string>) {
  const out = [];
  for (const scope of resourceMetrics.scopeMetrics) {
    for (const metric of scope.metrics) {
      if (!names.has(metric.descriptor.name)) continue;
      const { name, unit, description } = metric.descriptor;
      const points = (metric.dataPoints as metrics.DataPoint<unknown>[])
        .map((point) => ({ attributes: JSON.stringify(Object.entries(point.attributes).sort()), value: roundSums(point.value) }))
        .sort((a, b) => a.attributes.localeCompare(b.attributes));
      out.push({ name, unit, description, temporality: metric.aggregationTemporality, type: metric.dataPointType, monotonic: 'isMonotonic' in metric ? metric.isMonotonic : undefined, points });
    }
  }
  return out.sort((a, b) => a.name.localeCompare(b.name));
}

/** Sums rounded to 12 significant digits: the SDK and tokentap add the same samples, not always in the same order. */
function roundSums(value: unknown): unknown {
  if (typeof value === 'number') return Number(value.toPrecision(12));
  if (typeof value !== 'object' || value === null) return value;
  const copy: Record<string, unknown> = { ...(value as Record<string, unknown>) };
  if (typeof copy['sum'] === 'number') copy['sum'] = Number((copy['sum'] as number).toPrecision(12));
  return copy;
}
