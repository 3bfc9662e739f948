import type { BenchmarkShape, LatencyPair, LengthSummary } from './benchmark-shape.js';
import type { Distribution, WorkloadProfile } from './workload-profile.js';

/**
 * How far a benchmark's traffic may be from production's before `tokentap profile compare` says
 * the benchmark did not test production's traffic (docs/workload-profiles.md, "Comparing a
 * benchmark with production"). Latencies are never flagged: they are what the benchmark measures,
 * not what it sent. The request rate is shown, not flagged: a benchmark sweeps rates on purpose.
 */
export const TOLERANCES = {
  /** Mean input or output length: benchmark / production - 1 within +-20 %. */
  lengthMean: 0.2,
  /** p99 length (the tail that fills KV cache and batches): within +-50 %. */
  lengthP99: 0.5,
  /** Spread of lengths, stdev / mean: within 0.5 (fixed lengths have 0; production's are often near 1). */
  lengthSpread: 0.5,
  /** Burstiness, the coefficient of variation of inter-arrival times: within 0.5 (1 is Poisson). */
  arrivalCv: 0.5,
  /** Share of requests with a shared or cached prefix: within 20 points. */
  prefixShare: 0.2,
} as const;

export interface LiveLatency {
  readonly ttft: LatencyPair;
  readonly itl: LatencyPair;
}

export interface Finding {
  readonly dimension: string;
  readonly reason: string;
}

export interface ShapeComparison {
  /** Dimensions where the benchmark's traffic was not production's, beyond TOLERANCES. */
  readonly flags: readonly Finding[];
  /** Dimensions the result file or the live profile says nothing about. */
  readonly unknown: readonly Finding[];
  /** How many dimensions both sides report (flagged or within tolerance): 0 means nothing was compared. */
  readonly compared: number;
}

export function compareShapes(live: WorkloadProfile, bench: BenchmarkShape): ShapeComparison {
  const flags: Finding[] = [];
  const unknown: Finding[] = [];
  let compared = 0;
  for (const [name, production, benchmark] of [
    ['input length', live.inputTokens, bench.inputTokens],
    ['output length', live.outputTokens, bench.outputTokens],
  ] as const) {
    if (compareLengths(name, production, benchmark, flags, unknown)) compared++;
  }
  if (compareArrivals(live, bench, flags, unknown)) compared++;
  if (comparePrefixes(live, bench, flags, unknown)) compared++;
  return { flags, unknown, compared };
}

/** Each compare function: true when both sides report the dimension, so it was compared. */
function compareLengths(name: string, production: Distribution, benchmark: LengthSummary, flags: Finding[], unknown: Finding[]): boolean {
  if (production.count === 0 || production.mean === undefined) {
    unknown.push({ dimension: name, reason: 'no production request in the window reported its token usage' });
    return false;
  }
  if (benchmark.mean === undefined) {
    unknown.push({ dimension: name, reason: 'the result file has no mean for it' });
    return false;
  }
  const off = relative(benchmark.mean, production.mean);
  if (Math.abs(off) > TOLERANCES.lengthMean) {
    flags.push({ dimension: `${name} mean`, reason: `benchmark ${tokens(benchmark.mean)}, production ${tokens(production.mean)} (${signedPercent(off)}, tolerance ±${TOLERANCES.lengthMean * 100} %)` });
  }
  if (production.p99 !== undefined && benchmark.p99 !== undefined) {
    const tail = relative(benchmark.p99, production.p99);
    if (Math.abs(tail) > TOLERANCES.lengthP99) {
      flags.push({ dimension: `${name} p99`, reason: `benchmark ${tokens(benchmark.p99)}, production ${tokens(production.p99)} (${signedPercent(tail)}, tolerance ±${TOLERANCES.lengthP99 * 100} %): the tail is not production's` });
    }
  }
  if (production.stdev !== undefined && benchmark.stdev !== undefined && production.mean > 0 && benchmark.mean > 0) {
    const spreadProduction = production.stdev / production.mean;
    const spreadBenchmark = benchmark.stdev / benchmark.mean;
    if (Math.abs(spreadBenchmark - spreadProduction) > TOLERANCES.lengthSpread) {
      const why = spreadBenchmark < spreadProduction ? "the benchmark's lengths vary far less than production's" : "the benchmark's lengths vary far more than production's";
      flags.push({ dimension: `${name} spread`, reason: `stdev/mean ${spreadBenchmark.toFixed(2)} in the benchmark, ${spreadProduction.toFixed(2)} in production (tolerance ±${TOLERANCES.lengthSpread}): ${why}` });
    }
  }
  return true;
}

