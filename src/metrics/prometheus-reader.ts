import { PrometheusExporter } from '@opentelemetry/exporter-prometheus';
import { metrics } from '@opentelemetry/sdk-node';

/**
 * The OTel Prometheus exporter, except that observable gauges report only what their callback
 * observed in this collection. The exporter fixes cumulative temporality for every instrument,
 * and the SDK's cumulative processing merges each collection into the last one, so an attribute
 * set observed once would be exported forever with its last value (sdk-metrics
 * TemporalMetricProcessor.merge). For a gauge that is a stale value posing as current: a GPU
 * whose DCGM reading is gone must vanish from /metrics, not repeat its last memory figure. With
 * delta temporality the SDK reports the current observations alone, which is what the OTel spec
 * asks for asynchronous gauges; a last-value gauge has no other difference between the two.
 */
export class PrometheusReader extends PrometheusExporter {
  override selectAggregationTemporality(instrumentType: metrics.InstrumentType): metrics.AggregationTemporality {
    if (instrumentType === metrics.InstrumentType.OBSERVABLE_GAUGE) return metrics.AggregationTemporality.DELTA;
    return super.selectAggregationTemporality(instrumentType);
  }
}
