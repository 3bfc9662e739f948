import { execFileSync } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { readFile, writeFile, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseBenchmarkResult, readBenchmarkResult } from '../../../src/profile/benchmark-result.js';

const FIXTURES = join(import.meta.dirname, '..', '..', 'fixtures', 'benchmarks');
const GUIDELLM_JSON = join(FIXTURES, 'guidellm', 'benchmarks_stripped.json');
const GUIDELLM_YAML = join(FIXTURES, 'guidellm', 'benchmarks_stripped.yaml');
const AIPERF_RECORDS = join(FIXTURES, 'aiperf', 'profile_export.jsonl');
const AIPERF_AGGREGATE = join(FIXTURES, 'aiperf', 'profile_export_aiperf.json');

/** A figure of the fixture, read here by path, independently of the reader under test. */
async function at(file: string, ...path: (string | number)[]): Promise<number> {
  let value: unknown = JSON.parse(await readFile(file, 'utf8'));
  for (const key of path) value = (value as Record<string | number, unknown>)[key];
  return value as number;
}

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tokentap-bench-result-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('reading a GuideLLM report', () => {
  it("takes the successful requests' TTFT, ITL and lengths from a real GuideLLM benchmarks.json, in seconds and tokens", async () => {
    const [shape] = await readBenchmarkResult(GUIDELLM_JSON);
    const metric = (name: string, ...rest: string[]) => at(GUIDELLM_JSON, 'benchmarks', 0, 'metrics', name, 'successful', ...rest);
    expect(shape?.tool).toBe('GuideLLM');
    expect(shape?.label).toBe('benchmark 0 of 1 (synchronous)');
    expect(shape?.requests).toBe(46);
    // Report schema 1 has no p50 among its percentiles: the median stands in.
    expect(shape?.ttft.p50).toBeCloseTo((await metric('time_to_first_token_ms', 'median')) / 1000, 12);
    expect(shape?.ttft.p99).toBeCloseTo((await metric('time_to_first_token_ms', 'percentiles', 'p99')) / 1000, 12);
    expect(shape?.itl.p99).toBeCloseTo((await metric('inter_token_latency_ms', 'percentiles', 'p99')) / 1000, 12);
    expect(shape?.inputTokens).toEqual({
      mean: await metric('prompt_token_count', 'mean'),
      stdev: await metric('prompt_token_count', 'std_dev'),
      p50: await metric('prompt_token_count', 'median'),
      p99: await metric('prompt_token_count', 'percentiles', 'p99'),
    });
    expect(shape?.outputTokens.mean).toBeCloseTo(128, 9);
    expect(shape?.ratePerSecond).toBe(await metric('requests_per_second', 'mean'));
    // One request sample was kept: too few start times for burstiness, and no guess.
    expect(shape?.interArrivalCv).toBeUndefined();
    expect(shape?.cachedInputShare).toBeUndefined();
  });

  it('reads the same report written as YAML to the same figures', async () => {
    const fromJson = await readBenchmarkResult(GUIDELLM_JSON);
    const fromYaml = await readBenchmarkResult(GUIDELLM_YAML);
    expect(fromYaml).toEqual(fromJson);
  });

  it('reads report schema 2: p50 from the percentiles, burstiness from request_start_time, the cached share from cached_tokens', () => {
    const summary = (mean: number, p50: number, p99: number, std: number) => ({ successful: { mean, median: p50 + 1, std_dev: std, count: 4, percentiles: { p50, p99 } } });
    // Starts 0, 1, 3, 6 s: gaps 1, 2, 3, mean 2, sample stdev 1.
    const starts = [1_760_000_000, 1_760_000_001, 1_760_000_003, 1_760_000_006];
    const report = {
      metadata: { version: 2, guidellm_version: '0.7.3' },
      config: {},
      benchmarks: [
        {
          type_: 'generative_benchmark',
          config: { strategy: { type_: 'poisson', rate: 2 } },
          metrics: {
            time_to_first_token_ms: summary(120, 100, 400, 50),
            inter_token_latency_ms: summary(12, 10, 30, 5),
            prompt_token_count: summary(900, 800, 4000, 600),
            output_token_count: summary(200, 180, 700, 90),
            requests_per_second: summary(2.1, 2, 3, 0.2),
          },
          requests: {
            successful: starts.map((s, i) => ({ request_start_time: s, prompt_tokens: 900, output_tokens: 200, cached_tokens: i < 3 ? 512 : 0 })),
            incomplete: [],
            errored: [],
          },
        },
      ],
    };
    const [shape] = parseBenchmarkResult(JSON.stringify(report), 'benchmarks.json');
    expect(shape?.label).toBe('benchmark 0 of 1 (poisson)');
    expect(shape?.ttft).toEqual({ p50: 0.1, p99: 0.4 });
    expect(shape?.inputTokens).toEqual({ mean: 900, stdev: 600, p50: 800, p99: 4000 });
    expect(shape?.interArrivalCv).toBeCloseTo(1 / 2, 12);
    expect(shape?.cachedInputShare).toBe(0.75);
  });

  /** A schema 2 report of a run at a constant 10 requests a second: `kept` of its start times, by status. */
  function constantRun(total: number, kept: { successful: number[]; errored: number[]; incomplete: number[] }) {
    const summary = { successful: { mean: 100, median: 100, std_dev: 0, count: kept.successful.length, percentiles: { p50: 100, p99: 100 } } };
    const records = (indexes: number[]) => indexes.map((i) => ({ request_start_time: 1_760_000_000 + i / 10, prompt_tokens: 100, output_tokens: 10 }));
    return JSON.stringify({
      metadata: { version: 2 },
      benchmarks: [{
        config: { strategy: { type_: 'constant', rate: 10 } },
        metrics: {
          request_totals: { successful: kept.successful.length, errored: kept.errored.length, incomplete: kept.incomplete.length, total },
          time_to_first_token_ms: summary,
          prompt_token_count: summary,
          output_token_count: summary,
        },
        requests: { successful: records(kept.successful), errored: records(kept.errored), incomplete: records(kept.incomplete) },
      }],
    });
  }

  it('takes the errored and incomplete requests\' start times as arrivals too: evenly spaced requests, a third of them failed, are evenly spaced (was: CV 0.33)', () => {
    const all = Array.from({ length: 300 }, (_, i) => i);
    const [shape] = parseBenchmarkResult(constantRun(300, { successful: all.filter((i) => i % 3 !== 2), errored: all.filter((i) => i % 3 === 2 && i < 290), incomplete: all.filter((i) => i % 3 === 2 && i >= 290) }), 'b.json');
    // Starts of 1.76e9 s in doubles: gaps equal to about 1e-6 s.
    expect(shape?.interArrivalCv).toBeCloseTo(0, 4);
  });

  it('does not take the burstiness of a sample of the requests (sample_size): a random tenth of evenly spaced starts looks near Poisson (was: CV 0.79 for 0)', () => {
    // A fixed tenth, as GuideLLM's reservoir would keep at random: every gap a multiple of 0.1 s.
    const kept = [0, 3, 4, 19, 35, 40, 41, 62, 77, 81, 90, 118, 120, 121, 140, 166, 170, 185, 199, 204];
    const [shape] = parseBenchmarkResult(constantRun(210, { successful: kept, errored: [], incomplete: [] }), 'b.json');
    expect(shape?.interArrivalCv).toBeUndefined();
    expect(shape?.interArrivalNote).toBe('GuideLLM kept 20 of its 210 requests (--metrics sample_size): the gaps between a sample of the starts are not the gaps it sent; rerun without sample_size to compare burstiness');
  });

  it('returns one shape per benchmark of a sweep, each labelled with its strategy', () => {
    const one = (kind: string) => ({ config: { strategy: { type_: kind } }, metrics: { time_to_first_token_ms: { successful: { count: 1, median: 5, percentiles: { p99: 9 } } } } });
    const shapes = parseBenchmarkResult(JSON.stringify({ benchmarks: [one('synchronous'), one('throughput'), one('constant')] }), 'sweep.json');
    expect(shapes.map((s) => s.label)).toEqual(['benchmark 0 of 3 (synchronous)', 'benchmark 1 of 3 (throughput)', 'benchmark 2 of 3 (constant)']);
  });
});

