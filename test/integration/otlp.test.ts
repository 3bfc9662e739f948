import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startOtlpReceiver } from '../helpers/otlp-receiver.js';
import { exchange, startReplayUpstream, type SeenRequest } from '../helpers/replay-upstream.js';
import { startServeProcess } from '../helpers/serve-process.js';
import { eventually, startTestSidecar } from '../helpers/sidecar.js';
import { chatChunk, sse } from '../helpers/tap-harness.js';

/**
 * OpenTelemetry export, end to end: the built CLI pushes to an OTLP/HTTP receiver written here, in
 * front of a replay upstream that records the `traceparent` it was sent.
 */

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** OTLP's SPAN_KIND_CLIENT (opentelemetry-proto trace.proto). */
const SPAN_KIND_CLIENT = 3;
const CLIENT_TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const CLIENT_SPAN_ID = '00f067aa0ba902b7';

const STREAM = sse(
  chatChunk({ role: 'assistant', content: '' }),
  chatChunk({ content: 'Hel' }),
  chatChunk({ content: 'lo' }),
  chatChunk({}, {}, 'stop'),
  { id: 'chatcmpl-1', object: 'chat.completion.chunk', model: 'm', choices: [], usage: { prompt_tokens: 7, completion_tokens: 2, total_tokens: 9 } },
  '[DONE]',
);

function chat(url: string, headers: Record<string, string> = {}) {
  return exchange(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ model: 'llama-3-8b', stream: true, messages: [{ role: 'user', content: 'hi' }] }),
  });
}

/** Every value of `name` the upstream received, in order. */
function headerValues(request: SeenRequest, name: string): string[] {
  const values: string[] = [];
  for (let i = 0; i < request.rawHeaders.length; i += 2) if (request.rawHeaders[i]!.toLowerCase() === name) values.push(request.rawHeaders[i + 1]!);
  return values;
}

function parseTraceparent(value: string) {
  const match = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/.exec(value);
  if (!match) throw new Error(`not a W3C traceparent: ${value}`);
  return { traceId: match[1]!, parentId: match[2]!, flags: match[3]! };
}

async function startStack(env: Record<string, string>, args: readonly string[] = []) {
  const upstream = await startReplayUpstream(() => ({ chunks: STREAM, gapMs: 15 }));
  cleanups.push(() => upstream.close());
  const receiver = await startOtlpReceiver();
  cleanups.push(() => receiver.close());
  const serve = await startServeProcess(upstream.url, args, {
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
    OTEL_SERVICE_NAME: 'tokentap-otlp-test',
    OTEL_RESOURCE_ATTRIBUTES: 'k8s.pod.name=pod-a,deployment.environment.name=test%20lab',
    OTEL_METRIC_EXPORT_INTERVAL: '300',
    OTEL_BSP_SCHEDULE_DELAY: '100',
    ...env,
  });
  cleanups.push(serve.kill);
  return { upstream, receiver, serve };
}

