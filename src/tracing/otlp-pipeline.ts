import type { Resource } from '@opentelemetry/resources';
import type { AggregationTemporality, IMetricReader, InstrumentType, MetricProducer } from '@opentelemetry/sdk-metrics';
import type { BufferConfig } from '@opentelemetry/sdk-trace-base';
import type { SpanProcessorOptions } from '@opentelemetry/sdk-trace';
import type { Logger } from 'pino';
import type { Clock } from '../clock/clock.js';
import { NULL_TRACER, type RequestTracer } from './request-span.js';
import { loggableEndpoint, OtlpExportHealth, watchExports } from './otlp-export-health.js';
import { SpanQueueDrops } from './span-queue-drops.js';
import type { OtlpProtocol, OtlpSettings } from './otlp-settings.js';

/** How histograms are pushed over OTLP (`metrics.otlp_histograms`). */
export type OtlpHistogramAggregation = 'explicit' | 'exponential';

/** How metrics are pushed over OTLP: Telemetry makes the reader, with its producer of the request series. */
export interface OtlpMetricPush {
  /** `metrics.otlp_histograms`. */
  readonly histograms: OtlpHistogramAggregation;
  /** Buckets a side of an exponential histogram (the SDK's `maxSize`). */
  readonly maxExponentialBuckets: number;
  /** The exporter's temporality for an instrument type (OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE). */
  temporality(type: InstrumentType): AggregationTemporality;
  /** The push reader: every export interval, the SDK's own instruments and what `producer` gives. */
  reader(producer: MetricProducer): IMetricReader;
}

/** The OTLP side of telemetry: how metrics are pushed, and the request tracer. */
export interface OtlpPipeline {
  /** Undefined when metrics are not pushed. */
  readonly metricPush: OtlpMetricPush | undefined;
  /** For the MeterProvider, so pushed metrics carry service.name and OTEL_RESOURCE_ATTRIBUTES. */
  readonly resource: Resource | undefined;
  /** NULL_TRACER when spans are not exported. */
  readonly tracer: RequestTracer;
  /** One per exporter: its failures, for tokentap_otlp_export_failures_total. */
  readonly exportHealth: readonly OtlpExportHealth[];
  /** Spans dropped so far because the span queue was full, for tokentap_limit_exceeded_total{limit="otlp_span_queue"}. */
  droppedSpans(): number;
  /** Exports the spans still buffered, then stops. */
  shutdown(): Promise<void>;
}

export const OTLP_OFF: OtlpPipeline = Object.freeze({
  metricPush: undefined,
  resource: undefined,
  tracer: NULL_TRACER,
  exportHealth: [],
  droppedSpans: () => 0,
  shutdown: async () => undefined,
});

/**
 * Builds the exporters the settings ask for. The OpenTelemetry SDK modules are imported only here,
 * on demand, so a sidecar without OTLP does not even load them.
 *
 * http/json uses @opentelemetry/exporter-{metrics,trace}-otlp-http; http/protobuf uses the
 * -otlp-proto exporters of the same release (0.223.0, installed with @opentelemetry/sdk-node).
 * Not NodeSDK: it registers global providers and a context manager, and tests run several
 * sidecars in one process; tokentap needs neither auto-instrumentation nor in-process context.
 */
export async function startOtlp(
  settings: OtlpSettings | undefined,
  clock: Clock,
  upstream: URL,
  logger: Logger,
  histograms: OtlpHistogramAggregation = 'explicit',
  maxExponentialBuckets = 160,
): Promise<OtlpPipeline> {
  if (settings === undefined) return OTLP_OFF;
  const { defaultResource, resourceFromAttributes } = await import('@opentelemetry/resources');
  const resource = defaultResource().merge(resourceFromAttributes(settings.resourceAttributes));

  let metricPush: OtlpMetricPush | undefined;
  const exportHealth: OtlpExportHealth[] = [];
  if (settings.metrics !== undefined) {
    const { PeriodicExportingMetricReader } = await import('@opentelemetry/sdk-metrics');
    const { url, protocol, intervalMs, timeoutMs } = settings.metrics;
    const { OTLPMetricExporter } = await metricExporterModule(protocol);
    const health = new OtlpExportHealth('metrics', loggableEndpoint(url), logger);
    exportHealth.push(health);
    // No aggregation preference: every histogram is tokentap's own (metrics/pushed-metrics.ts makes
    // it exponential for this reader alone; a View would change the Prometheus reader's too).
    const exporter = watchExports(new OTLPMetricExporter({ url }), health);
    metricPush = {
      histograms,
      maxExponentialBuckets,
      temporality: (type) => exporter.selectAggregationTemporality(type),
      reader: (producer) => new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: intervalMs, exportTimeoutMillis: timeoutMs, metricProducers: [producer] }),
    };
  }

  if (settings.traces === undefined) return { ...OTLP_OFF, metricPush, resource, exportHealth };
  const { BasicTracerProvider, BatchSpanProcessor } = await import('@opentelemetry/sdk-trace-base');
  const { OtelRequestTracer } = await import('./otel-request-tracer.js');
  const { OTLPTraceExporter } = await traceExporterModule(settings.traces.protocol);
  const traceHealth = new OtlpExportHealth('traces', loggableEndpoint(settings.traces.url), logger);
  exportHealth.push(traceHealth);
  const spanExporter = watchExports(new OTLPTraceExporter({ url: settings.traces.url }), traceHealth);
  const drops = new SpanQueueDrops();
  // BufferConfig's type lacks the option, but the processor passes its config on to sdk-trace's
  // BatchSpanProcessor, whose options take it (sdk-trace 2.12 SpanProcessorOptions).
  const processorOptions: BufferConfig & SpanProcessorOptions = { selfObsMeterProvider: drops };
  const provider = new BasicTracerProvider({ resource, spanProcessors: [new BatchSpanProcessor(spanExporter, processorOptions)] });
  return {
    metricPush,
    resource,
    exportHealth,
    droppedSpans: () => drops.dropped,
    tracer: new OtelRequestTracer(provider.getTracer('tokentap'), clock, upstream),
    shutdown: () => provider.shutdown(),
  };
}

function metricExporterModule(protocol: OtlpProtocol) {
  return protocol === 'http/json' ? import('@opentelemetry/exporter-metrics-otlp-http') : import('@opentelemetry/exporter-metrics-otlp-proto');
}

function traceExporterModule(protocol: OtlpProtocol) {
  return protocol === 'http/json' ? import('@opentelemetry/exporter-trace-otlp-http') : import('@opentelemetry/exporter-trace-otlp-proto');
}
