import type { Attributes, Counter, Meter, ObservableResult } from '@opentelemetry/api';
import { ATTR, GPU_METRICS } from '../metrics/definitions.js';
import type { DcgmScrapeErrorReason } from './dcgm-reader.js';
import type { GpuReading } from './gpu-readings.js';

/**
 * The GPU gauges as OpenTelemetry observable gauges: on each collection they report the readings
 * of the last DCGM scrape and nothing else, so a GPU (or the whole set) whose value is unknown is
 * simply not observed and its series is absent from /metrics, never a zero.
 */
export function registerGpuGauges(meter: Meter, readings: () => readonly GpuReading[]): void {
  const gauge = (def: (typeof GPU_METRICS)['memoryUsed' | 'memoryTotal' | 'utilization'], pick: (gpu: GpuReading) => number | undefined): void => {
    meter.createObservableGauge(def.otelName, { unit: def.unit, description: def.description }).addCallback((result: ObservableResult) => {
      for (const gpu of readings()) {
        const value = pick(gpu);
        if (value !== undefined) result.observe(value, gpu.labels as unknown as Attributes);
      }
    });
  };
  gauge(GPU_METRICS.memoryUsed, (gpu) => gpu.memoryUsedBytes);
  gauge(GPU_METRICS.memoryTotal, (gpu) => gpu.memoryTotalBytes);
  // Utilisation belongs to the physical GPU: on MIG only the GPU-level series carries it.
  gauge(GPU_METRICS.utilization, (gpu) => (gpu.labels.gpu_instance === undefined ? gpu.utilizationRatio : undefined));
}

/** tokentap_dcgm_scrape_errors_total, one pre-built attribute set per reason. */
export function createScrapeErrorCounter(meter: Meter): (reason: DcgmScrapeErrorReason) => void {
  const def = GPU_METRICS.scrapeErrors;
  const counter: Counter = meter.createCounter(def.otelName, { unit: def.unit, description: def.description });
  const attributes = new Map<DcgmScrapeErrorReason, Attributes>();
  return (reason) => {
    let attrs = attributes.get(reason);
    if (attrs === undefined) {
      attrs = { [ATTR.reason]: reason };
      attributes.set(reason, attrs);
    }
    counter.add(1, attrs);
  };
}
