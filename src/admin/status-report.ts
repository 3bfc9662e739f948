import { SLO_KINDS, defaultCapacitySettings, type CapacitySettings, type CostSettings, type Settings, type SloKind, type Workload } from '../config/load.js';
import { capacityStatus, type CapacityStatus } from './status-capacity.js';
import { costStatus, type CostStatus } from './status-cost.js';
import type { HistogramKey } from '../metrics/definitions.js';
import { quantile } from '../metrics/live-summary.js';
import type { Outcome } from '../metrics/recorder.js';
import { BURN_RATE_POLICIES } from '../render/burn-rate-windows.js';
import type { StatusHistogram, WorkloadCounts } from './status-counts.js';
import { workloadCountsIn, type TimedCounts } from './status-history.js';

/** Bumped only when a field changes meaning or goes away; new fields may be added without it. */
export const STATUS_SCHEMA_VERSION = 1;

/** Every outcome, in the order the page lists them; a Record so a new Outcome fails to compile here. */
const OUTCOME_ORDER: Record<Outcome, number> = {
  completed: 0,
  client_cancelled: 1,
  client_error: 2,
  upstream_error: 3,
  truncated: 4,
  timeout: 5,
  shutdown: 6,
};
export const OUTCOMES = Object.keys(OUTCOME_ORDER) as Outcome[];

/**
 * The outcomes the error ratio counts: the server side failed the request (an upstream error,
 * a stream cut short, a timeout). A client that gives up or asks for something refused, and the
 * sidecar's own drain, are not the service failing.
 */
export const ERROR_OUTCOMES: readonly Outcome[] = ['upstream_error', 'truncated', 'timeout'];

/** The page alert's fast-burn factor (SRE Workbook table 5-8: 2 % of a 30-day budget in an hour). */
export const FAST_BURN_FACTOR = Math.max(...BURN_RATE_POLICIES.flatMap((policy) => policy.conditions.map((c) => c.factor)));

/**
 * `ok`: the last window spent the error budget no faster than it lasts (burn rate <= 1);
 * `burning`: faster; `fast_burn`: at or above the page alert's factor; `no_data`: no SLO event in
 * the window; `no_slo`: nothing to judge.
 */
export type SloState = 'ok' | 'burning' | 'fast_burn' | 'no_data' | 'no_slo';
const STATE_SEVERITY: Record<SloState, number> = { no_slo: 0, no_data: 1, ok: 2, burning: 3, fast_burn: 4 };

/** Which latency histogram feeds which status histogram (the buckets the recorder uses). */
const BUCKETS_OF: Record<StatusHistogram, HistogramKey> = { ttft: 'ttft', itl: 'itlToken', e2e: 'e2e' };

export interface EventWindow {
  readonly good: number;
  readonly bad: number;
  /** good / (good + bad); null without events. */
  readonly attainment: number | null;
  /** (bad / (good + bad)) / (1 - objective); null without events. */
  readonly burn_rate: number | null;
  /** 1 - burn_rate: the share of the window's error budget left (negative when overspent). */
  readonly error_budget_remaining: number | null;
}

export interface SloStatus {
  readonly slo: SloKind;
  readonly threshold_s: number;
  readonly state: SloState;
  readonly lifetime: EventWindow;
  readonly window: EventWindow;
}

export interface LatencyStatus {
  /** Upper bounds of the finite buckets, seconds; `counts` has one more entry, the +Inf bucket. */
  readonly boundaries_s: readonly number[];
  /** Samples per bucket (not cumulative) over the SLO window. */
  readonly counts: readonly number[];
  readonly samples: number;
  /** histogram_quantile over the window's buckets; null without samples. */
  readonly p50_s: number | null;
  readonly p99_s: number | null;
  /** The workload's SLO threshold for this latency, when it has one. */
  readonly threshold_s: number | null;
}

