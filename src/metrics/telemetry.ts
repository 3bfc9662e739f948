import type { Meter } from '@opentelemetry/api';
import type { Resource } from '@opentelemetry/resources';
import { PrometheusExporter, PrometheusSerializer } from '@opentelemetry/exporter-prometheus';
import { metrics } from '@opentelemetry/sdk-node';
import { collectDefaultMetrics, Registry } from 'prom-client';
import { GPU_METRICS, METRICS, RELAY_METRICS } from './definitions.js';
import { attachDirectMetrics, DirectMetrics } from './direct-metrics.js';
import { PrometheusReader } from './prometheus-reader.js';

type ResourceMetrics = metrics.ResourceMetrics;

/** The Prometheus name of each OTel instrument (see definitions.ts for why the exporter needs it). */
const PROM_NAMES = new Map<string, string>([...Object.values(METRICS), ...Object.values(GPU_METRICS), ...Object.values(RELAY_METRICS)].map((def) => [def.otelName, def.promName]));

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

  /** `pushReaders`: further readers (the OTLP one) over the same instruments; `resource` describes this process to them. */
  constructor(pushReaders: readonly metrics.IMetricReader[] = [], resource?: Resource) {
    // The request metrics bypass the SDK's instruments (direct-metrics.ts says why) when every
    // reader takes their producer: the push readers are built before this and cannot take it, so
    // with OTLP they stay on the SDK's instruments.
    const direct = pushReaders.length === 0 ? new DirectMetrics() : undefined;
    this.reader = new PrometheusReader({ preventServerStart: true, ...(direct === undefined ? {} : { metricProducers: [direct] }) });
    this.provider = new metrics.MeterProvider({ readers: [this.reader, ...pushReaders], ...(resource === undefined ? {} : { resource }) });
    this.meter = this.provider.getMeter('tokentap');
    if (direct !== undefined) attachDirectMetrics(this.meter, direct);
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
