import type { CapacitySettings, Settings, Workload } from '../config/load.js';
import type { HistogramKey } from '../metrics/definitions.js';
import { IN_FLIGHT_BANDS } from '../metrics/in-flight-band.js';
import { bandUpperBound } from '../render/capacity-rules.js';
import type { WorkloadCounts } from './status-counts.js';
import type { TimedTrendPoint } from './status-report.js';

/**
 * Capacity at SLO for this pod (docs/capacity-and-cost.md), from the sidecar's own by-concurrency
 * histograms since start: the same definitions as the fleet's recording rules (capacity-rules.ts),
 * over one pod. Every figure the page cannot give comes with the reason, in `absent`.
 */

export type BandVerdict = 'held' | 'broken' | 'too_few';

export interface BandStatus {
  readonly band: string;
  readonly upper_bound: number;
  /** Requests that started in this band with a first token, and those without one that the TTFT SLO counts bad. */
  readonly requests: number;
  /** Share of the band's first tokens within the TTFT threshold; null without a TTFT SLO or samples. */
  readonly ttft_good_ratio: number | null;
  /** Share of the band's token gaps within the ITL threshold; null without an ITL SLO or samples. */
  readonly itl_good_ratio: number | null;
  readonly verdict: BandVerdict;
}

/** Why a figure is null, by the figure's field name. */
export type AbsentReasons = Partial<Record<'capacity_in_flight' | 'sustainable_rps' | 'peak_rps' | 'headroom' | 'pods_needed_observed' | 'pods_needed_planned', string>>;

export interface CapacityFigures {
  /** The upper bound of the capacity band; null with a reason in `absent`. */
  readonly capacity_in_flight: number | null;
  readonly capacity_band: string | null;
  /** True while no band broke: capacity is "at least" its value. */
  readonly at_least: boolean;
  /** The lowest broken band; null while none broke. */
  readonly knee_band: string | null;
  /** Mean e2e since start, seconds; null before the first finished request. */
  readonly mean_e2e_s: number | null;
  /** Little's law: capacity / mean e2e. */
  readonly sustainable_rps: number | null;
  /** The highest 5-minute rate of generation requests of the trend (the last hour). */
  readonly peak_rps: number | null;
  /** 1 - peak in flight / capacity. */
  readonly headroom: number | null;
  /** ceil(peak_rps / sustainable_rps): pods this pod's traffic alone needed at its peak. */
  readonly pods_needed_observed: number | null;
  readonly absent: AbsentReasons;
}

export interface WorkloadCapacity extends CapacityFigures {
  readonly name: string;
  readonly bands: readonly BandStatus[];
}

export interface CapacityStatus {
  readonly min_samples_per_band: number;
  readonly planned_peak_rps: number | null;
  /** The most requests in flight at once in this pod since start, every workload. */
  readonly peak_in_flight: number;
  /** Every workload together, the figures to plan with. */
  readonly mix: CapacityFigures;
  /** ceil(capacity.planned_peak_rps / the mix's sustainable_rps); null with a reason in mix.absent. */
  readonly pods_needed_planned: number | null;
  /** The workloads with a TTFT or ITL SLO, in configuration order. */
  readonly workloads: readonly WorkloadCapacity[];
}

export interface CapacityInputs {
  readonly settings: Pick<Settings, 'workloads' | 'buckets'> & { readonly capacity: CapacitySettings };
  /** Cumulative counts since start, per workload. */
  readonly counts: (name: string) => WorkloadCounts;
  readonly peakInFlight: number;
  readonly trend: ReadonlyMap<string, readonly TimedTrendPoint[]>;
}

/**
 * Samples within `thresholdS` / all samples, from non-cumulative bucket counts over `boundaries`
 * (thresholds are boundaries); `failed` more judged bad without a sample (TTFT: no first token).
 */
function goodRatio(boundaries: readonly number[], counts: readonly number[], thresholdS: number | undefined, failed = 0): number | null {
  if (thresholdS === undefined) return null;
  let good = 0;
  let all = failed;
  counts.forEach((n, i) => {
    all += n;
    if (i < boundaries.length && (boundaries[i] as number) <= thresholdS) good += n;
  });
  return all > 0 ? good / all : null;
}

