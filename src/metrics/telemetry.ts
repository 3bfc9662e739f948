import type { Meter } from '@opentelemetry/api';
import type { Resource } from '@opentelemetry/resources';
import { PrometheusExporter, PrometheusSerializer } from '@opentelemetry/exporter-prometheus';
import { metrics } from '@opentelemetry/sdk-node';
import { collectDefaultMetrics, Registry } from 'prom-client';
import { BUILD_INFO, GPU_METRICS, METRICS, MODEL_INFO, PROFILE_METRICS, RELAY_METRICS } from './definitions.js';
import { attachDirectMetrics, attachNativeShadow, DirectMetrics } from './direct-metrics.js';
import { NATIVE_DEFAULTS, type NativeHistogramSettings } from './native-buckets.js';
import { PrometheusReader } from './prometheus-reader.js';
import { encodeDelimited, familiesFromOtel, familiesFromPromClient, type HistogramExposition } from './protobuf-exposition.js';

type ResourceMetrics = metrics.ResourceMetrics;

/** What the protobuf exposition carries of each histogram (`metrics.histograms`, `metrics.native`). */
export interface HistogramSettings {
  readonly histograms: HistogramExposition;
  readonly native: NativeHistogramSettings;
}

const DEFAULT_HISTOGRAMS: HistogramSettings = Object.freeze({ histograms: 'both', native: NATIVE_DEFAULTS });

/** The Prometheus name of each OTel instrument (see definitions.ts for why the exporter needs it). */
const PROM_NAMES = new Map<string, string>([...Object.values(METRICS), ...Object.values(GPU_METRICS), ...Object.values(RELAY_METRICS), ...Object.values(PROFILE_METRICS), BUILD_INFO, MODEL_INFO].map((def) => [def.otelName, def.promName]));

/**
 * The metrics pipeline: an OpenTelemetry MeterProvider whose Prometheus reader is pulled on scrape
 * (no exporter HTTP server of its own: /metrics lives on the admin listener), plus prom-client's
 * process metrics (event-loop lag, heap, GC, CPU) appended to the same exposition. With OTLP
 * configured, a push reader sits beside the Prometheus one and exports the instruments under their
 * OpenTelemetry (semantic-convention) names; the Prometheus renaming applies to the scrape only.
 */
export class Telemetry {
  readonly meter: Meter;
  private readonly provider: metrics.MeterProvider;
  private readonly reader: PrometheusExporter;
  private readonly processRegistry = new Registry();
  /** No target_info or otel_scope_* noise on every series: Prometheus adds target labels itself. */
  private readonly serializer = new PrometheusSerializer(undefined, false, undefined, true, true);
  private readonly direct: DirectMetrics | undefined;
  private readonly histograms: HistogramExposition;

  /** `pushReaders`: further readers (the OTLP one) over the same instruments; `resource` describes this process to them. */
  constructor(pushReaders: readonly metrics.IMetricReader[] = [], resource?: Resource, histogramSettings: HistogramSettings = DEFAULT_HISTOGRAMS) {
    // The request metrics bypass the SDK's instruments (direct-metrics.ts says why) when every
    // reader takes their producer: the push readers are built before this and cannot take it, so
    // with OTLP they stay on the SDK's instruments.
    // Native buckets are kept only where they can be served: on the direct series, and when asked.
    const native = histogramSettings.histograms === 'classic' ? undefined : histogramSettings.native;
    const direct = pushReaders.length === 0 ? new DirectMetrics(native) : undefined;
    // With OTLP, native buckets beside the SDK's instruments (direct-metrics.ts attachNativeShadow).
    this.direct = direct ?? (native === undefined ? undefined : new DirectMetrics(native));
    this.histograms = histogramSettings.histograms;
    this.reader = new PrometheusReader({ preventServerStart: true, ...(direct === undefined ? {} : { metricProducers: [direct] }) });
    this.provider = new metrics.MeterProvider({ readers: [this.reader, ...pushReaders], ...(resource === undefined ? {} : { resource }) });
    this.meter = this.provider.getMeter('tokentap');
    if (direct !== undefined) attachDirectMetrics(this.meter, direct);
    else if (this.direct !== undefined) attachNativeShadow(this.meter, this.direct);
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
   * native buckets as `metrics.histograms` says (with OTLP on, from the native shadow beside the
   * SDK's instruments).
   */
  async scrapeProtobuf(): Promise<Uint8Array> {
    const direct = this.direct;
    const ours = familiesFromOtel(withPrometheusNames(await this.collect()), (promName, attributes) => direct?.nativeBucketsOf(promName, attributes), this.histograms);
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
