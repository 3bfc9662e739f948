import { createNoopMeter, type Attributes, type Counter, type Meter, type MeterProvider } from '@opentelemetry/api';
import { ATTR_ERROR_TYPE } from '@opentelemetry/semantic-conventions';

/**
 * Spans the BatchSpanProcessor dropped because its queue was full (OTEL_BSP_MAX_QUEUE_SIZE, 2,048
 * by default): a collector that is down, slow or refusing holds the queue full, and every span
 * ended meanwhile is lost. The SDK counts those only into its self-observability counter
 * `otel.sdk.processor.span.processed{error.type="queue_full"}` (@opentelemetry/sdk-trace 2.12,
 * export/SpanProcessorMetrics.js), on the meter provider given as `selfObsMeterProvider`, and
 * otherwise says nothing. This provider is that meter provider: it keeps that one count as a
 * number, read for tokentap_limit_exceeded_total{limit="otlp_span_queue"}, and ignores the other
 * instruments (queue size and capacity, spans exported).
 */
export class SpanQueueDrops implements MeterProvider {
  dropped = 0;
  private readonly meter: Meter;

  constructor() {
    const processed: Counter = {
      add: (value: number, attributes?: Attributes) => {
        if (attributes?.[ATTR_ERROR_TYPE] === 'queue_full') this.dropped += value;
      },
    };
    const meter: Meter = Object.create(createNoopMeter()) as Meter;
    meter.createCounter = () => processed;
    this.meter = meter;
  }

  getMeter(): Meter {
    return this.meter;
  }
}