export interface WorkloadStatus {
  readonly name: string;
  readonly objective: number | null;
  /** The worst state of its SLOs. */
  readonly state: SloState;
  readonly in_flight: number;
  /** Finished requests since start, every outcome. */
  readonly requests_total: Readonly<Record<Outcome, number>>;
  /** Finished requests per second over the rate window, every outcome. */
  readonly requests_per_s: Readonly<Record<Outcome, number>>;
  readonly tokens_per_s: { readonly input: number; readonly output: number };
  /** `tokentap_goodput_requests_total` per second over the rate window; null without an SLO. */
  readonly goodput_per_s: number | null;
  /** Goodput over the SLO window: requests that met every SLO / finished generation requests; null without an SLO or without requests. */
  readonly goodput_ratio: number | null;
  /** Finished generation requests over the SLO window that ended upstream_error, truncated or timeout, as a share of all; null without requests. */
  readonly error_ratio: number | null;
  readonly slos: readonly SloStatus[];
  readonly latency: Readonly<Record<StatusHistogram, LatencyStatus>>;
  /** The same figures over the last hour, one point a minute, oldest first (status-trend.ts). */
  readonly trend: readonly TrendPoint[];
}

/** One minute of the trend: the 5-minute figures as they were `ago_s` seconds before this report. */
export interface TrendPoint {
  readonly ago_s: number;
  readonly ttft_p99_s: number | null;
  readonly worst_burn_rate: number | null;
  readonly error_ratio: number | null;
  /** Finished generation requests per second over the 5 minutes before the point (capacity's observed peak); null at start. */
  readonly generations_per_s: number | null;
}

/** A trend point as recorded (Clock milliseconds); the report turns `atMs` into `ago_s`. */
export interface TimedTrendPoint extends Omit<TrendPoint, 'ago_s'> {
  readonly atMs: number;
}

export interface GpuStatus {
  readonly gpu: string;
  readonly uuid: string;
  readonly gpu_instance: string | null;
  readonly gpu_profile: string | null;
  readonly memory_used_bytes: number | null;
  readonly memory_total_bytes: number | null;
  readonly utilization_ratio: number | null;
}

export interface UpstreamStatus {
  readonly url: string;
  readonly ready: boolean;
  /** "HTTP 200", an error code (ECONNREFUSED...), or why the sidecar is draining (as /readyz says). */
  readonly detail: string;
}

export interface StatusReport {
  readonly schema_version: number;
  readonly version: string;
  readonly generated_at: string;
  readonly uptime_s: number;
  /** How often the page asks again. */
  readonly refresh_s: number;
  readonly upstream: UpstreamStatus;
  /** The actual lengths of the two windows (nominal 60 s and 300 s; shorter while the process is younger). */
  readonly windows: { readonly rate_s: number; readonly slo_s: number };
  readonly fast_burn_factor: number;
  /** What this sidecar is for, when it is not production traffic (the demo says it injects faults on purpose); null otherwise. */
  readonly notice: string | null;
  /** Spacing of the trend points. */
  readonly trend_every_s: number;
  readonly workloads: readonly WorkloadStatus[];
  /** null when no DCGM exporter is configured; [] while none of this pod's GPUs has been read. */
  readonly gpus: readonly GpuStatus[] | null;
  /** Capacity at SLO of this pod and pods needed (status-capacity.ts, docs/capacity-and-cost.md). */
  readonly capacity: CapacityStatus;
  /** Cost per request and per token, the pod's busy share and cached input, over the SLO window (status-cost.ts). */
  readonly cost: CostStatus;
}

export interface ReportInputs {
  readonly settings: Pick<Settings, 'workloads' | 'buckets' | 'dcgm'> & { readonly capacity?: CapacitySettings; readonly cost?: CostSettings | undefined };
  /** The most requests in flight at once since start (InFlightTracker.peak); without it, the in flight of the moment. */
  readonly peakInFlight?: number;
  readonly version: string;
  readonly generatedAt: Date;
  readonly startedAtMs: number;
  readonly refreshS: number;
  readonly now: TimedCounts;
  readonly rateBaseline: TimedCounts;
  readonly sloBaseline: TimedCounts;
  readonly upstream: UpstreamStatus;
  readonly notice: string | null;
  readonly trendEveryS: number;
  /** Per workload, the trend points recorded so far (oldest first). */
  readonly trend: ReadonlyMap<string, readonly TimedTrendPoint[]>;
}

