import type { Clock } from '../clock/clock.js';
import { emptyWorkloadCounts, type StatusCounts } from './status-counts.js';

/** One collection's totals and when it was taken (Clock milliseconds). */
export interface TimedCounts {
  readonly atMs: number;
  readonly counts: StatusCounts;
}

export interface StatusHistoryOptions {
  /** Reads the totals now (one collection of the metrics /metrics serves). */
  readonly collect: () => Promise<StatusCounts>;
  readonly clock: Clock;
  /** The longest window a figure is computed over; older snapshots are dropped. */
  readonly retainMs: number;
  /** Least time between two kept snapshots, and the timer's period. */
  readonly everyMs: number;
}

/**
 * A small ring of totals, for the status page's windowed figures (last minute, last 5 minutes):
 * a window's figure is the difference between now and the snapshot taken about a window ago, as
 * Prometheus' increase() is over two samples.
 *
 * It costs nothing while nobody looks: snapshots are taken when /status.json is asked for, and by a
 * timer that starts with a request and stops itself once no request came for `retainMs` (so a
 * client polling less often than every `everyMs` still gets windows of the length asked). No timer
 * exists until the first request; the per-request and per-token paths never see this class.
 */
export class StatusHistory {
  private readonly options: StatusHistoryOptions;
  /** The process start: every counter was zero then, so it is the first baseline. */
  private readonly start: TimedCounts;
  private readonly ring: TimedCounts[] = [];
  private timer: NodeJS.Timeout | undefined;
  private lastAskedMs = Number.NEGATIVE_INFINITY;

  constructor(options: StatusHistoryOptions) {
    this.options = options;
    this.start = { atMs: options.clock.nowMs(), counts: { workloads: new Map(), gpus: [] } };
  }

  get startedAtMs(): number {
    return this.start.atMs;
  }

  /** Whether the snapshot timer is running (someone asked within the last `retainMs`). */
  get sampling(): boolean {
    return this.timer !== undefined;
  }

  /** The totals now; kept as a snapshot when the last one is at least `everyMs` old. Starts the timer. */
  async current(): Promise<TimedCounts> {
    this.lastAskedMs = this.options.clock.nowMs();
    if (this.timer === undefined) {
      this.timer = setInterval(() => this.tick(), this.options.everyMs);
      this.timer.unref();
    }
    return this.take();
  }

  /**
   * The baseline for a window of `windowMs` ending at `nowMs`: the newest snapshot at least that
   * old; while the process is younger than the window, its start (then the window is the uptime).
   * After a long unobserved gap the newest older snapshot may be much older: the report states
   * each window's actual length.
   */
  baseline(nowMs: number, windowMs: number): TimedCounts {
    let chosen = this.start;
    for (const snapshot of this.ring) {
      if (snapshot.atMs <= nowMs - windowMs) chosen = snapshot;
      else break;
    }
    return chosen;
  }

  stop(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
  }

  private async take(): Promise<TimedCounts> {
    const counts = await this.options.collect();
    const snapshot = { atMs: this.options.clock.nowMs(), counts };
    const last = this.ring[this.ring.length - 1];
    if (last === undefined || snapshot.atMs - last.atMs >= this.options.everyMs) {
      this.ring.push(snapshot);
      this.prune(snapshot.atMs);
    }
    return snapshot;
  }

  private tick(): void {
    if (this.options.clock.nowMs() - this.lastAskedMs > this.options.retainMs) {
      this.stop();
      return;
    }
    this.take().catch(() => {});
  }

  /** Keeps the newest snapshot at least `retainMs` old (the longest window's baseline) and all newer ones. */
  private prune(nowMs: number): void {
    let keepFrom = 0;
    for (let i = 0; i < this.ring.length; i++) if ((this.ring[i] as TimedCounts).atMs <= nowMs - this.options.retainMs) keepFrom = i;
    if (keepFrom > 0) this.ring.splice(0, keepFrom);
  }
}

/** A workload's totals in `counts`, zero when it has none yet. */
export function workloadCountsIn(counts: StatusCounts, name: string) {
  return counts.workloads.get(name) ?? emptyWorkloadCounts();
}
