import { interArrivalCv, type BenchmarkShape, type LatencyPair, type LengthSummary } from './benchmark-shape.js';

/**
 * A GuideLLM report (`benchmarks.json` / `.yaml`, what `guidellm benchmark run --output kind=json`
 * writes): `GenerativeBenchmarksReport` in vllm-project/guidellm
 * src/guidellm/benchmark/schemas/report.py, commit ee7a77457ba668b4b5ccb40f110518829893b36a
 * (`metadata.version` 2: `{metadata, config, benchmarks[]}`); schema 1 (`{benchmarks[]}` with
 * `args` per benchmark) is read too. Each benchmark's `metrics` (schemas/metrics.py,
 * `GenerativeMetrics`) holds `StatusDistributionSummary` objects (schemas/statistics.py): per
 * status (`successful`, ...) `mean`, `median`, `std_dev`, `percentiles.p50`/`p99` (schema 1 has no
 * `p50`: its `median` stands in). Per-request records (`requests.successful[]`,
 * schemas/request_stats.py `GenerativeRequestStats`) give the start times burstiness needs: those
 * of every status, since a failed request arrived too. GuideLLM may keep only a random sample of
 * them (`--metrics kind=generative,sample_size=N`, benchmark/schemas/accumulator.py reservoir
 * sampling), and the gaps between a sample's starts are not the gaps sent (a tenth of evenly spaced
 * starts has a CV near 1): burstiness is read only when every request's record is kept, which
 * `metrics.request_totals.total` (schema 1: the benchmark's `request_totals`) tells.
 */
export function guidellmShapes(report: Record<string, unknown>, where: string): BenchmarkShape[] {
  const benchmarks = report['benchmarks'];
  if (!Array.isArray(benchmarks) || benchmarks.length === 0) throw new Error(`${where}: a GuideLLM report with no benchmark in "benchmarks"`);
  return benchmarks.map((benchmark, index) => {
    if (!isObject(benchmark)) throw new Error(`${where}: benchmarks[${index}] is not an object`);
    return benchmarkShape(benchmark, `benchmark ${index} of ${benchmarks.length}${strategyOf(benchmark)}`, `${where}: benchmarks[${index}]`);
  });
}

function benchmarkShape(benchmark: Record<string, unknown>, label: string, where: string): BenchmarkShape {
  const metrics = benchmark['metrics'];
  if (!isObject(metrics)) throw new Error(`${where}.metrics: missing; expected GuideLLM's GenerativeMetrics (time_to_first_token_ms, prompt_token_count, ...)`);
  const successful = (name: string): Record<string, unknown> | undefined => {
    const metric = metrics[name];
    return isObject(metric) && isObject(metric['successful']) ? metric['successful'] : undefined;
  };
  const ttft = successful('time_to_first_token_ms');
  if (ttft === undefined) throw new Error(`${where}.metrics.time_to_first_token_ms.successful: missing; is this a GuideLLM generative benchmark?`);
  const records = recordsOf(benchmark, 'successful');
  const arrivals = [...records, ...recordsOf(benchmark, 'errored'), ...recordsOf(benchmark, 'incomplete')];
  const starts = arrivals.map(startOf).filter((s): s is number => s !== undefined);
  const total = requestTotal(benchmark);
  const sampled = starts.length >= 3 && total !== undefined && arrivals.length < total;
  const cached = records.map((r) => r['cached_tokens']).filter((c): c is number => typeof c === 'number');
  const rate = successful('requests_per_second');
  return {
    tool: 'GuideLLM',
    label,
    requests: numberAt(ttft, 'count') ?? records.length,
    ttft: latency(ttft),
    itl: latency(successful('inter_token_latency_ms')),
    inputTokens: lengths(successful('prompt_token_count')),
    outputTokens: lengths(successful('output_token_count')),
    ratePerSecond: rate === undefined ? undefined : numberAt(rate, 'mean'),
    interArrivalCv: sampled ? undefined : interArrivalCv(starts),
    interArrivalNote: sampled
      ? `GuideLLM kept ${arrivals.length} of its ${total} requests (--metrics sample_size): the gaps between a sample of the starts are not the gaps it sent; rerun without sample_size to compare burstiness`
      : undefined,
    cachedInputShare: cached.length === 0 ? undefined : cached.filter((c) => c > 0).length / cached.length,
  };
}

function strategyOf(benchmark: Record<string, unknown>): string {
  for (const holder of [benchmark['config'], benchmark['args']]) {
    if (!isObject(holder) || !isObject(holder['strategy'])) continue;
    const kind = holder['strategy']['type_'];
    if (typeof kind === 'string') return ` (${kind})`;
  }
  return '';
}

function recordsOf(benchmark: Record<string, unknown>, status: 'successful' | 'errored' | 'incomplete'): Record<string, unknown>[] {
  const requests = benchmark['requests'];
  if (!isObject(requests) || !Array.isArray(requests[status])) return [];
  return requests[status].filter(isObject);
}

/** Requests the benchmark sent, of every status: schema 2 in `metrics.request_totals`, schema 1 beside `metrics`. */
function requestTotal(benchmark: Record<string, unknown>): number | undefined {
  for (const holder of [benchmark['metrics'], benchmark]) {
    if (isObject(holder) && isObject(holder['request_totals'])) return numberAt(holder['request_totals'], 'total');
  }
  return undefined;
}

/** Schema 2 dumps the computed `request_start_time`; schema 1 has `start_time` and `scheduler_info.request_start`. */
function startOf(record: Record<string, unknown>): number | undefined {
  for (const key of ['request_start_time', 'start_time']) if (typeof record[key] === 'number') return record[key];
  const info = record['info'];
  if (isObject(info) && isObject(info['timings']) && typeof info['timings']['request_start'] === 'number') return info['timings']['request_start'];
  const scheduler = record['scheduler_info'];
  if (isObject(scheduler) && typeof scheduler['request_start'] === 'number') return scheduler['request_start'];
  return undefined;
}

function quantiles(summary: Record<string, unknown>): { p50: number | undefined; p99: number | undefined } {
  const percentiles = isObject(summary['percentiles']) ? summary['percentiles'] : {};
  return { p50: numberAt(percentiles, 'p50') ?? numberAt(summary, 'median'), p99: numberAt(percentiles, 'p99') };
}

/** Milliseconds in the report, seconds here. */
function latency(summary: Record<string, unknown> | undefined): LatencyPair {
  if (summary === undefined || numberAt(summary, 'count') === 0) return {};
  const { p50, p99 } = quantiles(summary);
  return { p50: p50 === undefined ? undefined : p50 / 1000, p99: p99 === undefined ? undefined : p99 / 1000 };
}

function lengths(summary: Record<string, unknown> | undefined): LengthSummary {
  if (summary === undefined || numberAt(summary, 'count') === 0) return {};
  return { mean: numberAt(summary, 'mean'), stdev: numberAt(summary, 'std_dev'), ...quantiles(summary) };
}

function numberAt(object: Record<string, unknown>, key: string): number | undefined {
  const value = object[key];
  return typeof value === 'number' && Number.isFinite(value) ? value : undefined;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