function bandStatuses(workload: Workload, counts: WorkloadCounts, buckets: Readonly<Record<HistogramKey, readonly number[]>>, minSamples: number): BandStatus[] {
  const slo = workload.slo;
  return IN_FLIGHT_BANDS.flatMap((band): BandStatus[] => {
    const histograms = counts.bands.get(band);
    if (histograms === undefined) return [];
    const requests = histograms.ttft.reduce((a, b) => a + b, 0) + histograms.failed;
    // A band whose only requests got no first token and none the SLO counts bad (answers not streamed) judges nothing.
    if (requests === 0 && histograms.itl.length === 0) return [];
    const ttft = goodRatio(buckets.ttftByConcurrency, histograms.ttft, slo?.thresholdsS.ttft, histograms.failed);
    const itl = goodRatio(buckets.itlByConcurrency, histograms.itl, slo?.thresholdsS.itl);
    const objective = slo?.objective ?? 1;
    const held = (ttft === null || ttft >= objective) && (itl === null || itl >= objective);
    return [{ band, upper_bound: bandUpperBound(band as (typeof IN_FLIGHT_BANDS)[number]), requests, ttft_good_ratio: ttft, itl_good_ratio: itl, verdict: requests < minSamples ? 'too_few' : held ? 'held' : 'broken' }];
  });
}

interface Capacity {
  readonly inFlight: number | null;
  readonly band: string | null;
  readonly atLeast: boolean;
  readonly knee: string | null;
  readonly reason: string | undefined;
}

/** The knee and the capacity below it, as capacity-rules.ts defines them. */
function capacityOf(bands: readonly BandStatus[], minSamples: number): Capacity {
  const knee = bands.find((b) => b.verdict === 'broken');
  const below = bands.filter((b) => b.verdict === 'held' && (knee === undefined || b.upper_bound < knee.upper_bound));
  const top = below[below.length - 1];
  if (top !== undefined) return { inFlight: top.upper_bound, band: top.band, atLeast: knee === undefined, knee: knee?.band ?? null, reason: undefined };
  if (knee?.band === '1') return { inFlight: null, band: null, atLeast: false, knee: '1', reason: 'the SLO fails with a single request in flight (band 1 broke): that is latency, not capacity' };
  const most = bands.reduce<BandStatus | undefined>((m, b) => (m === undefined || b.requests > m.requests ? b : m), undefined);
  const yet = most === undefined ? 'no request with a first token yet' : `the most is ${most.requests} in band ${most.band}`;
  const reason = knee === undefined ? `no band has ${minSamples} requests yet (${yet})` : `band ${knee.band} broke, and no band below it has ${minSamples} requests yet`;
  return { inFlight: null, band: null, atLeast: false, knee: knee?.band ?? null, reason };
}

function figures(capacity: Capacity, e2eSumS: number, e2eCount: number, peakRps: number | null, peakInFlight: number, peakReason: string): CapacityFigures {
  const absent: AbsentReasons = {};
  const meanE2e = e2eCount > 0 ? e2eSumS / e2eCount : null;
  let sustainable: number | null = null;
  if (capacity.inFlight === null) absent.capacity_in_flight = capacity.reason as string;
  if (capacity.inFlight === null) absent.sustainable_rps = `no capacity: ${capacity.reason as string}`;
  else if (meanE2e === null || meanE2e <= 0) absent.sustainable_rps = 'no finished request yet to measure the mean e2e';
  else sustainable = capacity.inFlight / meanE2e;
  if (peakRps === null) absent.peak_rps = peakReason;
  const headroom = capacity.inFlight === null ? null : 1 - peakInFlight / capacity.inFlight;
  if (headroom === null) absent.headroom = `no capacity: ${capacity.reason as string}`;
  let podsNeeded: number | null = null;
  if (sustainable !== null && peakRps !== null) podsNeeded = Math.ceil(peakRps / sustainable);
  else absent.pods_needed_observed = sustainable === null ? (absent.sustainable_rps as string) : peakReason;
  return {
    capacity_in_flight: capacity.inFlight,
    capacity_band: capacity.band,
    at_least: capacity.atLeast,
    knee_band: capacity.knee,
    mean_e2e_s: meanE2e,
    sustainable_rps: sustainable,
    peak_rps: peakRps,
    headroom,
    pods_needed_observed: podsNeeded,
    absent,
  };
}

