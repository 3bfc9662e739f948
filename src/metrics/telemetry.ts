import type { Meter } from '@opentelemetry/api';
import type { Resource } from '@opentelemetry/resources';
import { PrometheusExporter, PrometheusSerializer } from '@opentelemetry/exporter-prometheus';
import { metrics } from '@opentelemetry/sdk-node';
import { collectDefaultMetrics, Registry } from 'prom-client';
import { BUILD_INFO, GPU_METRICS, METRICS, MODEL_INFO, PROFILE_METRICS, POD_METRICS, RELAY_METRICS, UPSTREAM_READY } from './definitions.js';
import type { OtlpMetricPush } from '../tracing/otlp-pipeline.js';
import { attachDirectMetrics, DirectMetrics } from './direct-metrics.js';
import { NATIVE_DEFAULTS, type NativeHistogramSettings } from './native-buckets.js';
import { PrometheusReader } from './prometheus-reader.js';
import { PushedMetrics } from './pushed-metrics.js';
import { encodeDelimited, familiesFromOtel, familiesFromPromClient, type HistogramExposition } from './protobuf-exposition.js';

type ResourceMetrics = metrics.ResourceMetrics;

/** What the protobuf exposition carries of each histogram (`metrics.histograms`, `metrics.native`). */
export interface HistogramSettings {
  readonly histograms: HistogramExposition;
  readonly native: NativeHistogramSettings;
}

const DEFAULT_HISTOGRAMS: HistogramSettings = Object.freeze({ histograms: 'both', native: NATIVE_DEFAULTS });

/** The Prometheus name of each OTel instrument (see definitions.ts for why the exporter needs it). */
const PROM_NAMES = new Map<string, string>([...Object.values(METRICS), ...Object.values(GPU_METRICS), ...Object.values(RELAY_METRICS), ...Object.values(PROFILE_METRICS), ...Object.values(POD_METRICS), BUILD_INFO, MODEL_INFO, UPSTREAM_READY].map((def) => [def.otelName, def.promName]));

/**
 * The metrics pipeline: an OpenTelemetry MeterProvider whose Prometheus reader is pulled on scrape
 * (no exporter HTTP server of its own: /metrics lives on the admin listener), plus prom-client's
 * process metrics (event-loop lag, heap, GC, CPU) appended to the same exposition. The request
 * series are tokentap's own (direct-metrics.ts), a producer of both readers. With OTLP configured,
 * a push reader sits beside the Prometheus one and exports them, and the SDK's instruments, under
 * their OpenTelemetry (semantic-convention) names; the Prometheus renaming applies to the scrape only.
 */
export class Telemetry {
  readonly meter: Meter;
  private readonly provider: metrics.MeterProvider;
  private readonly reader: PrometheusExporter;
  private readonly processRegistry = new Registry();
  /** No target_info or otel_scope_* noise on every series: Prometheus adds target labels itself. */
  private readonly serializer = new PrometheusSerializer(undefined, false, undefined, true, true);
  private readonly direct: DirectMetrics;
  private readonly histograms: HistogramExposition;

  /** `otlpMetrics`: a push reader beside the Prometheus one; `resource` describes this process to it. */
  constructor(otlpMetrics?: OtlpMetricPush, resource?: Resource, histogramSettings: HistogramSettings = DEFAULT_HISTOGRAMS) {
    // Native buckets are kept only when asked for.
    const native = histogramSettings.histograms === 'classic' ? undefined : histogramSettings.native;
    const pushed =
      otlpMetrics === undefined
        ? undefined
        : {
            exponentialMaxSize: otlpMetrics.histograms === 'exponential' ? otlpMetrics.maxExponentialBuckets : undefined,
            delta: otlpMetrics.temporality(metrics.InstrumentType.HISTOGRAM) === metrics.AggregationTemporality.DELTA,
          };
    this.direct = new DirectMetrics(native, pushed);
    this.histograms = histogramSettings.histograms;
    this.reader = new PrometheusReader({ preventServerStart: true, metricProducers: [this.direct] });
    const pushReaders = otlpMetrics === undefined ? [] : [otlpMetrics.reader(new PushedMetrics(this.direct, (type) => otlpMetrics.temporality(type)))];
    this.provider = new metrics.MeterProvider({ readers: [this.reader, ...pushReaders], ...(resource === undefined ? {} : { resource }) });
    this.meter = this.provider.getMeter('tokentap');
    attachDirectMetrics(this.meter, this.direct);
    collectDefaultMetrics({ register: this.processRegistry });
  }

  /** The OTel data points, as collected for a scrape; for in-process readers such as the demo summary. */
  async collect(): Promise<ResourceMetrics> {
    const { resourceMetrics } = await this.reader.collect();
    return resourceMetrics;
  }

  /** Prometheus text exposition (format 0.0.4). */
  async scrape(): Promise<string> {
    const ours = this.serializer.serialize(withPrometheusNames(await this.collect()));
    const process = await this.processRegistry.metrics();
    return `${ours}${ours.endsWith('\n') ? '' : '\n'}${process}`;
  }

  /**
   * The protobuf exposition (protobuf-exposition.ts): the same families as scrape(), histograms with
   * native buckets as `metrics.histograms` says.
   */
  async scrapeProtobuf(): Promise<Uint8Array> {
    const direct = this.direct;
    const ours = familiesFromOtel(withPrometheusNames(await this.collect()), (attributes) => direct.nativeBucketsOf(attributes), this.histograms);
    const process = familiesFromPromClient(await this.processRegistry.getMetricsAsJSON());
    return encodeDelimited([...ours, ...process]);
  }

  /** Also the final export of every push reader (OTLP). */
  async shutdown(): Promise<void> {
    this.processRegistry.clear();
    await this.provider.shutdown();
  }
}

function withPrometheusNames(resourceMetrics: ResourceMetrics): ResourceMetrics {
  return {
    ...resourceMetrics,
    scopeMetrics: resourceMetrics.scopeMetrics.map((scope) => ({
      ...scope,
      metrics: scope.metrics.map((metric) => {
        const promName = PROM_NAMES.get(metric.descriptor.name);
        return promName === undefined ? metric : { ...metric, descriptor: { ...metric.descriptor, name: promName } };
      }),
    })),
  };
}
