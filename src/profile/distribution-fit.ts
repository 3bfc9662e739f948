import { regularizedLowerGamma, standardNormalCdf } from './special-functions.js';
import type { Distribution, DistributionFit } from './workload-profile.js';

/** Fewer samples than this and no fit is tried: a KS distance over a handful of points ranks nothing. */
export const MIN_FIT_SAMPLES = 10;

/**
 * Summarises a sample of token counts: moments, extremes, percentiles, and the best of four
 * standard fits by Kolmogorov-Smirnov distance. `values` is sorted in place (it is the caller's
 * scratch array, built for this call).
 */
export function summarize(values: number[]): Distribution {
  const count = values.length;
  if (count === 0) return { count };
  values.sort((a, b) => a - b);
  let sum = 0;
  for (const v of values) sum += v;
  const mean = sum / count;
  let squares = 0;
  for (const v of values) squares += (v - mean) * (v - mean);
  // The sample standard deviation (n − 1), as GuideLLM and AIPerf take their `stdev`/`stddev`.
  const stdev = count > 1 ? Math.sqrt(squares / (count - 1)) : 0;
  // Every value equal (a benchmark's fixed lengths, the demo's one prompt): no continuous family
  // describes it, and the exponential would be "best" at a KS distance of 0.63; the summary says it all.
  const fit = count >= MIN_FIT_SAMPLES && stdev > 0 ? bestFit(values, mean, stdev) : undefined;
  return {
    count,
    mean,
    stdev,
    min: values[0] as number,
    max: values[count - 1] as number,
    p50: percentile(values, 0.5),
    p90: percentile(values, 0.9),
    p99: percentile(values, 0.99),
    ...(fit === undefined ? {} : { fit }),
  };
}

/** Linear interpolation between closest ranks (numpy's default, "type 7"); `sorted` ascending, not empty. */
export function percentile(sorted: readonly number[], q: number): number {
  const position = (sorted.length - 1) * q;
  const below = Math.floor(position);
  const above = Math.min(sorted.length - 1, below + 1);
  const low = sorted[below] as number;
  return low + (position - below) * ((sorted[above] as number) - low);
}

interface Candidate {
  readonly family: DistributionFit['family'];
  readonly params: Readonly<Record<string, number>>;
  readonly cdf: (x: number) => number;
}

/** The candidate with the smallest KS distance; `sorted` ascending with at least MIN_FIT_SAMPLES values. */
function bestFit(sorted: readonly number[], mean: number, stdev: number): DistributionFit | undefined {
  const candidates: Candidate[] = [];
  if (stdev > 0) candidates.push({ family: 'normal', params: { mean, stdev }, cdf: (x) => standardNormalCdf((x - mean) / stdev) });
  if (mean > 0 && (sorted[0] as number) >= 0) candidates.push({ family: 'exponential', params: { rate: 1 / mean }, cdf: (x) => (x <= 0 ? 0 : 1 - Math.exp(-x / mean)) });
  if ((sorted[0] as number) > 0 && stdev > 0) {
    candidates.push(lognormal(sorted));
    const gamma = gammaFit(sorted, mean);
    if (gamma !== undefined) candidates.push(gamma);
  }
  let best: DistributionFit | undefined;
  for (const candidate of candidates) {
    const ks = ksDistance(sorted, candidate.cdf);
    if (Number.isFinite(ks) && (best === undefined || ks < best.ks)) best = { family: candidate.family, params: candidate.params, ks };
  }
  return best;
}

/** Maximum likelihood: the mean and (population) standard deviation of the logs. */
function lognormal(sorted: readonly number[]): Candidate {
  let sum = 0;
  for (const v of sorted) sum += Math.log(v);
  const mu = sum / sorted.length;
  let squares = 0;
  for (const v of sorted) squares += (Math.log(v) - mu) ** 2;
  const sigma = Math.sqrt(squares / sorted.length);
  return { family: 'lognormal', params: { mu, sigma }, cdf: (x) => (x <= 0 ? 0 : standardNormalCdf((Math.log(x) - mu) / sigma)) };
}

/**
 * Maximum likelihood shape by Minka's closed-form approximation (T. Minka, "Estimating a Gamma
 * distribution", 2002: within 1.5 % of the exact MLE for every shape), scale = mean / shape.
 */
function gammaFit(sorted: readonly number[], mean: number): Candidate | undefined {
  let logSum = 0;
  for (const v of sorted) logSum += Math.log(v);
  const s = Math.log(mean) - logSum / sorted.length;
  if (!(s > 0)) return undefined;
  const shape = (3 - s + Math.sqrt((s - 3) ** 2 + 24 * s)) / (12 * s);
  const scale = mean / shape;
  return { family: 'gamma', params: { shape, scale }, cdf: (x) => regularizedLowerGamma(shape, x / scale) };
}

/** sup |F_n − F| over the sample: at each point, against the empirical CDF just before and at it. */
function ksDistance(sorted: readonly number[], cdf: (x: number) => number): number {
  const n = sorted.length;
  let worst = 0;
  for (let i = 0; i < n; i++) {
    const f = cdf(sorted[i] as number);
    worst = Math.max(worst, Math.abs(f - i / n), Math.abs((i + 1) / n - f));
  }
  return worst;
}