function maxOf(values: Iterable<number | null>): number | null {
  let max: number | null = null;
  for (const v of values) if (v !== null && (max === null || v > max)) max = v;
  return max;
}

const NO_PEAK = 'no 5-minute rate yet: the first trend point is taken a minute after start';

export function capacityStatus(inputs: CapacityInputs): CapacityStatus {
  const { settings, peakInFlight, trend } = inputs;
  const minSamples = settings.capacity.minSamplesPerBand;
  const judged = settings.workloads.filter((w) => w.slo?.thresholdsS.ttft !== undefined || w.slo?.thresholdsS.itl !== undefined);
  const workloads = judged.map((workload): WorkloadCapacity => {
    const counts = inputs.counts(workload.name);
    const bands = bandStatuses(workload, counts, settings.buckets, minSamples);
    const e2eCount = counts.histograms.e2e.reduce((a, b) => a + b, 0);
    const peak = maxOf((trend.get(workload.name) ?? []).map((p) => p.generations_per_s));
    return { name: workload.name, bands, ...figures(capacityOf(bands, minSamples), counts.e2eSumS, e2eCount, peak, peakInFlight, NO_PEAK) };
  });

  // The mix: every workload shares the pod's concurrency, so it holds where every workload holds.
  let mixCapacity: Capacity;
  const broken1 = workloads.find((w) => w.knee_band === '1');
  const measured = workloads.filter((w) => w.capacity_in_flight !== null);
  if (judged.length === 0) mixCapacity = { inFlight: null, band: null, atLeast: false, knee: null, reason: 'no workload has a TTFT or ITL SLO to judge the bands by' };
  else if (broken1 !== undefined) mixCapacity = { inFlight: null, band: null, atLeast: false, knee: '1', reason: `${broken1.name}: ${broken1.absent.capacity_in_flight as string}` };
  else if (measured.length === 0) mixCapacity = { inFlight: null, band: null, atLeast: false, knee: null, reason: workloads.map((w) => `${w.name}: ${w.absent.capacity_in_flight as string}`).join('; ') };
  else {
    const least = Math.min(...measured.map((w) => w.capacity_in_flight as number));
    // A workload that broke at or below that band, with no counted band beneath its knee, has no
    // capacity of its own, yet the mix broke there too: it holds only where every workload holds.
    const brokenBelow = workloads.find((w) => w.capacity_in_flight === null && w.knee_band !== null && bandUpperBound(w.knee_band as (typeof IN_FLIGHT_BANDS)[number]) <= least);
    const atMin = measured.filter((w) => w.capacity_in_flight === least);
    mixCapacity =
      brokenBelow === undefined
        ? { inFlight: least, band: atMin[0]?.capacity_band ?? null, atLeast: atMin.every((w) => w.at_least), knee: atMin.find((w) => !w.at_least)?.knee_band ?? null, reason: undefined }
        : { inFlight: null, band: null, atLeast: false, knee: brokenBelow.knee_band, reason: `${brokenBelow.name}: ${brokenBelow.absent.capacity_in_flight as string}` };
  }
  let e2eSum = 0;
  let e2eCount = 0;
  const totals = new Map<number, number>();
  for (const workload of settings.workloads) {
    const counts = inputs.counts(workload.name);
    e2eSum += counts.e2eSumS;
    e2eCount += counts.histograms.e2e.reduce((a, b) => a + b, 0);
    for (const point of trend.get(workload.name) ?? []) {
      if (point.generations_per_s !== null) totals.set(point.atMs, (totals.get(point.atMs) ?? 0) + point.generations_per_s);
    }
  }
  const mix = figures(mixCapacity, e2eSum, e2eCount, maxOf(totals.values()), peakInFlight, NO_PEAK);
  const planned = settings.capacity.plannedPeakRps;
  let podsPlanned: number | null = null;
  if (planned === undefined) mix.absent.pods_needed_planned = 'no planned peak: set capacity.planned_peak_rps';
  else if (mix.sustainable_rps === null) mix.absent.pods_needed_planned = mix.absent.sustainable_rps as string;
  else podsPlanned = Math.ceil(planned / mix.sustainable_rps);
  return { min_samples_per_band: minSamples, planned_peak_rps: planned ?? null, peak_in_flight: peakInFlight, mix, pods_needed_planned: podsPlanned, workloads };
}
