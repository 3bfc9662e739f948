import type { GpuReading } from './gpu-readings.js';

/**
 * How many accelerators the DCGM readings of this pod describe, for `cost.accelerators: dcgm`: each
 * MIG instance is one (the price is then per instance), and a GPU counts once unless it is split
 * into instances, whose GPU-level reading (utilisation) is not a further accelerator.
 */
export function acceleratorCount(gpus: readonly GpuReading[]): number {
  const split = new Set<string>();
  for (const gpu of gpus) if (gpu.labels.gpu_instance !== undefined) split.add(gpu.labels.uuid);
  let count = 0;
  for (const gpu of gpus) if (gpu.labels.gpu_instance !== undefined || !split.has(gpu.labels.uuid)) count++;
  return count;
}