/** The whole report, a pure function of two or three collections and the settings. */
export function statusReport(inputs: ReportInputs): StatusReport {
  const { now, rateBaseline, sloBaseline, settings } = inputs;
  const rateS = (now.atMs - rateBaseline.atMs) / 1000;
  const sloS = (now.atMs - sloBaseline.atMs) / 1000;
  const workloads = settings.workloads.map((workload) =>
    workloadStatus(workload, settings.buckets, {
      now: workloadCountsIn(now.counts, workload.name),
      rateBase: workloadCountsIn(rateBaseline.counts, workload.name),
      sloBase: workloadCountsIn(sloBaseline.counts, workload.name),
      rateS,
    }),
  ).map((status) => ({
    ...status,
    trend: (inputs.trend.get(status.name) ?? []).map(({ atMs, ...point }) => ({ ago_s: (now.atMs - atMs) / 1000, ...point })),
  }));
  return {
    schema_version: STATUS_SCHEMA_VERSION,
    version: inputs.version,
    generated_at: inputs.generatedAt.toISOString(),
    uptime_s: (now.atMs - inputs.startedAtMs) / 1000,
    refresh_s: inputs.refreshS,
    upstream: inputs.upstream,
    windows: { rate_s: rateS, slo_s: sloS },
    fast_burn_factor: FAST_BURN_FACTOR,
    notice: inputs.notice,
    trend_every_s: inputs.trendEveryS,
    workloads,
    gpus:
      settings.dcgm === undefined
        ? null
        : now.counts.gpus.map((gpu) => ({
            gpu: gpu.gpu,
            uuid: gpu.uuid,
            gpu_instance: gpu.gpuInstance ?? null,
            gpu_profile: gpu.gpuProfile ?? null,
            memory_used_bytes: gpu.memoryUsedBytes ?? null,
            memory_total_bytes: gpu.memoryTotalBytes ?? null,
            utilization_ratio: gpu.utilizationRatio ?? null,
          })),
    capacity: capacityStatus({ settings: { ...settings, capacity: settings.capacity ?? defaultCapacitySettings() }, counts: (name) => workloadCountsIn(now.counts, name), peakInFlight: inputs.peakInFlight ?? [...now.counts.workloads.values()].reduce((n, w) => n + w.inFlight, 0), trend: inputs.trend }),
    cost: costStatus({
      cost: settings.cost,
      workloads: settings.workloads,
      windowS: sloS,
      now: { pod: now.counts.pod, workload: (name) => workloadCountsIn(now.counts, name) },
      base: { pod: sloBaseline.counts.pod, workload: (name) => workloadCountsIn(sloBaseline.counts, name) },
    }),
  };
}

export interface WorkloadWindows {
  readonly now: WorkloadCounts;
  readonly rateBase: WorkloadCounts;
  readonly sloBase: WorkloadCounts;
  readonly rateS: number;
}

