import { interArrivalCv, latencyPair, lengthSummary, rateOfStarts, type BenchmarkShape, type LatencyPair, type LengthSummary } from './benchmark-shape.js';

/**
 * AIPerf's two result files (ai-dynamo/aiperf, commit db4f6397d11ee2d4cfbb41f70b2327315163dcf0):
 *
 * - `profile_export_aiperf.json`: `JsonExportData` (aiperf/common/models/export_models.py), one
 *   `JsonMetricResult` per metric tag (`unit`, `avg`, `p50`, `p99`, `std`, ...) in the metric's
 *   display unit (ms for latencies, tokens for lengths, requests/sec for throughput).
 * - `profile_export.jsonl`: one `MetricRecordInfo` per request (aiperf/common/models/record_models.py;
 *   docs/tutorials/working-with-profile-exports.md): `metadata.request_start_ns` (epoch ns),
 *   `metrics.<tag>.value` with its `unit`, and `error` (null when the request succeeded).
 *
 * `inter_token_latency` is per request, (request latency - TTFT) / (output tokens - 1)
 * (aiperf/metrics/types/inter_token_latency_metric.py).
 */
export function aiperfAggregateShape(data: Record<string, unknown>, where: string): BenchmarkShape {
  const metric = (tag: string): Record<string, unknown> | undefined => (isObject(data[tag]) ? data[tag] : undefined);
  const ttft = metric('time_to_first_token');
  if (ttft === undefined) throw new Error(`${where}: no "time_to_first_token" in this AIPerf export; was the benchmark run with --streaming?`);
  const count = metric('request_count');
  return {
    tool: 'AIPerf',
    label: 'profile_export_aiperf.json',
    requests: count === undefined ? 0 : (numberAt(count, 'avg') ?? 0),
    ttft: latencyOf(ttft, `${where}: time_to_first_token`),
    itl: latencyOf(metric('inter_token_latency'), `${where}: inter_token_latency`),
    inputTokens: lengthsOf(metric('input_sequence_length')),
    outputTokens: lengthsOf(metric('output_sequence_length')),
    ratePerSecond: numberAt(metric('request_throughput') ?? {}, 'avg'),
  };
}

/** Per-request records: every figure computed here from the successful requests of the profiling phase. */
export function aiperfRecordsShape(records: readonly Record<string, unknown>[], where: string): BenchmarkShape {
  const starts: number[] = [];
  const ttft: number[] = [];
  const itl: number[] = [];
  const input: number[] = [];
  const output: number[] = [];
  let successful = 0;
  records.forEach((record, index) => {
    const metadata = record['metadata'];
    const metrics = record['metrics'];
    if (!isObject(metadata) || !isObject(metrics)) throw new Error(`${where}: line ${index + 1}: expected an AIPerf record with "metadata" and "metrics"`);
    // Warm-up requests are not the benchmark's traffic (metadata.benchmark_phase: "warmup" | "profiling").
    if (metadata['benchmark_phase'] === 'warmup') return;
    // Epoch nanoseconds exceed 2^53: JSON.parse rounds them to 256 ns, nothing next to the gaps between requests.
    if (typeof metadata['request_start_ns'] === 'number') starts.push(metadata['request_start_ns'] / 1e9);
    if (record['error'] !== null && record['error'] !== undefined) return;
    successful++;
    pushValue(ttft, metrics, 'time_to_first_token', SECONDS_PER, `${where}: line ${index + 1}`);
    pushValue(itl, metrics, 'inter_token_latency', SECONDS_PER, `${where}: line ${index + 1}`);
    pushValue(input, metrics, 'input_sequence_length', undefined, `${where}: line ${index + 1}`);
    pushValue(output, metrics, 'output_sequence_length', undefined, `${where}: line ${index + 1}`);
  });
  return {
    tool: 'AIPerf',
    label: 'profile_export.jsonl',
    requests: successful,
    ttft: latencyPair(ttft),
    itl: latencyPair(itl),
    inputTokens: lengthSummary(input),
    outputTokens: lengthSummary(output),
    ratePerSecond: rateOfStarts(starts),
    interArrivalCv: interArrivalCv(starts),
  };
}

/** The AIPerf time units a latency may come in (aiperf/common/enums/metric_enums.py, MetricTimeUnit). */
const SECONDS_PER: Readonly<Record<string, number>> = { ns: 1e-9, us: 1e-6, ms: 1e-3, sec: 1 };

function pushValue(into: number[], metrics: Record<string, unknown>, tag: string, units: Readonly<Record<string, number>> | undefined, where: string): void {
  const metric = metrics[tag];
  if (!isObject(metric) || typeof metric['value'] !== 'number') return;
  into.push(metric['value'] * scaleOf(metric['unit'], units, `${where}: ${tag}`));
}

function scaleOf(unit: unknown, units: Readonly<Record<string, number>> | undefined, where: string): number {
  if (units === undefined) return 1;
  const scale = typeof unit === 'string' ? units[unit] : undefined;
  if (scale === undefined) throw new Error(`${where}: unit ${JSON.stringify(unit)} is not a time unit (expected one of ${Object.keys(units).join(', ')})`);
  return scale;
}

function latencyOf(metric: Record<string, unknown> | undefined, where: string): LatencyPair {
  if (metric === undefined) return {};
  const scale = scaleOf(metric['unit'], SECONDS_PER, where);
  const scaled = (key: string): number | undefined => {
    const value = numberAt(metric, key);
    return value === undefined ? undefined : value * scale;
  };
  return { p50: scaled('p50'), p99: scaled('p99') };
}

function lengthsOf(metric: Record<string, unknown> | undefined): LengthSummary {
  if (metric === undefined) return {};
  return { mean: numberAt(metric, 'avg'), stdev: numberAt(metric, 'std'), p50: numberAt(metric, 'p50'), p99: numberAt(metric, 'p99') };
}

function numberAt(object: Record<string, unknown>, key: string): number | undefined {
  const value = object[key];
  return typeof value === 'number' && Number.isFinite(value) ? value : undefined;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
