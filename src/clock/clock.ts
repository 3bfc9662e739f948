/**
 * Time is a dependency: everything that measures takes a Clock, so tests can drive a fake one and
 * assert exact values (STYLE.md habit 5).
 *
 * Milliseconds as a float from `performance.now()`: monotonic (immune to wall-clock steps),
 * sub-microsecond resolution, and a plain double, so reading it on the hot path allocates nothing
 * (unlike `process.hrtime.bigint()`, which allocates a BigInt per call).
 */
export interface Clock {
  /** Monotonic time in milliseconds; only differences are meaningful. */
  nowMs(): number;
}

export const systemClock: Clock = {
  nowMs: () => performance.now(),
};

/** A clock that only moves when told to; for tests. */
export class ManualClock implements Clock {
  private timeMs: number;

  constructor(startMs = 0) {
    this.timeMs = startMs;
  }

  nowMs(): number {
    return this.timeMs;
  }

  advance(ms: number): void {
    this.timeMs += ms;
  }
}
