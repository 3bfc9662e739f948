import { describe, expect, it } from 'vitest';
import { HistogramSeries } from '../../../src/metrics/direct-metrics.js';
import { SeededRandom } from '../../helpers/seeded-random.js';

/** A deterministic source (mulberry32, test/helpers/seeded-random.ts), so a failing case can be found again by its seed. */
function random(seed: number): () => number {
  const source = new SeededRandom(seed);
  return () => source.next();
}

/** The SDK's rule, written plainly: the first bucket whose bound is >= the value, else the overflow bucket. */
function reference(boundaries: readonly number[], value: number): number {
  for (let i = 0; i < boundaries.length; i++) if (!((boundaries[i] as number) < value)) return i;
  return boundaries.length;
}

describe('review 27: the last-bucket hint finds the bucket the search finds', () => {
  it('counts every sample, in any order, in the bucket of the plain rule (bounds, neighbours, ±0, ±Infinity)', () => {
    const next = random(27);
    for (let trial = 0; trial < 300; trial++) {
      const n = Math.floor(next() * 6);
      const bounds = new Set<number>();
      while (bounds.size < n) bounds.add(Math.round((next() - 0.3) * 20) / 4 + 0);
      const boundaries = [...bounds].sort((a, b) => a - b);
      const zero = boundaries.indexOf(0);
      if (zero !== -1 && next() < 0.5) boundaries[zero] = -0;
      const pool = [Number.NEGATIVE_INFINITY, Number.POSITIVE_INFINITY, -0, 0, -Number.MIN_VALUE, Number.MIN_VALUE, ...boundaries.flatMap((b) => [b, b - 1e-9, b + 1e-9, b === 0 ? -0 : b])];
      const series = new HistogramSeries(boundaries, {});
      const expected = new Array(boundaries.length + 1).fill(0);
      for (let i = 0; i < 200; i++) {
        const value = next() < 0.7 ? (pool[Math.floor(next() * pool.length)] as number) : (next() - 0.3) * 12;
        const times = next() < 0.5 ? 1 : 1 + Math.floor(next() * 3);
        if (times === 1) series.record(value);
        else series.recordTimes(value, times);
        expected[reference(boundaries, value)] += times;
      }
      expect(series.dataPoint([0, 0]).value.buckets.counts, JSON.stringify(boundaries)).toEqual(expected);
    }
  });
});