describe('reading AIPerf results', () => {
  it("computes every figure from AIPerf's real per-request records, skipping the cancelled request", async () => {
    const [shape] = await readBenchmarkResult(AIPERF_RECORDS);
    expect(shape?.tool).toBe('AIPerf');
    expect(shape?.requests).toBe(1);
    // The record printed in AIPerf's docs names time_to_first_token twice; JSON keeps the last (4.898 ms).
    expect(shape?.ttft.p50).toBeCloseTo(4.8984369999999995e-3, 12);
    expect(shape?.itl.p99).toBeCloseTo(5.2048325e-3, 12);
    expect(shape?.inputTokens).toEqual({ mean: 550, stdev: 0, p50: 550, p99: 550 });
    expect(shape?.outputTokens.mean).toBe(9);
    // Two starts (the cancelled request's counts as an arrival): a rate, but no CV from one gap.
    expect(shape?.interArrivalCv).toBeUndefined();
  });

  it('computes burstiness from request_start_ns across records, leaving out the warm-up phase', async () => {
    const record = (startS: number, phase: string) =>
      JSON.stringify({
        metadata: { request_start_ns: startS * 1e9, benchmark_phase: phase },
        metrics: { time_to_first_token: { value: 0.2, unit: 'sec' }, input_sequence_length: { value: 100, unit: 'tokens' }, output_sequence_length: { value: 10, unit: 'tokens' } },
        error: null,
      });
    // Warm-up at 0 and 0.01 s would make the gaps uneven; the profiling requests are 10 s apart.
    const text = [record(0, 'warmup'), record(0.01, 'warmup'), record(100, 'profiling'), record(110, 'profiling'), record(120, 'profiling'), record(130, 'profiling')].join('\n');
    const file = join(dir, 'records.jsonl');
    await writeFile(file, text);
    const [shape] = await readBenchmarkResult(file);
    expect(shape?.requests).toBe(4);
    expect(shape?.interArrivalCv).toBeCloseTo(0, 9);
    expect(shape?.ratePerSecond).toBeCloseTo(0.1, 9);
    expect(shape?.ttft.p99).toBeCloseTo(0.2, 12);
  });

  it('takes p50, p99, mean and std from profile_export_aiperf.json, latencies from ms to seconds', async () => {
    const [shape] = await readBenchmarkResult(AIPERF_AGGREGATE);
    expect(shape?.ttft.p50).toBeCloseTo((await at(AIPERF_AGGREGATE, 'time_to_first_token', 'p50')) / 1000, 12);
    expect(shape?.itl.p99).toBeCloseTo((await at(AIPERF_AGGREGATE, 'inter_token_latency', 'p99')) / 1000, 12);
    expect(shape?.inputTokens.stdev).toBe(await at(AIPERF_AGGREGATE, 'input_sequence_length', 'std'));
    expect(shape?.outputTokens.p99).toBe(await at(AIPERF_AGGREGATE, 'output_sequence_length', 'p99'));
    expect(shape?.ratePerSecond).toBe(await at(AIPERF_AGGREGATE, 'request_throughput', 'avg'));
    expect(shape?.requests).toBe(await at(AIPERF_AGGREGATE, 'request_count', 'avg'));
    expect(shape?.interArrivalCv).toBeUndefined();
  });
});

