/**
 * The pod's time shared among its requests by processor sharing (DESIGN.md section 12,
 * docs/capacity-and-cost.md): between two events (a request starts or ends) the pod serves the `n`
 * requests then in flight equally, so each accrues dt / n; with no request in flight the time is
 * idle. Over any stretch the shares of all requests add up to the busy time.
 *
 * Kept as a running integral, a virtual clock `share` that advances by dt / n: a request's share
 * between two of its moments is the difference of the two readings. So a request reads it three
 * times (start, first token, end) whatever its length, and nothing is done per token. All times come
 * from the caller, which already read its clock for them (the timeline's start, first token and
 * end), so this adds no clock read.
 *
 * This is an attribution model, not a measurement of the GPU: it says how the pod's time is divided
 * among the requests it served, not what each one cost the hardware (batching serves n requests in
 * less than n times the time of one).
 */
export class ProcessorSharing {
  private inFlight = 0;
  /** When the last event advanced the integral; times before it are not moved backwards. */
  private lastMs: number;
  /** Sum of dt / n over the busy intervals so far, in milliseconds: the virtual clock. */
  private shareMs = 0;
  private busyMs = 0;
  private idleMs = 0;

  constructor(startMs: number) {
    this.lastMs = startMs;
  }

  /** A request started at `nowMs`: the virtual clock then, to subtract from later readings. */
  started(nowMs: number): number {
    this.advance(nowMs);
    this.inFlight++;
    return this.shareMs;
  }

  /** The virtual clock at `nowMs` (a request's first token), with the count in flight unchanged. */
  read(nowMs: number): number {
    this.advance(nowMs);
    return this.shareMs;
  }

  /** A request started with started() ended at `nowMs` (once: the request monitor finishes once): the virtual clock then. */
  finished(nowMs: number): number {
    this.advance(nowMs);
    this.inFlight--;
    return this.shareMs;
  }

  /** Milliseconds with at least one request in flight, up to `nowMs`; a time before the last event reads as that event's, so the counter never goes down. */
  busyUntil(nowMs: number): number {
    return this.inFlight > 0 && nowMs > this.lastMs ? this.busyMs + (nowMs - this.lastMs) : this.busyMs;
  }

  /** Milliseconds with no request in flight, up to `nowMs`. */
  idleUntil(nowMs: number): number {
    return this.inFlight === 0 && nowMs > this.lastMs ? this.idleMs + (nowMs - this.lastMs) : this.idleMs;
  }

  /**
   * A time earlier than the last event (a first token stamped at its upstream read, with a request
   * started since in the same turn) does not move the clock back: it is read as the last event's.
   */
  private advance(nowMs: number): void {
    const dt = nowMs - this.lastMs;
    if (!(dt > 0)) return;
    if (this.inFlight > 0) {
      this.busyMs += dt;
      this.shareMs += dt / this.inFlight;
    } else {
      this.idleMs += dt;
    }
    this.lastMs = nowMs;
  }
}
