import { afterEach, describe, expect, it } from 'vitest';
import { startOtlpReceiver } from '../helpers/otlp-receiver.js';
import { RawClient } from '../helpers/raw-http.js';
import { startReplayUpstream, type SeenRequest } from '../helpers/replay-upstream.js';
import { startServeProcess } from '../helpers/serve-process.js';
import { eventually } from '../helpers/sidecar.js';
import { chatChunk, sse } from '../helpers/tap-harness.js';

/**
 * Trace context from a hostile client (docs/opentelemetry.md#trace-context-from-clients): what the
 * upstream receives, byte for byte, and what reaches the span, for each malformed, oversized or
 * flag-playing `traceparent`, `tracestate` and `baggage` the built CLI is sent on a raw socket.
 */

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const STREAM = sse(chatChunk({ content: 'Hi' }), '[DONE]');
const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const SPAN_ID = '00f067aa0ba902b7';
const BODY = JSON.stringify({ model: 'm', stream: true, messages: [] });

async function startStack(env: Record<string, string> = {}) {
  const upstream = await startReplayUpstream(() => ({ chunks: STREAM }));
  cleanups.push(() => upstream.close());
  const receiver = await startOtlpReceiver();
  cleanups.push(() => receiver.close());
  const serve = await startServeProcess(upstream.url, [], {
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${receiver.url}/v1/traces`,
    OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
    OTEL_BSP_SCHEDULE_DELAY: '50',
    ...env,
  });
  cleanups.push(serve.kill);
  return { upstream, receiver, serve };
}

/** Sends one chat request with `headerLines` on a raw socket; returns the response's status line. */
async function chatWith(proxy: string, headerLines: readonly string[]): Promise<string> {
  const client = await RawClient.connect(proxy);
  try {
    client.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: m\r\nContent-Type: application/json\r\nContent-Length: ${BODY.length}\r\nConnection: close\r\n${headerLines.map((l) => `${l}\r\n`).join('')}\r\n${BODY}`);
    return (await client.readToClose()).split('\r\n')[0]!;
  } finally {
    client.close();
  }
}

/** The trace headers the upstream received, as [name, value] in order. */
function traceHeaders(request: SeenRequest): Array<[string, string]> {
  const found: Array<[string, string]> = [];
  for (let i = 0; i < request.rawHeaders.length; i += 2) {
    const name = request.rawHeaders[i]!.toLowerCase();
    if (name === 'traceparent' || name === 'tracestate' || name === 'baggage') found.push([name, request.rawHeaders[i + 1]!]);
  }
  return found;
}