function compareArrivals(live: WorkloadProfile, bench: BenchmarkShape, flags: Finding[], unknown: Finding[]): boolean {
  const production = live.arrivals.interArrivalCv;
  if (production === undefined) {
    unknown.push({ dimension: 'burstiness', reason: 'fewer than 3 production arrivals in the window' });
    return false;
  }
  if (bench.interArrivalCv === undefined) {
    unknown.push({
      dimension: 'burstiness',
      reason: `${bench.interArrivalNote ?? 'the result has fewer than 3 per-request start times (AIPerf: pass profile_export.jsonl; GuideLLM: keep request samples)'}; production's CV is ${production.toFixed(2)}`,
    });
    return false;
  }
  if (Math.abs(bench.interArrivalCv - production) > TOLERANCES.arrivalCv) {
    flags.push({
      dimension: 'burstiness',
      reason: `inter-arrival CV ${bench.interArrivalCv.toFixed(2)} in the benchmark (${cvMeaning(bench.interArrivalCv)}), ${production.toFixed(2)} in production (${cvMeaning(production)}; tolerance ±${TOLERANCES.arrivalCv})`,
    });
  }
  return true;
}

/** What a CV of inter-arrival times says about arrivals. */
export function cvMeaning(cv: number): string {
  if (cv < 0.5) return 'evenly spaced';
  if (cv <= 1.5) return 'Poisson-like';
  return 'bursty';
}

function comparePrefixes(live: WorkloadProfile, bench: BenchmarkShape, flags: Finding[], unknown: Finding[]): boolean {
  // Like for like: cached-token shares when both sides report them, else production's fingerprint share.
  const production = live.cachedInputShare ?? live.prefixSharing.sharedPrefixShare;
  const what = live.cachedInputShare === undefined ? 'share a leading block with another request' : 'had cached input tokens';
  if (bench.cachedInputShare === undefined) {
    if (production > TOLERANCES.prefixShare) {
      unknown.push({ dimension: 'prefix sharing', reason: `the result reports no cached tokens, while ${percent(production)} of production requests ${what}; check the benchmark sent shared prefixes` });
    }
    return false;
  }
  if (Math.abs(bench.cachedInputShare - production) > TOLERANCES.prefixShare) {
    const absent = bench.cachedInputShare === 0 ? 'absent from the benchmark' : `${percent(bench.cachedInputShare)} of benchmark requests had cached input tokens`;
    flags.push({ dimension: 'prefix sharing', reason: `${absent}, while ${percent(production)} of production requests ${what} (tolerance ±${TOLERANCES.prefixShare * 100} points)` });
  }
  return true;
}

function relative(benchmark: number, production: number): number {
  if (production === 0) return benchmark === 0 ? 0 : Infinity;
  return benchmark / production - 1;
}

function tokens(n: number): string {
  return `${n >= 100 ? Math.round(n) : Number(n.toFixed(1))} tokens`;
}

function signedPercent(r: number): string {
  if (!Number.isFinite(r)) return 'production is 0';
  return `${r >= 0 ? '+' : '−'}${Math.abs(r * 100).toFixed(0)} %`;
}

function percent(r: number): string {
  return `${(r * 100).toFixed(0)} %`;
}
