import type { BenchmarkShape, LatencyPair, LengthSummary } from './benchmark-shape.js';
import type { LiveWorkload } from './live-profile-client.js';
import { cvMeaning, type ShapeComparison } from './shape-comparison.js';
import type { Distribution } from './workload-profile.js';

const DASH = '–';

/**
 * The side-by-side text `tokentap profile compare` prints: one row per dimension, production on the
 * left, then the flags (each with its one-line reason) and what could not be compared.
 */
export function renderComparison(live: LiveWorkload, bench: BenchmarkShape, resultPath: string, comparison: ShapeComparison): string {
  const p = live.profile;
  const rows: [string, string, string][] = [
    ['', 'production', 'benchmark'],
    ['requests', `${p.requests} in ${span(p.window.seconds)}`, String(bench.requests)],
    [`TTFT p50 / p99`, latency(live.latency.ttft), latency(bench.ttft)],
    [`ITL p50 / p99`, latency(live.latency.itl), latency(bench.itl)],
    ...lengthRows('input tokens', p.inputTokens, bench.inputTokens),
    ...lengthRows('output tokens', p.outputTokens, bench.outputTokens),
    ['request rate', rate(p.arrivals.ratePerSecond), rate(bench.ratePerSecond)],
    ['burstiness (CV)', cv(p.arrivals.interArrivalCv), cv(bench.interArrivalCv)],
    ['shared prefix', share(p.prefixSharing.sharedPrefixShare), 'not in the result'],
    ['cached input', share(p.cachedInputShare), share(bench.cachedInputShare)],
  ];
  const width = [0, 1, 2].map((i) => Math.max(...rows.map((row) => row[i]!.length)));
  const lines = [
    `Workload "${p.workload}" (production, last ${span(p.window.seconds)}) against ${bench.tool} ${bench.label} in ${resultPath}`,
    '',
    ...rows.map(([a, b, c]) => `  ${a.padEnd(width[0]!)}  ${b.padEnd(width[1]!)}  ${c}`.trimEnd()),
    '',
    `  Production TTFT and ITL are the status page's, over the last ${span(live.latencyWindowS)}; ITL is per token there and per request (TPOT) in ${bench.tool}.`,
    `  Burstiness: the coefficient of variation of the gaps between arrivals (1 = Poisson, 0 = evenly spaced, above 1 = bursts).`,
    '',
  ];
  if (comparison.compared === 0) {
    lines.push(`Nothing compared: neither side reports a dimension the other does.`);
  } else if (comparison.flags.length === 0) {
    lines.push(`Comparable: the benchmark's traffic is within tolerance of production's on every dimension both sides report.`);
  } else {
    lines.push(`Not production's traffic on ${comparison.flags.length} ${comparison.flags.length === 1 ? 'dimension' : 'dimensions'}:`);
    for (const flag of comparison.flags) lines.push(`  ✗ ${flag.dimension}: ${flag.reason}`);
  }
  if (comparison.unknown.length > 0) {
    lines.push('Not compared:');
    for (const item of comparison.unknown) lines.push(`  ? ${item.dimension}: ${item.reason}`);
  }
  return `${lines.join('\n')}\n`;
}

function lengthRows(name: string, production: Distribution, benchmark: LengthSummary): [string, string, string][] {
  return [
    [`${name} mean ± stdev`, `${count(production.mean)} ± ${count(production.stdev)}`, `${count(benchmark.mean)} ± ${count(benchmark.stdev)}`],
    [`${name} p50 / p99`, `${count(production.p50)} / ${count(production.p99)}`, `${count(benchmark.p50)} / ${count(benchmark.p99)}`],
  ];
}

function count(n: number | undefined): string {
  if (n === undefined) return DASH;
  return n >= 100 ? String(Math.round(n)) : String(Number(n.toFixed(1)));
}

function latency(pair: LatencyPair): string {
  return `${duration(pair.p50)} / ${duration(pair.p99)}`;
}

function duration(s: number | undefined): string {
  if (s === undefined) return DASH;
  if (s < 0.01) return `${(s * 1000).toFixed(2)} ms`;
  if (s < 1) return `${(s * 1000).toFixed(1)} ms`;
  return `${s.toFixed(2)} s`;
}

/** Two significant digits below 0.01 a second (as the status page writes a rate), else two decimals at most. */
function rate(n: number | undefined): string {
  return n === undefined ? DASH : `${n > 0 && n < 0.01 ? n.toPrecision(2) : n < 10 ? n.toFixed(2) : n.toFixed(1)}/s`;
}

function cv(n: number | undefined): string {
  return n === undefined ? DASH : `${n.toFixed(2)} (${cvMeaning(n)})`;
}

function share(r: number | undefined): string {
  return r === undefined ? 'not reported' : `${(r * 100).toFixed(0)} % of requests`;
}

function span(seconds: number): string {
  if (seconds < 120) return `${Math.round(seconds)} s`;
  if (seconds < 7200) return `${Math.round(seconds / 60)} min`;
  return `${Number((seconds / 3600).toFixed(1))} h`;
}
