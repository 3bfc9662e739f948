/** Order statistics for the bench: exact quantiles over raw samples, and quantiles read from a Prometheus histogram. */

/** The q-quantile (0..1) of `values` by linear interpolation between order statistics; NaN when empty. Sorts in place. */
export function quantile(values: Float64Array | number[], q: number): number {
  const n = values.length;
  if (n === 0) return Number.NaN;
  const sorted = values instanceof Float64Array ? values : Float64Array.from(values);
  if (!isSorted(sorted)) sorted.sort();
  const pos = (n - 1) * q;
  const lo = Math.floor(pos);
  const hi = Math.min(lo + 1, n - 1);
  return (sorted[lo] as number) + ((sorted[hi] as number) - (sorted[lo] as number)) * (pos - lo);
}

function isSorted(values: Float64Array): boolean {
  for (let i = 1; i < values.length; i++) if ((values[i - 1] as number) > (values[i] as number)) return false;
  return true;
}

/** A growable list of doubles without per-sample allocation (millions of per-chunk delays per run). */
export class Samples {
  private data: Float64Array;
  private size = 0;

  constructor(capacity = 1024) {
    this.data = new Float64Array(capacity);
  }

  push(value: number): void {
    if (this.size === this.data.length) {
      const bigger = new Float64Array(this.data.length * 2);
      bigger.set(this.data);
      this.data = bigger;
    }
    this.data[this.size++] = value;
  }

  get length(): number {
    return this.size;
  }

  /** A sorted copy of the samples. */
  sorted(): Float64Array {
    return this.data.slice(0, this.size).sort();
  }
}

/** Cumulative bucket counts keyed by upper bound (+Inf as Infinity), as a Prometheus histogram exposes them. */
export type CumulativeBuckets = ReadonlyArray<readonly [le: number, count: number]>;

/**
 * The q-quantile of a classic histogram the way PromQL's histogram_quantile() computes it: linear
 * interpolation inside the bucket that holds the rank, the lowest bucket starting at 0.
 */
export function histogramQuantile(buckets: CumulativeBuckets, q: number): number {
  const total = buckets.at(-1)?.[1] ?? 0;
  if (total === 0) return Number.NaN;
  const rank = q * total;
  let prevLe = 0;
  let prevCount = 0;
  for (const [le, count] of buckets) {
    if (count >= rank) {
      if (le === Infinity) return prevLe;
      if (count === prevCount) return le;
      return prevLe + ((le - prevLe) * (rank - prevCount)) / (count - prevCount);
    }
    prevLe = le;
    prevCount = count;
  }
  return prevLe;
}