describe('OpenTelemetry export over OTLP/HTTP', () => {
  it('pushes metrics under their semantic-convention names and one CLIENT span per request whose trace the upstream continues', async () => {
    const { upstream, receiver, serve } = await startStack({ OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' });

    const first = await chat(serve.proxy);
    const second = await chat(serve.proxy, { traceparent: `00-${CLIENT_TRACE_ID}-${CLIENT_SPAN_ID}-01`, tracestate: 'vendor=1' });
    expect([first.ended, second.ended]).toEqual(['clean', 'clean']);
    expect(first.body.equals(Buffer.concat(STREAM))).toBe(true);

    // Metrics arrive on the periodic export, while the sidecar runs.
    const points = await eventually(
      'a metrics export with both requests',
      () => receiver.dataPoints(true),
      (p) => p.some((x) => x.metric === 'tokentap.requests' && x.value === 2),
      15_000,
    );
    const names = new Set(points.map((p) => p.metric));
    for (const name of ['gen_ai.server.time_to_first_token', 'gen_ai.server.time_per_output_token', 'gen_ai.server.request.duration', 'gen_ai.client.token.usage', 'tokentap.inter_token_latency', 'tokentap.requests']) {
      expect(names, name).toContain(name);
    }
    expect(names).not.toContain('gen_ai_server_time_to_first_token_seconds');
    const ttft = points.find((p) => p.metric === 'gen_ai.server.time_to_first_token')!;
    expect(ttft).toMatchObject({ value: 2, attributes: { workload: 'default', 'gen_ai.request.model': 'llama-3-8b' } });
    expect(ttft.resource).toMatchObject({ 'service.name': 'tokentap-otlp-test', 'k8s.pod.name': 'pod-a', 'deployment.environment.name': 'test lab' });

    await eventually('two spans', () => receiver.spans(), (s) => s.length >= 2, 15_000);
    serve.child.kill('SIGTERM');
    expect((await serve.exit).code).toBe(0);
    expect(serve.logs().filter((l) => l.msg === 'final OTLP export incomplete')).toEqual([]);
    const spans = receiver.spans();
    expect(spans).toHaveLength(2);

    // Request 1: no traceparent from the client, so a new trace; the upstream's parent is our span.
    const [seenFirst, seenSecond] = upstream.seen;
    expect(headerValues(seenFirst!, 'traceparent')).toHaveLength(1);
    const upstreamFirst = parseTraceparent(headerValues(seenFirst!, 'traceparent')[0]!);
    const spanFirst = spans.find((s) => s.traceId === upstreamFirst.traceId)!;
    expect(spanFirst).toBeDefined();
    expect(spanFirst.spanId).toBe(upstreamFirst.parentId);
    expect(spanFirst.parentSpanId).toBe('');
    expect(spanFirst.kind).toBe(SPAN_KIND_CLIENT);
    expect(spanFirst.name).toBe('chat llama-3-8b');
    expect(spanFirst.attributes).toMatchObject({
      'gen_ai.operation.name': 'chat',
      'gen_ai.request.model': 'llama-3-8b',
      'gen_ai.usage.input_tokens': 7,
      'gen_ai.usage.output_tokens': 2,
      'http.request.method': 'POST',
      'http.response.status_code': 200,
      'url.path': '/v1/chat/completions',
      'server.address': '127.0.0.1',
      'server.port': Number(new URL(upstream.url).port),
      'tokentap.workload': 'default',
      'tokentap.outcome': 'completed',
    });
    expect(spanFirst.attributes['error.type']).toBeUndefined();
    expect(spanFirst.events.map((e) => e.name)).toEqual(['tokentap.first_token', 'tokentap.end']);
    const [firstToken, end] = spanFirst.events.map((e) => BigInt(e.timeUnixNano));
    expect(firstToken! > BigInt(spanFirst.startTimeUnixNano)).toBe(true);
    expect(firstToken! < end!).toBe(true);
    expect(end! <= BigInt(spanFirst.endTimeUnixNano)).toBe(true);
    expect(spanFirst.resource).toMatchObject({ 'service.name': 'tokentap-otlp-test', 'k8s.pod.name': 'pod-a' });

    // Request 2: the client's trace continues through our span to the upstream, tracestate kept.
    expect(headerValues(seenSecond!, 'traceparent')).toHaveLength(1);
    const upstreamSecond = parseTraceparent(headerValues(seenSecond!, 'traceparent')[0]!);
    expect(upstreamSecond.traceId).toBe(CLIENT_TRACE_ID);
    expect(upstreamSecond.parentId).not.toBe(CLIENT_SPAN_ID);
    expect(headerValues(seenSecond!, 'tracestate')).toEqual(['vendor=1']);
    const spanSecond = spans.find((s) => s.traceId === CLIENT_TRACE_ID)!;
    expect(spanSecond.spanId).toBe(upstreamSecond.parentId);
    expect(spanSecond.parentSpanId).toBe(CLIENT_SPAN_ID);
  }, 60_000);

  it('puts the engine split, the first answer token and goodput on the span (vLLM reasoning stream; llama.cpp without a queue figure)', async () => {
    const vllmStream = sse(
      chatChunk({ role: 'assistant', content: '' }),
      chatChunk({ reasoning_content: 'think' }),
      chatChunk({ content: 'Hel' }),
      chatChunk({ content: 'lo' }),
      chatChunk({}, {}, 'stop'),
      { id: 'chatcmpl-1', object: 'chat.completion.chunk', model: 'm', choices: [], usage: { prompt_tokens: 7, completion_tokens: 3, total_tokens: 10 }, metrics: { queue_time_ms: 4, time_to_first_token_ms: 3, generation_time_ms: 20 } },
      '[DONE]',
    );
    const llamaStream = sse(
      { content: 'a', stop: false, tokens_predicted: 1, tokens_evaluated: 4 },
      { content: '', stop: true, tokens_predicted: 1, tokens_evaluated: 4, timings: { prompt_ms: 5, predicted_ms: 1 } },
    );
    const upstream = await startReplayUpstream((request) => ({ chunks: request.url === '/completion' ? llamaStream : vllmStream, gapMs: 15 }));
    cleanups.push(() => upstream.close());
    const receiver = await startOtlpReceiver();
    cleanups.push(() => receiver.close());
    const dir = mkdtempSync(join(tmpdir(), 'tokentap-otlp-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    writeFileSync(join(dir, 'tokentap.yaml'), ['workloads:', '  - name: chat', '    slo: { objective: 0.99, ttft: 30s, itl: 30s, e2e: 60s }', ''].join('\n'));
    const serve = await startServeProcess(upstream.url, ['--config', join(dir, 'tokentap.yaml')], {
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_BSP_SCHEDULE_DELAY: '100',
    });
    cleanups.push(serve.kill);

    expect((await chat(serve.proxy)).ended).toBe('clean');
    const native = await exchange(`${serve.proxy}/completion`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"prompt":"hi","stream":true}' });
    expect(native.ended).toBe('clean');
    const spans = await eventually('two spans', () => receiver.spans(), (s) => s.length >= 2, 15_000);

    const vllm = spans.find((s) => s.attributes['url.path'] === '/v1/chat/completions')!;
    const a = vllm.attributes as Record<string, number | boolean>;
    expect(a).toMatchObject({ 'tokentap.engine.ttft_s': 0.007, 'tokentap.engine.queue_s': 0.004, 'tokentap.engine.prefill_s': 0.003, 'tokentap.goodput': true });
    expect(a['tokentap.outside_engine.ttft_s']).toBeCloseTo((a['tokentap.ttft_s'] as number) - 0.007, 9);
    expect(a).not.toHaveProperty('tokentap.queue_or_outside_engine.ttft_s');
    // Reasoning came 15 ms before the answer: the answer token is its own event, after the first token.
    expect(a['tokentap.ttft_answer_s']).toBeGreaterThan(a['tokentap.ttft_s'] as number);
    expect(vllm.events.map((e) => e.name)).toEqual(['tokentap.first_token', 'tokentap.first_answer_token', 'tokentap.end']);

    const llama = spans.find((s) => s.attributes['url.path'] === '/completion')!;
    const b = llama.attributes as Record<string, number | boolean>;
    expect(b).toMatchObject({ 'tokentap.engine.ttft_s': 0.005, 'tokentap.engine.prefill_s': 0.005 });
    expect(b['tokentap.queue_or_outside_engine.ttft_s']).toBeCloseTo((b['tokentap.ttft_s'] as number) - 0.005, 9);
    expect(b).not.toHaveProperty('tokentap.outside_engine.ttft_s');
    expect(b).not.toHaveProperty('tokentap.engine.queue_s');
    // The workload matches every request, so the native stream has a goodput value too.
    expect(typeof b['tokentap.goodput']).toBe('boolean');
  }, 60_000);

  it('speaks http/protobuf by default', async () => {
    const { upstream, receiver, serve } = await startStack({});
    expect((await chat(serve.proxy)).ended).toBe('clean');
    serve.child.kill('SIGTERM');
    expect((await serve.exit).code).toBe(0);

    const traceId = parseTraceparent(headerValues(upstream.seen[0]!, 'traceparent')[0]!).traceId;
    const traces = receiver.exports.filter((e) => e.path === '/v1/traces');
    const metrics = receiver.exports.filter((e) => e.path === '/v1/metrics');
    expect(traces.length).toBeGreaterThan(0);
    expect(metrics.length).toBeGreaterThan(0);
    for (const e of [...traces, ...metrics]) expect(e.contentType).toBe('application/x-protobuf');
    // Protobuf carries trace ids as 16 raw bytes and names as UTF-8 strings.
    expect(traces.some((e) => e.body.includes(Buffer.from(traceId, 'hex')))).toBe(true);
    expect(metrics.some((e) => e.body.includes(Buffer.from('gen_ai.server.time_to_first_token')))).toBe(true);
  }, 60_000);

  it('logs a failing export once with its endpoint and cause, counts every failure, and logs the recovery once', async () => {
    const { receiver, serve } = await startStack({ OTEL_TRACES_EXPORTER: 'none' });
    // 400: a collector refusing the batch (not retried by the exporter, so each interval fails once).
    receiver.respondWith(400);
    const failing = await eventually('the failing log line', () => serve.logs().filter((l) => l.msg === 'OTLP export failing'), (l) => l.length > 0, 20_000);
    expect(failing[0]).toMatchObject({ level: 40, signal: 'metrics', endpoint: `${receiver.url}/v1/metrics` });
    expect(String(failing[0]?.['cause'])).toMatch(/Bad Request|400/);
    const counted = await eventually(
      'two failures counted on /metrics',
      async () => /^tokentap_otlp_export_failures_total\{signal="metrics"\} (\d+)/m.exec(await (await fetch(`${serve.admin}/metrics`)).text()),
      (match) => match !== null && Number(match[1]) >= 2,
      20_000,
    );
    expect(Number(counted?.[1])).toBeGreaterThanOrEqual(2);
    receiver.respondWith(200);
    await eventually('the recovery log line', () => serve.logs().filter((l) => l.msg === 'OTLP export recovered'), (l) => l.length > 0, 20_000);
    // Several intervals failed, one line said so; one line said it is over.
    expect(serve.logs().filter((l) => l.msg === 'OTLP export failing')).toHaveLength(1);
    expect(serve.logs().filter((l) => l.msg === 'OTLP export recovered')).toEqual([expect.objectContaining({ level: 30, signal: 'metrics', failedExports: expect.any(Number) })]);
  }, 60_000);

  it('without OTLP configured adds no traceparent and passes the client\'s through untouched', async () => {
    const upstream = await startReplayUpstream(() => ({ chunks: STREAM }));
    cleanups.push(() => upstream.close());
    const sidecar = await startTestSidecar(upstream.url);
    cleanups.push(() => sidecar.close());
    await chat(sidecar.proxyUrl);
    await chat(sidecar.proxyUrl, { traceparent: `00-${CLIENT_TRACE_ID}-${CLIENT_SPAN_ID}-01` });
    expect(headerValues(upstream.seen[0]!, 'traceparent')).toEqual([]);
    expect(headerValues(upstream.seen[1]!, 'traceparent')).toEqual([`00-${CLIENT_TRACE_ID}-${CLIENT_SPAN_ID}-01`]);
  });

  it('pushes latency histograms as base-2 exponential histograms by default, with the native-histogram bucket limit', async () => {
    const { receiver, serve } = await startStack({ OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' });
    for (let i = 0; i < 3; i++) await chat(serve.proxy);
    const points = await eventually(
      'the requests exported',
      () => receiver.dataPoints(true),
      (p) => p.some((x) => x.metric === 'tokentap.requests' && x.value === 3),
      15_000,
    );
    const itl = points.find((p) => p.metric === 'tokentap.inter_token_latency');
    expect(itl?.kind).toBe('exponentialHistogram');
    const buckets = itl?.exponential?.bucketCounts ?? [];
    expect(buckets.length).toBeGreaterThan(0);
    expect(buckets.length).toBeLessThanOrEqual(160);
    // Every per-token sample is in a bucket (or the zero bucket): the counts add up to the count.
    expect(buckets.reduce((a, b) => a + b, 0) + (itl?.exponential?.zeroCount ?? 0)).toBe(itl?.value);
    expect(points.find((p) => p.metric === 'tokentap.requests')?.kind).toBe('sum');
  });

  it('pushes delta counters and histograms when OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE=delta, and the last requests in the final export at SIGTERM', async () => {
    // An interval longer than the test: only the final export at shutdown carries the requests.
    const { receiver, serve } = await startStack({ OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', OTEL_METRIC_EXPORT_INTERVAL: '600000', OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE: 'delta' });
    for (let i = 0; i < 2; i++) await chat(serve.proxy);
    serve.child.kill('SIGTERM');
    expect((await serve.exit).code).toBe(0);
    const points = receiver.dataPoints();
    const DELTA = 1;
    const CUMULATIVE = 2;
    const requests = points.filter((p) => p.metric === 'tokentap.requests');
    expect(requests.map((p) => [p.value, p.temporality])).toEqual([[2, DELTA]]);
    // Each stream: two content tokens 15 ms apart, one inter-token gap.
    const itl = points.find((p) => p.metric === 'tokentap.inter_token_latency');
    expect([itl?.kind, itl?.value, itl?.temporality]).toEqual(['exponentialHistogram', 2, DELTA]);
    expect(points.find((p) => p.metric === 'tokentap.tokens' && p.attributes['gen_ai.token.type'] === 'output')?.value).toBe(4);
    // An up-down counter stays cumulative under the delta preference, as the exporter defines it.
    expect(points.find((p) => p.metric === 'tokentap.requests.in_flight')?.temporality).toBe(CUMULATIVE);
  });

  it('pushes the classic explicit-bucket histograms with metrics.otlp_histograms: explicit', async () => {
    const { mkdtemp, writeFile, rm } = await import('node:fs/promises');
    const { join } = await import('node:path');
    const { tmpdir } = await import('node:os');
    const dir = await mkdtemp(join(tmpdir(), 'tokentap-otlp-'));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    await writeFile(join(dir, 'tokentap.yaml'), 'metrics:\n  otlp_histograms: explicit\n');
    const { receiver, serve } = await startStack({ OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' }, ['--config', join(dir, 'tokentap.yaml')]);
    await chat(serve.proxy);
    const points = await eventually('the request exported', () => receiver.dataPoints(true), (p) => p.some((x) => x.metric === 'tokentap.requests' && x.value === 1), 15_000);
    expect(points.find((p) => p.metric === 'gen_ai.server.time_to_first_token')?.kind).toBe('histogram');
  });
});
