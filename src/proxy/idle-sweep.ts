/** An exchange whose upstream may go silent. */
export interface IdleWatched {
  /** Bumped on every upstream read: the sweep compares it, so a read costs no clock and no timer. */
  upstreamActivity: number;
  /**
   * Bumped per request-body piece from the client: an upload still arriving keeps the request from
   * being cut as the upstream's silence (the upstream is waiting for it).
   */
  requestActivity?: number;
  /** True while the upstream's silence is the client's doing (a request body still to come): not timed. */
  readonly waitingForClient?: boolean;
  /** Called once, when nothing was read for the timeout. */
  upstreamTimeout(): void;
}

interface WatchState {
  activity: number;
  lastActiveMs: number;
}

/**
 * The upstream idle timeout (`upstream_idle_timeout`) for every exchange of a listener, checked by
 * one sweep instead of a socket timer per connection: a socket timer is re-armed on every read (a
 * timer-list move and a clock call into libuv), about 2 % of the proxy's CPU in the profile. The
 * sweep runs every quarter of the timeout (10 ms to 1 s) while exchanges are open, so a silent
 * upstream is cut between the timeout and the timeout plus one interval after its last byte.
 *
 * Time the event loop did not run (a long GC pause, a CPU-throttled container) is nobody's silence:
 * after such a stall the timers run before the reads that arrived meanwhile, so the sweep would find
 * every exchange "silent" and cut live streams as the upstream's timeout (seen in the test suite on
 * an overloaded machine: a 2 s stall, a 504 to an upload that was flowing). A sweep that runs more
 * than one interval late leaves the lateness out of every exchange's silence.
 */
export class IdleSweep {
  private readonly timeoutMs: number;
  private readonly intervalMs: number;
  private readonly watched = new Map<IdleWatched, WatchState>();
  private timer: NodeJS.Timeout | undefined;
  private lastSweepMs = 0;

  constructor(timeoutMs: number) {
    this.timeoutMs = timeoutMs;
    this.intervalMs = Math.min(1_000, Math.max(10, Math.floor(timeoutMs / 4)));
  }

  watch(exchange: IdleWatched): void {
    this.watched.set(exchange, { activity: activityOf(exchange), lastActiveMs: performance.now() });
    if (this.timer !== undefined) return;
    this.lastSweepMs = performance.now();
    this.timer = setInterval(() => this.sweep(), this.intervalMs).unref();
  }

  unwatch(exchange: IdleWatched): void {
    if (!this.watched.delete(exchange) || this.watched.size > 0 || this.timer === undefined) return;
    clearInterval(this.timer);
    this.timer = undefined;
  }

  private sweep(): void {
    const now = performance.now();
    const lateMs = now - this.lastSweepMs - this.intervalMs;
    this.lastSweepMs = now;
    const stalledMs = lateMs > this.intervalMs ? lateMs : 0;
    for (const [exchange, state] of this.watched) {
      state.lastActiveMs += stalledMs;
      const activity = activityOf(exchange);
      if (activity !== state.activity || exchange.waitingForClient === true) {
        state.activity = activity;
        state.lastActiveMs = now;
      } else if (now - state.lastActiveMs >= this.timeoutMs) {
        this.unwatch(exchange);
        exchange.upstreamTimeout();
      }
    }
  }
}

function activityOf(exchange: IdleWatched): number {
  return exchange.upstreamActivity + (exchange.requestActivity ?? 0);
}
