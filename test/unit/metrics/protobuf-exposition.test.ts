import { afterEach, describe, expect, it } from 'vitest';
import { createAdminServer } from '../../../src/admin/admin-server.js';
import { wantsProtobuf } from '../../../src/admin/exposition-format.js';
import { loadSettings } from '../../../src/config/load.js';
import { METRICS } from '../../../src/metrics/definitions.js';
import { NATIVE_DEFAULTS, type NativeHistogramSettings } from '../../../src/metrics/native-buckets.js';
import { decodeDelimited, PROTOBUF_CONTENT_TYPE, type HistogramExposition } from '../../../src/metrics/protobuf-exposition.js';
import { Recorder, type RequestSummary } from '../../../src/metrics/recorder.js';
import { Telemetry } from '../../../src/metrics/telemetry.js';
import { parsePrometheusText } from '../../helpers/prometheus-text.js';
import { testOtlpPush } from '../../helpers/sdk-reference.js';

const telemetries: Telemetry[] = [];
afterEach(async () => {
  await Promise.all(telemetries.splice(0).map((t) => t.shutdown()));
});

/** The Accept header of the Debian Prometheus 2.42 with `--enable-feature=native-histograms`, as captured from its scrape. */
const PROMETHEUS_NATIVE_ACCEPT =
  'application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited,application/openmetrics-text;version=1.0.0;q=0.8,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1';
/** The same Prometheus without the flag. */
const PROMETHEUS_TEXT_ACCEPT = 'application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1';

function setup(histograms: HistogramExposition, native: NativeHistogramSettings = NATIVE_DEFAULTS, withOtlp = false): { telemetry: Telemetry; recorder: Recorder } {
  // OTLP metrics pushed beside the scrape (exponential histograms, as by default).
  const telemetry = new Telemetry(withOtlp ? testOtlpPush('cumulative', 'exponential').push : undefined, undefined, { histograms, native });
  telemetries.push(telemetry);
  const settings = loadSettings({ flags: {}, env: {}, readFile: () => '' });
  return { telemetry, recorder: new Recorder(telemetry.meter, { ...settings.buckets, ttft: [0.125, 0.25, 0.5, 1] }) };
}

const summary = (ttftMs: number): RequestSummary => ({
  outcome: 'completed',
  statusClass: '2xx',
  ttfbMs: 10,
  ttftMs,
  tpotMs: 20,
  e2eMs: 1000,
  inputTokens: 12,
  outputTokens: 8,
  tokenSource: 'usage',
  tokenCountMismatch: false,
});

type Family = { name: string; help: string; type: string; metric: Array<{ label: Array<{ name: string; value: string }>; histogram?: Record<string, unknown>; counter?: { value: number } }> };

async function families(telemetry: Telemetry): Promise<Family[]> {
  return decodeDelimited(await telemetry.scrapeProtobuf()) as unknown as Family[];
}

/**
 * TTFTs (seconds) that fill the specification's worked example at schema 0, where bucket i is
 * (2^(i-1), 2^i]: index -2 -> 3, -1 -> 5, 2 -> 1, 4 -> 3, 5 -> 2.
 */
const WORKED_EXAMPLE_TTFTS_S = [0.25, 0.2, 0.13, 0.3, 0.4, 0.5, 0.45, 0.26, 3, 9, 12, 16, 20, 32];

