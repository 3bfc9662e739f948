import type { Meter, ObservableResult } from '@opentelemetry/api';
import type { Clock } from '../clock/clock.js';
import type { CostSettings } from '../config/load.js';
import { acceleratorCount } from '../dcgm/accelerator-count.js';
import type { GpuReading } from '../dcgm/gpu-readings.js';
import { ATTR, POD_METRICS } from './definitions.js';
import { ProcessorSharing } from './processor-sharing.js';

/** The pod's time shared among its requests, and what one second of it costs in accelerators. */
export interface PodTime {
  readonly sharing: ProcessorSharing;
  /** Accelerators to multiply each request's share by: undefined without `cost:`, or while DCGM has not reported the pod's GPUs. */
  accelerators(): number | undefined;
}

const MS_PER_S = 1000;

/**
 * Starts the sharing at the sidecar's start and exports the pod-level series of
 * docs/capacity-and-cost.md: busy and idle seconds (always, read at each collection so they are
 * current at every scrape), and with `cost:` the accelerator count and the price per hour.
 */
export function createPodTime(meter: Meter, clock: Clock, cost: CostSettings | undefined, dcgm: { readonly gpus: readonly GpuReading[] } | undefined): PodTime {
  const sharing = new ProcessorSharing(clock.nowMs());
  const configured = cost?.accelerators;
  const accelerators =
    configured === undefined
      ? () => undefined
      : configured === 'dcgm'
        ? () => {
            const count = dcgm === undefined ? 0 : acceleratorCount(dcgm.gpus);
            return count > 0 ? count : undefined;
          }
        : () => configured;
  const { busy, idle, accelerators: acceleratorGauge, pricePerHour } = POD_METRICS;
  meter.createObservableCounter(busy.otelName, { unit: busy.unit, description: busy.description }).addCallback((result: ObservableResult) => {
    result.observe(sharing.busyUntil(clock.nowMs()) / MS_PER_S);
  });
  meter.createObservableCounter(idle.otelName, { unit: idle.unit, description: idle.description }).addCallback((result: ObservableResult) => {
    result.observe(sharing.idleUntil(clock.nowMs()) / MS_PER_S);
  });
  if (cost !== undefined) {
    meter.createObservableGauge(acceleratorGauge.otelName, { unit: acceleratorGauge.unit, description: acceleratorGauge.description }).addCallback((result: ObservableResult) => {
      const count = accelerators();
      if (count !== undefined) result.observe(count);
    });
    const currency = Object.freeze({ [ATTR.currency]: cost.currency });
    meter.createObservableGauge(pricePerHour.otelName, { unit: pricePerHour.unit, description: pricePerHour.description }).addCallback((result: ObservableResult) => {
      result.observe(cost.pricePerHour, currency);
    });
  }
  return { sharing, accelerators };
}
