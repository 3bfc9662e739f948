/**
 * The benchmark side of `tokentap profile compare`: what a GuideLLM or AIPerf result says about the
 * traffic it sent and the latencies it saw, in the units tokentap uses (seconds, tokens), whatever
 * the tool. A figure the result does not carry is undefined, never guessed.
 */

/** Summary of a sample of token counts; figures are undefined when the result does not give them. */
export interface LengthSummary {
  readonly mean?: number | undefined;
  readonly stdev?: number | undefined;
  readonly p50?: number | undefined;
  readonly p99?: number | undefined;
}

export interface LatencyPair {
  readonly p50?: number | undefined;
  readonly p99?: number | undefined;
}

export interface BenchmarkShape {
  readonly tool: 'GuideLLM' | 'AIPerf';
  /** Which part of the file this is, for the reader: "benchmark 0 of 1 (synchronous)". */
  readonly label: string;
  /** Requests the figures below are computed over. */
  readonly requests: number;
  /** Seconds. */
  readonly ttft: LatencyPair;
  /** Seconds per output token after the first, per request (what both tools call ITL; tokentap's TPOT). */
  readonly itl: LatencyPair;
  readonly inputTokens: LengthSummary;
  readonly outputTokens: LengthSummary;
  readonly ratePerSecond?: number | undefined;
  /** From per-request start times; undefined when the result has fewer than 3 of them, or not all of them. */
  readonly interArrivalCv?: number | undefined;
  /** Why `interArrivalCv` is undefined, where the result says more than that it has too few start times. */
  readonly interArrivalNote?: string | undefined;
  /** Share of requests with any cached input tokens, when the result reports cached tokens per request. */
  readonly cachedInputShare?: number | undefined;
}

export function mean(values: readonly number[]): number | undefined {
  if (values.length === 0) return undefined;
  let sum = 0;
  for (const v of values) sum += v;
  return sum / values.length;
}

/** Population standard deviation (what GuideLLM's `std_dev` and AIPerf's `std` report: numpy's default, ddof 0). */
export function stdev(values: readonly number[]): number | undefined {
  const m = mean(values);
  if (m === undefined) return undefined;
  let squares = 0;
  for (const v of values) squares += (v - m) ** 2;
  return Math.sqrt(squares / values.length);
}

/** The q-quantile with linear interpolation between closest ranks (numpy.percentile's default, which AIPerf uses). */
export function percentile(values: readonly number[], q: number): number | undefined {
  if (values.length === 0) return undefined;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = q * (sorted.length - 1);
  const low = Math.floor(rank);
  const high = Math.ceil(rank);
  return (sorted[low] as number) + ((sorted[high] as number) - (sorted[low] as number)) * (rank - low);
}

export function lengthSummary(values: readonly number[]): LengthSummary {
  return { mean: mean(values), stdev: stdev(values), p50: percentile(values, 0.5), p99: percentile(values, 0.99) };
}

export function latencyPair(values: readonly number[]): LatencyPair {
  return { p50: percentile(values, 0.5), p99: percentile(values, 0.99) };
}

/**
 * Coefficient of variation of the gaps between consecutive request starts (stdev / mean): 1 for a
 * Poisson process, 0 for evenly spaced requests, above 1 for bursts. Undefined with fewer than 3
 * starts (fewer than 2 gaps) or when every request started at once. The sample stdev (n - 1), as
 * the production profile takes it (profile-builder.ts), so both sides of a comparison are measured
 * alike: with few starts the two estimators differ by a factor sqrt(n / (n - 1)).
 */
export function interArrivalCv(startsSeconds: readonly number[]): number | undefined {
  if (startsSeconds.length < 3) return undefined;
  const sorted = [...startsSeconds].sort((a, b) => a - b);
  const gaps: number[] = [];
  for (let i = 1; i < sorted.length; i++) gaps.push((sorted[i] as number) - (sorted[i - 1] as number));
  const m = mean(gaps) as number;
  if (m <= 0) return undefined;
  let squares = 0;
  for (const gap of gaps) squares += (gap - m) ** 2;
  return Math.sqrt(squares / (gaps.length - 1)) / m;
}

/** Requests per second over the span of the starts; undefined with fewer than 2. */
export function rateOfStarts(startsSeconds: readonly number[]): number | undefined {
  if (startsSeconds.length < 2) return undefined;
  const span = Math.max(...startsSeconds) - Math.min(...startsSeconds);
  return span > 0 ? (startsSeconds.length - 1) / span : undefined;
}
