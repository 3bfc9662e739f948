import type { Clock } from '../clock/clock.js';
import type { Settings } from '../config/load.js';
import type { StatusCounts, WorkloadCounts } from './status-counts.js';
import { workloadCountsIn, type TimedCounts } from './status-history.js';
import { workloadStatus, worstBurnRate, type TimedTrendPoint } from './status-report.js';

/** Finished generation requests, every outcome: what capacity's requests per second count. */
function generations(counts: WorkloadCounts): number {
  let n = 0;
  for (const value of counts.generations.values()) n += value;
  return n;
}

export interface StatusTrendOptions {
  /** Reads the totals now (one collection of the metrics /metrics serves). */
  readonly collect: () => Promise<StatusCounts>;
  readonly clock: Clock;
  readonly settings: Pick<Settings, 'workloads' | 'buckets'>;
  /** Spacing of the points. */
  readonly everyMs: number;
  /** How far back points are kept. */
  readonly keepMs: number;
  /** The window each point's figures are computed over (the page's SLO window). */
  readonly windowMs: number;
}

/**
 * The status page's trend: every `everyMs` (a minute), each workload's p99 TTFT, worst burn rate and
 * error ratio over the last `windowMs` (5 minutes, the same figures the page shows now), kept for
 * `keepMs` (an hour). Unlike the windows of StatusHistory it runs from start, whether or not anyone
 * looks, so the page opened during an incident shows the hour before it: one collection a minute
 * (what one Prometheus scrape costs, without the text). Memory is bounded: `keepMs / everyMs` points
 * of four numbers per configured workload, and the few totals a window needs (about
 * `windowMs / everyMs` + 1 collections).
 */
export class StatusTrend {
  private readonly options: StatusTrendOptions;
  private readonly start: TimedCounts;
  /** Collections newer than the oldest one a window still needs, oldest first. */
  private readonly snapshots: TimedCounts[] = [];
  private readonly series = new Map<string, TimedTrendPoint[]>();
  private timer: NodeJS.Timeout | undefined;

  constructor(options: StatusTrendOptions) {
    this.options = options;
    this.start = { atMs: options.clock.nowMs(), counts: { workloads: new Map(), gpus: [] } };
  }

  /** Starts the minute timer (unref'd: it never keeps the process alive). */
  begin(): void {
    if (this.timer !== undefined) return;
    this.timer = setInterval(() => {
      this.record().catch(() => {});
    }, this.options.everyMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Per workload, its points, oldest first. */
  get points(): ReadonlyMap<string, readonly TimedTrendPoint[]> {
    return this.series;
  }

  /** How many collections are held for the window's baselines (for the test of the memory bound). */
  get collectionsHeld(): number {
    return this.snapshots.length;
  }

  /** Takes one point now (the timer's work; tests call it with a manual clock). */
  async record(): Promise<void> {
    const counts = await this.options.collect();
    const now = { atMs: this.options.clock.nowMs(), counts };
    const base = this.baseline(now.atMs);
    for (const workload of this.options.settings.workloads) {
      const baseCounts = workloadCountsIn(base.counts, workload.name);
      const status = workloadStatus(workload, this.options.settings.buckets, {
        now: workloadCountsIn(counts, workload.name),
        rateBase: baseCounts,
        sloBase: baseCounts,
        rateS: (now.atMs - base.atMs) / 1000,
      });
      let points = this.series.get(workload.name);
      if (points === undefined) {
        points = [];
        this.series.set(workload.name, points);
      }
      const rateS = (now.atMs - base.atMs) / 1000;
      points.push({
        atMs: now.atMs,
        ttft_p99_s: status.latency.ttft.p99_s,
        worst_burn_rate: worstBurnRate(status.slos),
        error_ratio: status.error_ratio,
        generations_per_s: rateS > 0 ? (generations(workloadCountsIn(counts, workload.name)) - generations(baseCounts)) / rateS : null,
      });
      while (points.length > 0 && (points[0] as TimedTrendPoint).atMs < now.atMs - this.options.keepMs) points.shift();
    }
    this.snapshots.push(now);
    // Keep the newest collection at least a window old (a baseline from now on) and all newer ones.
    while (this.snapshots.length > 1 && (this.snapshots[1] as TimedCounts).atMs <= now.atMs - this.options.windowMs) this.snapshots.shift();
  }

  /** The newest collection at least a window before `nowMs`; the start while the process is younger. */
  private baseline(nowMs: number): TimedCounts {
    let chosen = this.start;
    for (const snapshot of this.snapshots) {
      if (snapshot.atMs <= nowMs - this.options.windowMs) chosen = snapshot;
      else break;
    }
    return chosen;
  }
}
