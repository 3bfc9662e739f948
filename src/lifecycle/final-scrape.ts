/**
 * The wait for a last scrape after the drain (`final_scrape_wait`). Prometheus pulls: a request
 * recorded after the last scrape before the admin listener closes never reaches it, and the
 * requests a drain finishes are exactly those (every rolling update would lose its longest
 * streams). So the shutdown marks the moment every request has been recorded and keeps /metrics
 * answering until one exposition computed after that mark has been sent, or the wait is over.
 */
export class FinalScrape {
  private markedAtMs = Infinity;
  private waiters: Array<() => void> = [];

  /** An exposition whose computation began at `computedFromMs` (performance.now()) has been sent in full. */
  served(computedFromMs: number): void {
    if (computedFromMs >= this.markedAtMs) for (const wake of this.waiters.splice(0)) wake();
  }

  /**
   * Every request is recorded from now on: resolves true once an exposition computed after this
   * call has been sent, false after `maxMs` without one.
   */
  async waitFromNow(maxMs: number): Promise<boolean> {
    this.markedAtMs = performance.now();
    let timer: NodeJS.Timeout | undefined;
    const scraped = new Promise<true>((resolve) => this.waiters.push(() => resolve(true)));
    const timedOut = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), maxMs)));
    try {
      return await Promise.race([scraped, timedOut]);
    } finally {
      clearTimeout(timer);
      this.waiters = [];
    }
  }
}
