import { DISPLAY_CONTROL } from '../text/display-controls.js';
import type { ExpositionSample } from './exposition-parser.js';

/** The DCGM exporter fields tokentap reads (names as in dcp-metrics-included.csv / default-counters.csv). */
const DCGM_FIELDS = {
  memoryUsed: 'DCGM_FI_DEV_FB_USED',
  memoryFree: 'DCGM_FI_DEV_FB_FREE',
  memoryReserved: 'DCGM_FI_DEV_FB_RESERVED',
  memoryTotal: 'DCGM_FI_DEV_FB_TOTAL',
  utilization: 'DCGM_FI_DEV_GPU_UTIL',
} as const;

const READ_FIELDS = new Set<string>(Object.values(DCGM_FIELDS));

/** True for the exporter series tokentap reads; the parser skips the rest. */
export function isReadField(name: string): boolean {
  return READ_FIELDS.has(name);
}

/** DCGM reports framebuffer sizes in MiB. */
const BYTES_PER_MIB = 1024 * 1024;

/**
 * DCGM's "blank" values (dcgm_structs.h): DCGM_INT32_BLANK is 0x7ffffff0 and the NOT_FOUND,
 * NOT_SUPPORTED, NOT_PERMISSIONED markers follow it; DCGM_INT64_BLANK is 0x7ffffffffffffff0 and
 * DCGM_FP64_BLANK 140737488355328.0, both larger. The exporter prints them as plain numbers, so
 * any value at or above the smallest of them means "unknown": no GPU has 2 PiB of memory or
 * 2-billion-percent utilisation.
 */
const DCGM_BLANK_THRESHOLD = 0x7ffffff0;

/**
 * The most GPU series (devices, or MIG instances) one scrape may give this pod: a 16-GPU node cut
 * into 7 MIG instances each has 112. Past it the scrape is refused (`bad_text`): each is a label
 * set of the GPU gauges, and the OpenTelemetry SDK keeps at most 2,000 per instrument for the
 * life of the process, after which every reading lands in one overflow series without its labels.
 */
export const MAX_GPUS_PER_SCRAPE = 256;

/**
 * The most distinct GPU label sets (gpu, UUID, and for MIG GPU_I_ID and GPU_I_PROFILE) the gauges
 * are given over the life of the process. The SDK remembers every label set a gauge has reported,
 * even those no longer observed, and puts every reading past its 2,000th into the overflow series:
 * an exporter whose labels keep changing (under 256 a scrape) would otherwise spend them all in a
 * few scrapes. A pod's GPUs do not change while it runs; a MIG reconfiguration brings a few more.
 */
export const MAX_GPU_LABEL_SETS = 1024;

/** One string per label set, for counting the distinct ones (MAX_GPU_LABEL_SETS). */
export function labelSetKey(labels: GpuLabels): string {
  return `${labels.gpu}\u0000${labels.uuid}\u0000${labels.gpu_instance ?? ''}\u0000${labels.gpu_profile ?? ''}`;
}

/**
 * A label value copied to tokentap's own series and the status page: at most 128 characters and
 * no display control (text/display-controls.ts), as model names are (metrics/model-labels.ts).
 */
const MAX_LABEL_LENGTH = 128;

/** Labels of one exported GPU series: the device, and for MIG the instance. */
export interface GpuLabels {
  readonly gpu: string;
  readonly uuid: string;
  /** MIG only: `GPU_I_ID` and `GPU_I_PROFILE` of the instance. */
  readonly gpu_instance?: string;
  readonly gpu_profile?: string;
}

export interface GpuReading {
  readonly labels: GpuLabels;
  readonly memoryUsedBytes: number | undefined;
  /** FB_TOTAL when the exporter reports it, else used + free + reserved. */
  readonly memoryTotalBytes: number | undefined;
  /** GPU_UTIL / 100. On MIG, DCGM reports it per physical GPU, so it sits on the GPU, not the instance. */
  readonly utilizationRatio: number | undefined;
}