/** One workload's figures over the two windows (its trend aside). */
export function workloadStatus(workload: Workload, buckets: Readonly<Record<HistogramKey, readonly number[]>>, w: WorkloadWindows): Omit<WorkloadStatus, 'trend'> {
  const perS = (n: number): number => (w.rateS > 0 ? n / w.rateS : 0);
  const requestsTotal = {} as Record<Outcome, number>;
  const requestsPerS = {} as Record<Outcome, number>;
  for (const outcome of OUTCOMES) {
    const total = w.now.requests.get(outcome) ?? 0;
    requestsTotal[outcome] = total;
    requestsPerS[outcome] = perS(total - (w.rateBase.requests.get(outcome) ?? 0));
  }
  const slo = workload.slo;
  const slos: SloStatus[] = [];
  if (slo !== undefined) {
    for (const kind of SLO_KINDS) {
      const threshold = slo.thresholdsS[kind];
      if (threshold === undefined) continue;
      const life = w.now.slo[kind];
      const base = w.sloBase.slo[kind];
      const window = eventWindow(life.good - base.good, life.bad - base.bad, slo.objective);
      slos.push({ slo: kind, threshold_s: threshold, state: stateOf(window), lifetime: eventWindow(life.good, life.bad, slo.objective), window });
    }
  }
  const latency = {} as Record<StatusHistogram, LatencyStatus>;
  for (const key of Object.keys(BUCKETS_OF) as StatusHistogram[]) {
    latency[key] = latencyStatus(buckets[BUCKETS_OF[key]], w.now.histograms[key], w.sloBase.histograms[key], slo?.thresholdsS[key]);
  }
  const finished = (counts: WorkloadCounts, outcomes: readonly Outcome[]): number => outcomes.reduce((n, o) => n + (counts.generations.get(o) ?? 0), 0);
  const windowGenerations = finished(w.now, OUTCOMES) - finished(w.sloBase, OUTCOMES);
  const windowErrors = finished(w.now, ERROR_OUTCOMES) - finished(w.sloBase, ERROR_OUTCOMES);
  const windowGoodput = w.now.goodput - w.sloBase.goodput;
  const state = slo === undefined ? 'no_slo' : slos.reduce<SloState>((worst, s) => (STATE_SEVERITY[s.state] > STATE_SEVERITY[worst] ? s.state : worst), 'no_data');
  return {
    name: workload.name,
    objective: slo?.objective ?? null,
    state,
    in_flight: w.now.inFlight,
    requests_total: requestsTotal,
    requests_per_s: requestsPerS,
    tokens_per_s: { input: perS(w.now.inputTokens - w.rateBase.inputTokens), output: perS(w.now.outputTokens - w.rateBase.outputTokens) },
    goodput_per_s: slo === undefined ? null : perS(w.now.goodput - w.rateBase.goodput),
    goodput_ratio: slo === undefined || windowGenerations <= 0 ? null : windowGoodput / windowGenerations,
    error_ratio: windowGenerations <= 0 ? null : windowErrors / windowGenerations,
    slos,
    latency,
  };
}

export function eventWindow(good: number, bad: number, objective: number): EventWindow {
  const total = good + bad;
  if (total <= 0) return { good, bad, attainment: null, burn_rate: null, error_budget_remaining: null };
  const burn = bad / total / (1 - objective);
  return { good, bad, attainment: good / total, burn_rate: burn, error_budget_remaining: 1 - burn };
}

/** The highest burn rate of the workload's SLOs over the SLO window; null without events. */
export function worstBurnRate(slos: readonly SloStatus[]): number | null {
  let worst: number | null = null;
  for (const slo of slos) if (slo.window.burn_rate !== null && (worst === null || slo.window.burn_rate > worst)) worst = slo.window.burn_rate;
  return worst;
}

function stateOf(window: EventWindow): SloState {
  if (window.burn_rate === null) return 'no_data';
  if (window.burn_rate >= FAST_BURN_FACTOR) return 'fast_burn';
  return window.burn_rate > 1 ? 'burning' : 'ok';
}

function latencyStatus(boundaries: readonly number[], now: readonly number[], base: readonly number[], threshold: number | undefined): LatencyStatus {
  const counts = Array.from({ length: boundaries.length + 1 }, (_, i) => (now[i] ?? 0) - (base[i] ?? 0));
  const samples = counts.reduce((a, b) => a + b, 0);
  const point = { boundaries: [...boundaries], counts };
  const q = (p: number): number | null => (samples > 0 ? quantile(p, point) : null);
  return { boundaries_s: boundaries, counts, samples, p50_s: q(0.5), p99_s: q(0.99), threshold_s: threshold ?? null };
}
