import { describe, expect, it } from 'vitest';
import { loadSettings } from '../../../src/config/load.js';
import { METRICS } from '../../../src/metrics/definitions.js';

/**
 * The default TTFT and ITL buckets resolve the common ranges: for servers at 40 ms / 5 ms,
 * 150 ms / 20 ms and 1 s / 50 ms (TTFT / ITL), with a tight and a wide spread, the p50 and p99
 * that Prometheus's histogram_quantile computes from the buckets are within 10 % of the exact
 * quantiles of the samples.
 */

/** xorshift32: the same samples on every run, so a failure reproduces from its seed. */
function random(seed: number): () => number {
  let state = seed >>> 0 || 1;
  return () => {
    state ^= state << 13;
    state >>>= 0;
    state ^= state >>> 17;
    state ^= state << 5;
    state >>>= 0;
    return state / 0x100000000;
  };
}

/** Box-Muller. */
function gaussian(next: () => number): number {
  let u = 0;
  while (u === 0) u = next();
  return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * next());
}

/**
 * Log-normal around `medianS` with shape `sigma`; for ITL also a tail: 3 % of gaps 1.5-3 times
 * longer (a prefill of another request scheduled into the batch stalls every stream's next token).
 */
function samples(kind: 'ttft' | 'itl', medianS: number, sigma: number, seed: number, n = 20_000): number[] {
  const next = random(seed);
  const values: number[] = [];
  for (let i = 0; i < n; i++) {
    let value = medianS * Math.exp(sigma * gaussian(next));
    if (kind === 'itl' && next() < 0.03) value *= 1.5 + 1.5 * next();
    values.push(value);
  }
  return values.sort((a, b) => a - b);
}

/** The exact quantile of sorted samples (linear between the closest ranks). */
function exactQuantile(sorted: readonly number[], q: number): number {
  const rank = q * (sorted.length - 1);
  const lower = Math.floor(rank);
  const upper = Math.ceil(rank);
  return (sorted[lower] as number) + ((sorted[upper] as number) - (sorted[lower] as number)) * (rank - lower);
}

/**
 * What histogram_quantile(q, ...) returns for these samples in these buckets: the bucket holding
 * rank q * count, linearly interpolated between its bounds (the first bucket's lower bound is 0);
 * the highest finite bound when the rank is in +Inf (promql/quantile.go, bucketQuantile).
 */
function histogramQuantile(q: number, bounds: readonly number[], sorted: readonly number[]): number {
  const cumulative = bounds.map(() => 0);
  let b = 0;
  for (const value of sorted) {
    while (b < bounds.length && value > (bounds[b] as number)) b++;
    if (b < bounds.length) cumulative[b]!++;
  }
  for (let i = 1; i < cumulative.length; i++) cumulative[i]! += cumulative[i - 1] as number;
  const rank = q * sorted.length;
  const bucket = cumulative.findIndex((count) => count >= rank);
  if (bucket === -1) return bounds.at(-1) as number;
  const lower = bucket === 0 ? 0 : (bounds[bucket - 1] as number);
  const below = bucket === 0 ? 0 : (cumulative[bucket - 1] as number);
  return lower + ((bounds[bucket] as number) - lower) * ((rank - below) / ((cumulative[bucket] as number) - below));
}

const SERVERS = [
  { name: '40 ms / 5 ms', ttftS: 0.04, itlS: 0.005 },
  { name: '150 ms / 20 ms', ttftS: 0.15, itlS: 0.02 },
  { name: '1 s / 50 ms', ttftS: 1, itlS: 0.05 },
];
/** Log-normal sigma: tight (a steady server) and wide (a loaded one: TTFT p99 about 2.3 x p50). */
const SPREADS = { ttft: [0.1, 0.35], itl: [0.05, 0.2] } as const;

function worstError(kind: 'ttft' | 'itl', bounds: readonly number[]): { error: number; where: string } {
  let worst = { error: 0, where: '' };
  for (const server of SERVERS) {
    for (const sigma of SPREADS[kind]) {
      for (const seed of [1, 2, 3]) {
        const sorted = samples(kind, kind === 'ttft' ? server.ttftS : server.itlS, sigma, seed * 7919 + sigma * 1000);
        for (const q of [0.5, 0.99]) {
          const exact = exactQuantile(sorted, q);
          const error = Math.abs(histogramQuantile(q, bounds, sorted) - exact) / exact;
          if (error > worst.error) worst = { error, where: `${server.name}, sigma ${sigma}, seed ${seed}, p${q * 100}` };
        }
      }
    }
  }
  return worst;
}

describe('default latency buckets', () => {
  it('TTFT: histogram_quantile p50 and p99 within 10 % of the exact quantiles at 40 ms, 150 ms and 1 s', () => {
    const worst = worstError('ttft', METRICS.ttft.defaultBuckets);
    expect(worst.error, worst.where).toBeLessThan(0.1);
  });

  it('ITL: histogram_quantile p50 and p99 within 10 % of the exact quantiles at 5 ms, 20 ms and 50 ms', () => {
    const worst = worstError('itl', METRICS.itlToken.defaultBuckets);
    expect(worst.error, worst.where).toBeLessThan(0.1);
    expect(METRICS.itlChunk.defaultBuckets).toEqual(METRICS.itlToken.defaultBuckets);
  });

  it('the check can fail: the previous defaults (the OTel advice lists) miss by more than 10 %', () => {
    const previousTtft = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.2, 0.25, 0.3, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80];
    const previousItl = [0.001, 0.0025, 0.005, 0.0075, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80];
    expect(worstError('ttft', previousTtft).error).toBeGreaterThan(0.1);
    expect(worstError('itl', previousItl).error).toBeGreaterThan(0.1);
  });

  it('still inserts every configured SLO threshold as a boundary', () => {
    const yaml = 'workloads:\n  - name: chat\n    slo:\n      objective: 0.99\n      ttft: 175ms\n      itl: 33ms\n';
    const settings = loadSettings({ flags: { config: 'c.yaml' }, env: {}, readFile: () => yaml });
    expect(settings.buckets.ttft).toContain(0.175);
    expect(settings.buckets.itlToken).toContain(0.033);
    expect(settings.buckets.itlChunk).toContain(0.033);
  });

  it('costs, per workload and model, the bucket series stated in docs/measurement.md', () => {
    // Each histogram series set: one `_bucket` per boundary plus +Inf, `_sum` and `_count`.
    const series = (key: 'ttft' | 'ttfb' | 'itlToken' | 'itlChunk') => METRICS[key].defaultBuckets.length + 3;
    expect({ ttft: series('ttft'), ttfb: series('ttfb'), itlToken: series('itlToken'), itlChunk: series('itlChunk') }).toEqual({ ttft: 38, ttfb: 38, itlToken: 34, itlChunk: 34 });
  });
});