export interface GpuReadings {
  readonly gpus: readonly GpuReading[];
  /** A field tokentap reads held a blank/sentinel, NaN, infinite or negative value (that quantity is then absent). */
  readonly sawSentinel: boolean;
  /** Series of this pod skipped for a label value longer than 128 characters or holding a control character. */
  readonly badLabels: number;
  /** More than MAX_GPUS_PER_SCRAPE devices or instances: `gpus` is then empty. */
  readonly devices: number;
}

interface FieldValues {
  labels: GpuLabels;
  values: Map<string, number | 'blank'>;
}

/** Groups our series by GPU (and MIG instance) and turns DCGM's MiB and percent into bytes and ratios. */
export function toGpuReadings(ownSamples: readonly ExpositionSample[]): GpuReadings {
  const byDevice = new Map<string, FieldValues>();
  let sawSentinel = false;
  let badLabels = 0;
  for (const sample of ownSamples) {
    if (!READ_FIELDS.has(sample.name)) continue;
    const labels = gpuLabelsOf(sample.labels);
    if (labels === undefined) continue;
    if (!printable(labels.gpu) || !printable(labels.uuid) || !printable(labels.gpu_instance) || !printable(labels.gpu_profile)) {
      badLabels++;
      continue;
    }
    const key = `${labels.uuid}\u0000${labels.gpu_instance ?? ''}`;
    let entry = byDevice.get(key);
    if (entry === undefined) {
      entry = { labels, values: new Map() };
      byDevice.set(key, entry);
    }
    const valid = Number.isFinite(sample.value) && sample.value >= 0 && sample.value < DCGM_BLANK_THRESHOLD;
    if (!valid) sawSentinel = true;
    entry.values.set(sample.name, valid ? sample.value : 'blank');
  }
  if (byDevice.size > MAX_GPUS_PER_SCRAPE) return { gpus: [], sawSentinel, badLabels, devices: byDevice.size };
  const gpus: GpuReading[] = [];
  for (const { labels, values } of byDevice.values()) {
    const mib = (field: string): number | undefined => {
      const value = values.get(field);
      return typeof value === 'number' ? value * BYTES_PER_MIB : undefined;
    };
    const used = mib(DCGM_FIELDS.memoryUsed);
    const free = mib(DCGM_FIELDS.memoryFree);
    const reserved = mib(DCGM_FIELDS.memoryReserved);
    // FB_RESERVED appeared with DCGM 3; before it used + free was the whole framebuffer. A blank
    // reserved value, though, leaves the total unknown.
    const reservedPart = values.has(DCGM_FIELDS.memoryReserved) ? reserved : 0;
    const summed = used !== undefined && free !== undefined && reservedPart !== undefined ? used + free + reservedPart : undefined;
    const total = values.has(DCGM_FIELDS.memoryTotal) ? mib(DCGM_FIELDS.memoryTotal) : summed;
    const util = values.get(DCGM_FIELDS.utilization);
    const utilization = typeof util === 'number' && util <= 100 ? util / 100 : undefined;
    if (typeof util === 'number' && util > 100) sawSentinel = true;
    gpus.push({ labels, memoryUsedBytes: used, memoryTotalBytes: total, utilizationRatio: utilization });
  }
  gpus.sort((a, b) => compare(a.labels, b.labels));
  return { gpus, sawSentinel, badLabels, devices: byDevice.size };
}

/** Absent, or a label value fit to copy (MAX_LABEL_LENGTH, DISPLAY_CONTROL). */
function printable(value: string | undefined): boolean {
  return value === undefined || (value.length <= MAX_LABEL_LENGTH && !DISPLAY_CONTROL.test(value));
}

function gpuLabelsOf(labels: Readonly<Record<string, string>>): GpuLabels | undefined {
  const uuid = labels.UUID;
  const gpu = labels.gpu;
  if (!uuid || gpu === undefined) return undefined;
  const instance = labels.GPU_I_ID;
  if (!instance) return { gpu, uuid };
  return { gpu, uuid, gpu_instance: instance, gpu_profile: labels.GPU_I_PROFILE ?? '' };
}

function compare(a: GpuLabels, b: GpuLabels): number {
  return Number(a.gpu) - Number(b.gpu) || a.uuid.localeCompare(b.uuid) || (a.gpu_instance ?? '').localeCompare(b.gpu_instance ?? '');
}