describe('trace context from a hostile client', () => {
  it('starts a new trace, with no tracestate, for each malformed traceparent, and forwards only its own', async () => {
    const { upstream, receiver, serve } = await startStack();
    const malformed = [
      `ff-${TRACE_ID}-${SPAN_ID}-01`, // version ff is invalid (W3C Trace Context 3.2.2.1)
      `00-${'0'.repeat(32)}-${SPAN_ID}-01`, // all-zero trace id
      `00-${TRACE_ID}-${'0'.repeat(16)}-01`, // all-zero parent id
      `00-${TRACE_ID.toUpperCase()}-${SPAN_ID}-01`, // upper-case hex
      `00-${TRACE_ID}-${SPAN_ID}-01-extra`, // version 00 has exactly four fields
      `00-${TRACE_ID}-${SPAN_ID}`, // no flags
    ];
    for (const value of malformed) expect(await chatWith(serve.proxy, [`traceparent: ${value}`, 'tracestate: evil=1'])).toBe('HTTP/1.1 200 OK');
    // Two traceparent fields: Node joins them with ", ", which is no traceparent.
    expect(await chatWith(serve.proxy, [`traceparent: 00-${TRACE_ID}-${SPAN_ID}-01`, `traceparent: 00-${TRACE_ID}-${SPAN_ID}-01`])).toBe('HTTP/1.1 200 OK');

    const spans = await eventually('a span per request', () => receiver.spans(), (s) => s.length >= malformed.length + 1, 15_000);
    expect(spans).toHaveLength(malformed.length + 1);
    expect(upstream.seen).toHaveLength(malformed.length + 1);
    for (const seen of upstream.seen) {
      const headers = traceHeaders(seen);
      expect(headers).toHaveLength(1);
      const [, value] = headers[0]!;
      const own = /^00-([0-9a-f]{32})-([0-9a-f]{16})-01$/.exec(value)!;
      expect(own, value).not.toBeNull();
      expect(own[1]).not.toBe(TRACE_ID);
      const span = spans.find((s) => s.traceId === own[1])!;
      expect(span.spanId).toBe(own[2]);
      expect(span.parentSpanId).toBe('');
    }
  }, 60_000);

  it('keeps at most 32 tracestate members and 512 characters of a 512-member tracestate, forwards baggage untouched and puts neither into span attributes', async () => {
    const { upstream, receiver, serve } = await startStack();
    const members = Array.from({ length: 512 }, (_, i) => `k${i}=v${i}`);
    const baggage = 'user=alice,token=BAGGAGESECRET';
    expect(await chatWith(serve.proxy, [`traceparent: 00-${TRACE_ID}-${SPAN_ID}-01`, `tracestate: ${members.join(',')}`, `baggage: ${baggage}`])).toBe('HTTP/1.1 200 OK');
    const [span] = await eventually('the span', () => receiver.spans(), (s) => s.length >= 1, 15_000);
    const headers = traceHeaders(upstream.seen[0]!);
    expect(headers.map(([name]) => name).sort()).toEqual(['baggage', 'traceparent', 'tracestate']);
    expect(Object.fromEntries(headers)).toEqual({
      baggage,
      traceparent: `00-${TRACE_ID}-${span!.spanId}-01`,
      tracestate: members.slice(0, 32).join(','),
    });
    expect(span!.parentSpanId).toBe(SPAN_ID);
    expect(JSON.stringify(receiver.exports.map((e) => e.json))).not.toContain('BAGGAGESECRET');
    expect(Object.keys(span!.attributes).filter((k) => !/^(gen_ai|http|url|server|tokentap)\./.test(k))).toEqual([]);
  }, 60_000);

  it('answers a 1 MB tracestate 431 and sends nothing upstream', async () => {
    const { upstream, serve } = await startStack();
    expect(await chatWith(serve.proxy, [`traceparent: 00-${TRACE_ID}-${SPAN_ID}-01`, `tracestate: a=${'x'.repeat(1 << 20)}`])).toBe('HTTP/1.1 431 Request Header Fields Too Large');
    expect(upstream.seen).toEqual([]);
  }, 60_000);

  it('lets a client\'s unsampled flag turn its span off under the default sampler, and not under OTEL_TRACES_SAMPLER=always_on', async () => {
    const unsampled = `traceparent: 00-${TRACE_ID}-${SPAN_ID}-00`;
    const byDefault = await startStack();
    expect(await chatWith(byDefault.serve.proxy, [unsampled])).toBe('HTTP/1.1 200 OK');
    expect(await chatWith(byDefault.serve.proxy, [])).toBe('HTTP/1.1 200 OK');
    // The second request's span is exported; the first one's never was (the same batch would hold it).
    await eventually('the sampled span', () => byDefault.receiver.spans(), (s) => s.length >= 1, 15_000);
    byDefault.serve.child.kill('SIGTERM');
    expect((await byDefault.serve.exit).code).toBe(0);
    expect(byDefault.receiver.spans().map((s) => s.traceId)).not.toContain(TRACE_ID);
    expect(traceHeaders(byDefault.upstream.seen[0]!)[0]![1]).toMatch(new RegExp(`^00-${TRACE_ID}-[0-9a-f]{16}-00$`));

    const alwaysOn = await startStack({ OTEL_TRACES_SAMPLER: 'always_on' });
    expect(await chatWith(alwaysOn.serve.proxy, [unsampled])).toBe('HTTP/1.1 200 OK');
    const [span] = await eventually('the span', () => alwaysOn.receiver.spans(), (s) => s.length >= 1, 15_000);
    expect(span).toMatchObject({ traceId: TRACE_ID, parentSpanId: SPAN_ID });
    expect(traceHeaders(alwaysOn.upstream.seen[0]!)).toEqual([['traceparent', `00-${TRACE_ID}-${span!.spanId}-01`]]);
  }, 60_000);

  it('does not let a client\'s sampled flag force a span out under OTEL_TRACES_SAMPLER=traceidratio, as it does under parentbased_traceidratio', async () => {
    const { upstream, receiver, serve } = await startStack({ OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '0' });
    for (let i = 0; i < 3; i++) expect(await chatWith(serve.proxy, [`traceparent: 00-${TRACE_ID}-${SPAN_ID}-01`])).toBe('HTTP/1.1 200 OK');
    serve.child.kill('SIGTERM');
    expect((await serve.exit).code).toBe(0);
    expect(receiver.spans()).toEqual([]);
    for (const seen of upstream.seen) expect(traceHeaders(seen)[0]![1]).toMatch(new RegExp(`^00-${TRACE_ID}-[0-9a-f]{16}-00$`));

    // The parent-based variant follows the client instead: its -01 exports the span at a ratio of 0.
    const parentBased = await startStack({ OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0' });
    expect(await chatWith(parentBased.serve.proxy, [`traceparent: 00-${TRACE_ID}-${SPAN_ID}-01`])).toBe('HTTP/1.1 200 OK');
    const [followed] = await eventually('the span the client asked for', () => parentBased.receiver.spans(), (s) => s.length >= 1, 15_000);
    expect(followed).toMatchObject({ traceId: TRACE_ID, parentSpanId: SPAN_ID });
  }, 60_000);

  it('continues a future-version traceparent by its first four fields', async () => {
    const { upstream, receiver, serve } = await startStack();
    expect(await chatWith(serve.proxy, [`traceparent: cc-${TRACE_ID}-${SPAN_ID}-01-more`, 'tracestate: a=1'])).toBe('HTTP/1.1 200 OK');
    const [span] = await eventually('the span', () => receiver.spans(), (s) => s.length >= 1, 15_000);
    expect(span).toMatchObject({ traceId: TRACE_ID, parentSpanId: SPAN_ID });
    expect(traceHeaders(upstream.seen[0]!)).toEqual([
      ['traceparent', `00-${TRACE_ID}-${span!.spanId}-01`],
      ['tracestate', 'a=1'],
    ]);
  }, 60_000);
});
