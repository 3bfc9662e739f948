/**
 * What native histograms cost: CPU per recorded sample (classic buckets alone against classic plus
 * native, on the same values), Prometheus series per workload and model for each
 * `metrics.histograms` setting, and scrape payload sizes (text, protobuf classic / native / both)
 * for a realistic set of series. Checks its own answers (every sample counted once in each view).
 *
 * Not part of `npm run bench` (the paired benchmark, `--against DIR`, measures the whole proxy):
 *
 *   npx tsc -p test/bench/tsconfig.json && cp -r src/metrics/proto node_modules/.cache/tokentap-bench/src/metrics/ \
 *     && node node_modules/.cache/tokentap-bench/test/bench/native-cost.js > test/bench/results/native-cost.json
 *
 * (the copy: tsc does not carry the .proto file the protobuf exposition loads beside its module).
 */
import { strict as assert } from 'node:assert';
import { loadSettings } from '../../src/config/load.js';
import { METRICS, type HistogramKey } from '../../src/metrics/definitions.js';
import { HistogramSeries } from '../../src/metrics/direct-metrics.js';
import { NativeBuckets, NATIVE_DEFAULTS } from '../../src/metrics/native-buckets.js';
import { decodeDelimited, type HistogramExposition } from '../../src/metrics/protobuf-exposition.js';
import { Recorder, type RequestSummary } from '../../src/metrics/recorder.js';
import { Telemetry } from '../../src/metrics/telemetry.js';
import { createRandom as random } from '../../src/simulator/vocabulary.js';


/** Log-normal around `median` seconds with spread `sigma`, as latencies roughly are. */
function latencies(n: number, median: number, sigma: number, seed: number): Float64Array {
  const next = random(seed);
  const out = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    const u = Math.max(next(), 1e-12);
    const v = next();
    out[i] = median * Math.exp(sigma * Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v));
  }
  return out;
}

function cpuNsPerSample(values: Float64Array, withNative: boolean, rounds: number): number {
  const boundaries = [...loadSettings({ flags: {}, env: {}, readFile: () => '' }).buckets.itlToken];
  let best = Infinity;
  for (let r = 0; r < rounds; r++) {
    const series = new HistogramSeries(boundaries, {}, withNative ? new NativeBuckets(NATIVE_DEFAULTS) : undefined);
    const start = process.cpuUsage();
    for (let i = 0; i < values.length; i++) series.record(values[i] as number);
    const used = process.cpuUsage(start);
    best = Math.min(best, ((used.user + used.system) * 1000) / values.length);
    assert.equal(series.dataPoint([0, 0]).value.count, values.length);
  }
  return best;
}

/** Prometheus series one (workload, model) pair makes, per histogram and label variant, for each setting. */
function seriesPerWorkloadModel(buckets: Readonly<Record<HistogramKey, readonly number[]>>): Record<string, number> {
  // e2e carries `outcome` (count the usual two: completed, client_cancelled); token usage input and output;
  // the two by-concurrency histograms one series per `in_flight` band in use (count one; at most ten);
  // the adapter cold-start TTFT none (only a LoRA adapter that had a cold start has one); accelerator-seconds
  // (with `cost:`) and the cached input ratio one each.
  const variants: Record<HistogramKey, number> = {
    ttfb: 1, ttft: 1, ttftAnswer: 1, engineTtft: 1, outsideEngineTtft: 1, queueOrOutsideEngineTtft: 1, engineQueue: 1, enginePrefill: 1,
    itlToken: 1, itlChunk: 1, tpot: 1, e2e: 2, tokenUsage: 2, ttftByConcurrency: 1, itlByConcurrency: 1, adapterColdStartTtft: 0,
    requestAcceleratorSeconds: 1, cachedInputRatio: 1,
  };
  let classic = 0;
  let native = 0;
  for (const key of Object.keys(variants) as HistogramKey[]) {
    classic += variants[key] * (buckets[key].length + 1 + 2); // _bucket per boundary and +Inf, _sum, _count
    native += variants[key]; // one series holds count, sum and every bucket
  }
  return { classic, native, bothIngestedByPrometheus242: native, bothWithScrapeClassic: classic + native };
}

async function payloads(histograms: HistogramExposition): Promise<{ text: number; protobuf: number; nativeBuckets: number }> {
  const telemetry = new Telemetry(undefined, undefined, { histograms, native: NATIVE_DEFAULTS });
  const settings = loadSettings({ flags: {}, env: {}, readFile: () => '' });
  const recorder = new Recorder(telemetry.meter, settings.buckets);
  const next = random(7);
  const ttft = latencies(4000, 0.15, 0.6, 11);
  const itl = latencies(4000 * 64, 0.02, 0.4, 12);
  let k = 0;
  for (let w = 0; w < 3; w++) {
    for (let m = 0; m < 4; m++) {
      const attributes = recorder.requestAttributes(`w${w}`, `model-${m}`);
      for (let r = 0; r < 333; r++) {
        const i = (w * 4 + m) * 333 + r;
        const tokens = 64;
        const per = recorder.interTokenSeries(attributes);
        for (let t = 0; t < tokens; t++) per.record((itl[(k++) % itl.length] as number) * 1000, 1);
        const summary: RequestSummary = {
          outcome: next() < 0.05 ? 'client_cancelled' : 'completed',
          statusClass: '2xx',
          ttfbMs: (ttft[i] as number) * 900,
          ttftMs: (ttft[i] as number) * 1000,
          tpotMs: 20,
          e2eMs: (ttft[i] as number) * 1000 + 1300,
          inputTokens: 100 + Math.floor(next() * 900),
          outputTokens: tokens,
          tokenSource: 'usage',
          tokenCountMismatch: false,
        };
        recorder.finished(attributes, summary);
      }
    }
  }
  const text = Buffer.byteLength(await telemetry.scrape());
  const body = await telemetry.scrapeProtobuf();
  let nativeBuckets = 0;
  for (const family of decodeDelimited(body) as Array<{ metric: Array<{ histogram?: { positive_delta?: unknown[] } }> }>) {
    for (const metric of family.metric) nativeBuckets += metric.histogram?.positive_delta?.length ?? 0;
  }
  await telemetry.shutdown();
  return { text, protobuf: body.byteLength, nativeBuckets };
}

async function main(): Promise<void> {
  const values = latencies(2_000_000, 0.02, 0.5, 3);
  const classicNs = cpuNsPerSample(values, false, 5);
  const bothNs = cpuNsPerSample(values, true, 5);
  const settings = loadSettings({ flags: {}, env: {}, readFile: () => '' });
  const series = seriesPerWorkloadModel(settings.buckets);
  const sizes: Record<string, unknown> = {};
  for (const mode of ['classic', 'native', 'both'] as const) sizes[mode] = await payloads(mode);
  const report = {
    cpuNsPerSample: { classic: Number(classicNs.toFixed(1)), classicPlusNative: Number(bothNs.toFixed(1)), addedByNative: Number((bothNs - classicNs).toFixed(1)) },
    seriesPerWorkloadAndModel: series,
    payloadBytes: { note: '3 workloads x 4 models, 4k requests, 256k tokens; text is the same in every mode', ...sizes },
    histograms: Object.keys(METRICS).filter((k) => METRICS[k as keyof typeof METRICS].kind === 'histogram'),
  };
  process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
}

await main();