describe('telling result files apart by content', () => {
  it.each([
    ['an empty file', '', /x\.json: empty; expected a GuideLLM report/],
    ['a JSON object of neither tool', '{"results": []}', /x\.json: an object with keys "results"; expected a GuideLLM report .* AIPerf profile_export_aiperf\.json .* AIPerf profile_export\.jsonl/],
    ["AIPerf's CSV export", 'Metric,avg,min,max\nTime to First Token (ms),1,2,3\n', /x\.json: not an object; expected/],
    ['JSON lines that are not AIPerf records', '{"a": 1}\n{"b": 2}\n', /x\.json: line 1: not an AIPerf record \(no "metadata" and "metrics"\)/],
    ['a broken JSON line', '{"metadata": {}, "metrics": {}}\n{"metadata": \n', /x\.json: line 2: not JSON/],
    ['a GuideLLM report without benchmarks', '{"benchmarks": []}', /x\.json: a GuideLLM report with no benchmark/],
    ['an AIPerf export of a run without streaming (no TTFT)', '{"request_throughput": {"unit": "requests/sec", "avg": 3}, "request_latency": {"unit": "ms", "avg": 900}}', /x\.json: no "time_to_first_token" in this AIPerf export; was the benchmark run with --streaming\?/],
    ['a GuideLLM benchmark without TTFT', '{"benchmarks": [{"metrics": {"request_latency": {}}}]}', /x\.json: benchmarks\[0\]\.metrics\.time_to_first_token_ms\.successful: missing/],
    ['an AIPerf latency in an unknown unit', '{"metadata": {"request_start_ns": 1}, "metrics": {"time_to_first_token": {"value": 3, "unit": "fortnights"}}, "error": null}\n{"metadata": {}, "metrics": {}}', /line 1: time_to_first_token: unit "fortnights" is not a time unit \(expected one of ns, us, ms, sec\)/],
  ])('names what it expected for %s', (_name, text, message) => {
    expect(() => parseBenchmarkResult(text, 'x.json')).toThrow(message);
  });

  it('stops reading a result that is a pipe at the cap, though stat() says a pipe holds 0 bytes (--result <(curl ...))', async () => {
    const fifo = join(dir, 'endless.fifo');
    execFileSync('mkfifo', [fifo]);
    // Bounded: 16 MiB at most, twice the cap this read is given; stops once the reader goes away.
    const writer = createWriteStream(fifo);
    writer.on('error', () => undefined);
    const chunk = Buffer.alloc(1 << 20, 0x20);
    let written = 0;
    const pump = (): void => {
      while (written < 16 && !writer.destroyed) {
        written++;
        if (!writer.write(chunk)) return void writer.once('drain', pump);
      }
      writer.end();
    };
    pump();
    await expect(readBenchmarkResult(fifo, 8 << 20)).rejects.toThrow(/endless\.fifo: more than the 8388608 bytes this command reads; rerun GuideLLM with --metrics kind=generative,sample_size=1000/);
    writer.destroy();
  });

  it('names the file and the reason when it cannot be read', async () => {
    await expect(readBenchmarkResult(join(dir, 'missing.json'))).rejects.toThrow(/missing\.json: cannot read the result file \(ENOENT\)/);
  });
});