describe('protobuf exposition', () => {
  it('carries every family of the text exposition, under the same name and type, with its help', async () => {
    const { telemetry, recorder } = setup('both');
    recorder.finished(recorder.requestAttributes('chat', 'm'), summary(150));
    const text = parsePrometheusText(await telemetry.scrape());
    const decoded = await families(telemetry);
    // A family without samples (no GC yet) is left out, as client_golang leaves it out.
    const sampled = [...text.values()].filter((f) => f.metrics.length > 0).map((f) => f.name);
    expect(decoded.map((f) => f.name).sort()).toEqual(sampled.sort());
    for (const family of decoded) {
      const textFamily = text.get(family.name);
      expect(family.type, family.name).toBe(textFamily?.type);
      expect(family.help, family.name).not.toBe('');
    }
    expect(decoded.find((f) => f.name === METRICS.ttft.promName)?.help).toBe(METRICS.ttft.description);
    const requests = decoded.find((f) => f.name === 'tokentap_requests_total');
    expect(requests?.metric[0]?.counter?.value).toBe(1);
    expect(requests?.metric[0]?.label).toEqual(
      expect.arrayContaining([{ name: 'workload', value: 'chat' }, { name: 'gen_ai_request_model', value: 'm' }, { name: 'outcome', value: 'completed' }]),
    );
  });

  it('encodes the specification\'s worked example: schema, zero bucket, one span [-2, 8] and deltas [3, 2, -5, 0, 1, -1, 3, -1]', async () => {
    const { telemetry, recorder } = setup('both', { schema: 0, maxBuckets: 160, zeroThreshold: 2 ** -128, maxZeroThreshold: 2 ** -128 });
    const attributes = recorder.requestAttributes('chat', 'm');
    for (const ttft of WORKED_EXAMPLE_TTFTS_S) recorder.finished(attributes, summary(ttft * 1000));
    recorder.finished(attributes, summary(0)); // zero bucket
    const ttft = (await families(telemetry)).find((f) => f.name === 'gen_ai_server_time_to_first_token_seconds');
    expect(ttft?.type).toBe('HISTOGRAM');
    const h = ttft?.metric[0]?.histogram as Record<string, unknown>;
    expect(h.sample_count).toBe(WORKED_EXAMPLE_TTFTS_S.length + 1);
    expect(h.sample_sum).toBeCloseTo(WORKED_EXAMPLE_TTFTS_S.reduce((a, b) => a + b, 0), 9);
    expect(h.schema).toBe(0);
    expect(h.zero_threshold).toBe(2 ** -128);
    expect(h.zero_count).toBe(1);
    // Gaps of 1 and 2 empty buckets are written as zero buckets (client_golang's choice): the
    // specification's third representation.
    expect(h.positive_span).toEqual([{ offset: -2, length: 8 }]);
    expect(h.positive_delta).toEqual([3, 2, -5, 0, 1, -1, 3, -1]);
    expect(h.negative_span ?? []).toEqual([]);
    // The classic buckets beside them: cumulative counts at 0.125, 0.25, 0.5, 1 (+Inf implied by the count).
    expect(h.bucket).toEqual([
      { cumulative_count: 1, upper_bound: 0.125 },
      { cumulative_count: 4, upper_bound: 0.25 },
      { cumulative_count: 9, upper_bound: 0.5 },
      { cumulative_count: 9, upper_bound: 1 },
    ]);
  });

  it('leaves the text exposition of the request metrics the same in every mode', async () => {
    const texts = await Promise.all(
      (['classic', 'native', 'both'] as const).map(async (mode) => {
        const { telemetry, recorder } = setup(mode);
        const attributes = recorder.requestAttributes('chat', 'm');
        for (const ttft of WORKED_EXAMPLE_TTFTS_S) recorder.finished(attributes, summary(ttft * 1000));
        recorder.interTokenSeries(attributes).record(30, 2);
        // Only tokentap's own lines: process metrics (heap, CPU) differ from one scrape to the next.
        return (await telemetry.scrape()).split('\n').filter((line) => !/^(# (HELP|TYPE) )?(process_|nodejs_)/.test(line)).join('\n');
      }),
    );
    expect(texts[0]).toContain('gen_ai_server_time_to_first_token_seconds_bucket');
    expect(texts[1]).toBe(texts[0]);
    expect(texts[2]).toBe(texts[0]);
  });

  it('leaves the classic buckets out with `native`, and the native fields out with `classic`', async () => {
    const native = setup('native');
    const classic = setup('classic');
    for (const { recorder } of [native, classic]) recorder.finished(recorder.requestAttributes('chat', 'm'), summary(150));
    const nativeTtft = (await families(native.telemetry)).find((f) => f.name === 'gen_ai_server_time_to_first_token_seconds')?.metric[0]?.histogram ?? {};
    const classicTtft = (await families(classic.telemetry)).find((f) => f.name === 'gen_ai_server_time_to_first_token_seconds')?.metric[0]?.histogram ?? {};
    expect(nativeTtft.bucket ?? []).toEqual([]);
    expect(nativeTtft.schema).toBe(3);
    // 0.15 s at schema 3: 2^(-22/8) = 0.1487 < 0.15 <= 2^(-21/8) = 0.1622, index -21.
    expect(nativeTtft.positive_span).toEqual([{ offset: -21, length: 1 }]);
    expect(nativeTtft.positive_delta).toEqual([1]);
    expect(classicTtft.schema).toBeUndefined();
    expect(classicTtft.positive_span ?? []).toEqual([]);
    expect((classicTtft.bucket as unknown[]).length).toBe(4);
  });

  it('keeps the same native buckets, count and sum when OTLP metrics are pushed too', async () => {
    const withOtlp = setup('both', { schema: 0, maxBuckets: 160, zeroThreshold: 2 ** -128, maxZeroThreshold: 2 ** -128 }, true);
    const direct = setup('both', { schema: 0, maxBuckets: 160, zeroThreshold: 2 ** -128, maxZeroThreshold: 2 ** -128 });
    for (const { recorder } of [withOtlp, direct]) {
      const attributes = recorder.requestAttributes('chat', 'm');
      for (const ttft of WORKED_EXAMPLE_TTFTS_S) recorder.finished(attributes, summary(ttft * 1000));
      const itl = recorder.interTokenSeries(attributes);
      itl.record(20, 1);
      itl.record(90, 3);
    }
    for (const name of ['gen_ai_server_time_to_first_token_seconds', 'tokentap_inter_token_latency_seconds', 'tokentap_inter_chunk_latency_seconds']) {
      const [otlpH, directH] = await Promise.all([withOtlp, direct].map(async ({ telemetry }) => (await families(telemetry)).find((f) => f.name === name)?.metric[0]?.histogram ?? {}));
      expect(otlpH?.positive_span, name).toBeDefined();
      expect(otlpH, name).toEqual(directH);
    }
  });

  it('marks a native histogram with no bucket populated by a no-op span, so it is not read as a classic one', async () => {
    const { telemetry, recorder } = setup('native', { ...NATIVE_DEFAULTS, zeroThreshold: 0, maxZeroThreshold: 0 });
    recorder.finished(recorder.requestAttributes('chat', 'm'), summary(0));
    const h = (await families(telemetry)).find((f) => f.name === 'gen_ai_server_time_to_first_token_seconds')?.metric[0]?.histogram ?? {};
    expect(h.zero_count).toBe(1);
    expect(h.positive_span).toEqual([{ offset: 0, length: 0 }]);
  });
});

describe('label values in the protobuf exposition', () => {
  it('are valid UTF-8 even for an attribute value with an unpaired surrogate (U+FFFD in its place, as the text exposition prints it)', async () => {
    const { telemetry, recorder } = setup('both');
    // ModelLabels keeps such names out of labels; this is the exposition's own guard behind it.
    recorder.finished(recorder.requestAttributes('chat', 'x\ud800y'), summary(0.2));
    const bytes = Buffer.from(await telemetry.scrapeProtobuf());
    expect(bytes.includes(Buffer.from([0xed, 0xa0, 0x80]))).toBe(false);
    const values = (await families(telemetry)).flatMap((f) => f.metric.flatMap((m) => (m as unknown as { label: Array<{ value: string }> }).label.map((l) => l.value)));
    expect(values).toContain('x\ufffdy');
    // The text exposition's string keeps the surrogate; written as UTF-8 (the HTTP answer) it is U+FFFD too.
    expect(Buffer.from(await telemetry.scrape()).toString('utf8')).toContain('gen_ai_request_model="x\ufffdy"');
  });
});

describe('/metrics content negotiation', () => {
  it('serves protobuf to Prometheus with native histograms on and text to Prometheus without', async () => {
    const { telemetry, recorder } = setup('both');
    recorder.finished(recorder.requestAttributes('chat', 'm'), summary(150));
    const app = createAdminServer({ telemetry, upstream: new URL('http://127.0.0.1:1'), upstreamHealthPath: '/health' });
    try {
      const proto = await app.inject({ method: 'GET', url: '/metrics', headers: { accept: PROMETHEUS_NATIVE_ACCEPT } });
      expect(proto.headers['content-type']).toBe(PROTOBUF_CONTENT_TYPE);
      expect(proto.headers.vary).toBe('Accept');
      const decoded = decodeDelimited(proto.rawPayload) as unknown as Family[];
      expect(decoded.some((f) => f.name === 'gen_ai_server_time_to_first_token_seconds')).toBe(true);
      const text = await app.inject({ method: 'GET', url: '/metrics', headers: { accept: PROMETHEUS_TEXT_ACCEPT } });
      expect(text.headers['content-type']).toMatch(/^text\/plain; version=0\.0\.4/);
      expect(parsePrometheusText(text.payload).has('gen_ai_server_time_to_first_token_seconds')).toBe(true);
    } finally {
      await app.close();
    }
  });

  it.each([
    [undefined, false],
    ['*/*', false],
    [PROMETHEUS_NATIVE_ACCEPT, true],
    [PROMETHEUS_TEXT_ACCEPT, false],
    ['application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited', true],
    ['application/vnd.google.protobuf; proto="io.prometheus.client.MetricFamily"; encoding=delimited; q=0.5, text/plain; q=0.9', false],
    ['application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=text', false],
    ['application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0', false],
    ['application/vnd.google.protobuf;proto=other.Message;encoding=delimited', false],
  ])('Accept %j: protobuf %s', (accept, expected) => {
    expect(wantsProtobuf(accept)).toBe(expected);
  });
});
