/**
 * Where the sidecar is in its shutdown, shared by the parts that must behave differently while it
 * drains: /readyz (fails from the first signal), the request monitors (count requests cut at the
 * drain deadline as `shutdown`, not as client cancellations or upstream errors) and the drain
 * itself, which waits for every monitor to have recorded its request before metrics are flushed.
 * A socket closing does not mean its request has been recorded yet: the monitor finishes on its
 * own events, which can come later.
 */
export class DrainState {
  /** Set at the first shutdown signal: readiness fails, the proxy listener is closed. */
  private drainingSince: string | undefined;
  /** Set at the drain deadline, just before the remaining connections are cut. */
  private cuttingRemaining = false;
  /** Requests whose monitor has not finished yet. */
  private inFlight = 0;
  private idleWaiters: Array<() => void> = [];

  /** Why readiness fails, for the /readyz body; undefined while serving. */
  get reason(): string | undefined {
    return this.drainingSince === undefined ? undefined : `shutting down (${this.drainingSince}): draining in-flight requests`;
  }

  get cutting(): boolean {
    return this.cuttingRemaining;
  }

  beginDrain(trigger: string): void {
    this.drainingSince ??= trigger;
  }

  beginCut(): void {
    this.cuttingRemaining = true;
  }

  requestStarted(): void {
    this.inFlight += 1;
  }

  requestFinished(): void {
    this.inFlight -= 1;
    if (this.inFlight === 0) for (const wake of this.idleWaiters.splice(0)) wake();
  }

  /** Resolves once no request is in flight (at once when none is). */
  whenIdle(): Promise<void> {
    return this.inFlight === 0 ? Promise.resolve() : new Promise((resolve) => this.idleWaiters.push(resolve));
  }
}
