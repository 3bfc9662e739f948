import http from 'node:http';
import http2 from 'node:http2';
import { afterEach, describe, expect, it } from 'vitest';
import { splitEvents, vllmStream } from '../helpers/fixtures.js';
import { encode, grpcFrame } from '../helpers/grpc-frames.js';
import { connectH2, h2Request, startH2cReplayUpstream, type H2Script } from '../helpers/h2c-upstream.js';
import { histogram, scrape, sumValues } from '../helpers/prometheus-text.js';
import { startReplayUpstream } from '../helpers/replay-upstream.js';
import { eventually, startTestSidecar } from '../helpers/sidecar.js';

/**
 * HTTP/2 cleartext (prior knowledge) through tokentap to an h2c upstream (issue 24 item 1):
 * Node's own http2 client and server on both sides, so what is asserted is what a real HTTP/2 peer
 * receives, byte for byte, and what the upstream sees of each stream (its fields, its resets).
 */

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function setUp(script: (request: Parameters<Parameters<typeof startH2cReplayUpstream>[0]>[0]) => H2Script, config = '') {
  const upstream = await startH2cReplayUpstream(script);
  cleanups.push(() => upstream.close());
  const sidecar = await startTestSidecar(upstream.url, `upstream_protocol: h2c\n${config}`);
  cleanups.push(() => sidecar.close());
  const client = connect(sidecar.proxyUrl);
  return { upstream, sidecar, client };
}

function connect(url: string): http2.ClientHttp2Session {
  return connectH2(url, cleanups);
}

const CHAT = { ':method': 'POST', ':path': '/v1/chat/completions', 'content-type': 'application/json' };
const CHAT_BODY = Buffer.from(JSON.stringify({ model: 'tiny', stream: true, messages: [{ role: 'user', content: 'Hi' }] }));

function requestLines(logs: ReadonlyArray<Record<string, unknown>>) {
  return logs.filter((line) => line.msg === 'request');
}

describe('SSE over HTTP/2 is relayed byte for byte and measured exactly as over HTTP/1.1', () => {
  it('gives node:http2 the vLLM capture byte for byte, as the upstream sends it directly, with the same tokens, events and ITL samples as the HTTP/1.1 path', async () => {
    const events = splitEvents(vllmStream('chat.sse'));
    const { upstream, sidecar, client } = await setUp(() => ({ chunks: events, gapMs: 2 }));
    // The same capture from an HTTP/1.1 upstream through an HTTP/1.1 tokentap: the reference measurement.
    const h1Upstream = await startReplayUpstream(() => ({ chunks: events, gapMs: 2 }));
    cleanups.push(() => h1Upstream.close());
    const h1Sidecar = await startTestSidecar(h1Upstream.url);
    cleanups.push(() => h1Sidecar.close());

    const direct = await h2Request(connect(upstream.url), CHAT, CHAT_BODY);
    const proxied = await h2Request(client, CHAT, CHAT_BODY);
    const h1Body = await new Promise<Buffer>((resolve, reject) => {
      const req = http.request(`${h1Sidecar.proxyUrl}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' } }, (res) => {
        const parts: Buffer[] = [];
        res.on('data', (d: Buffer) => parts.push(d));
        res.on('end', () => resolve(Buffer.concat(parts)));
      });
      req.on('error', reject);
      req.end(CHAT_BODY);
    });

    expect(proxied.head[':status']).toBe(200);
    expect(proxied.rstCode).toBe(http2.constants.NGHTTP2_NO_ERROR);
    expect(proxied.body.equals(vllmStream('chat.sse'))).toBe(true);
    expect(proxied.body.equals(direct.body)).toBe(true);
    expect(h1Body.equals(proxied.body)).toBe(true);
    // The upstream saw the client's body byte for byte.
    expect(upstream.seen[1]?.body.equals(CHAT_BODY)).toBe(true);

    const [h2Line] = await eventually('the HTTP/2 request line', () => requestLines(sidecar.logs), (lines) => lines.length === 1);
    const [h1Line] = await eventually('the HTTP/1.1 request line', () => requestLines(h1Sidecar.logs), (lines) => lines.length === 1);
    const measured = (line: Record<string, unknown> | undefined) => ({
      status: line?.status,
      outcome: line?.outcome,
      model: line?.model,
      content_events: line?.content_events,
      counted_tokens: line?.counted_tokens,
      output_tokens: line?.output_tokens,
      input_tokens: line?.input_tokens,
      token_source: line?.token_source,
    });
    expect(measured(h2Line)).toEqual(measured(h1Line));
    expect(h2Line).toMatchObject({ outcome: 'completed', model: 'tiny' });
    expect(h2Line?.ttft_ms).toEqual(expect.any(Number));
    expect(Number(h2Line?.content_events)).toBeGreaterThan(1);

    const h2Metrics = await scrape(sidecar.adminUrl);
    const h1Metrics = await scrape(h1Sidecar.adminUrl);
    for (const name of ['tokentap_inter_token_latency_seconds', 'tokentap_time_to_first_token_seconds', 'tokentap_time_per_output_token_seconds']) {
      expect(histogram(h2Metrics, name).count, name).toBe(histogram(h1Metrics, name).count);
    }
    expect(histogram(h2Metrics, 'tokentap_inter_token_latency_seconds').count).toBeGreaterThan(0);
  });
});

describe('HTTP/2 fields: pseudo-header fields rebuilt, connection-specific fields dropped, trailers relayed', () => {
  it('sends the upstream :scheme http and the client`s :authority, :path and fields in order, with te: trailers kept for gRPC', async () => {
    const { upstream, client } = await setUp(() => ({ chunks: [Buffer.from('ok')] }));
    await h2Request(client, { ':method': 'POST', ':path': '/pkg.Service/Method?x=1', ':authority': 'engine.local', 'content-type': 'application/grpc', te: 'trailers', 'x-one': 'a', 'x-two': 'b' }, Buffer.from([0, 0, 0, 0, 0]));
    const seen = upstream.seen[0];
    expect(seen?.headers[':scheme']).toBe('http');
    expect(seen?.headers[':authority']).toBe('engine.local');
    expect(seen?.headers[':path']).toBe('/pkg.Service/Method?x=1');
    expect(seen?.headers.te).toBe('trailers');
    const names = (seen?.rawHeaders ?? []).filter((_, i) => i % 2 === 0);
    expect(names.filter((n) => !n.startsWith(':'))).toEqual(['content-type', 'te', 'x-one', 'x-two']);
  });

  it('relays the upstream`s trailers (gRPC status) after the body, and a trailers-only answer as a head with END_STREAM', async () => {
    const { client } = await setUp((request): H2Script =>
      request.headers[':path'] === '/only'
        ? { chunks: [], headOnly: true, headers: { 'content-type': 'application/grpc' }, trailers: { 'grpc-status': '14', 'grpc-message': 'unavailable' } }
        : { chunks: [Buffer.from([0, 0, 0, 0, 1, 7])], headers: { 'content-type': 'application/grpc' }, trailers: { 'grpc-status': '0', 'x-trailer': 'yes' } },
    );
    const full = await h2Request(client, { ':method': 'POST', ':path': '/full', 'content-type': 'application/grpc', te: 'trailers' }, Buffer.alloc(5));
    expect([...full.body]).toEqual([0, 0, 0, 0, 1, 7]);
    expect(full.trailers).toMatchObject({ 'grpc-status': '0', 'x-trailer': 'yes' });
    expect(full.rstCode).toBe(http2.constants.NGHTTP2_NO_ERROR);
    const only = await h2Request(client, { ':method': 'POST', ':path': '/only', 'content-type': 'application/grpc', te: 'trailers' }, Buffer.alloc(5));
    expect(only.head).toMatchObject({ ':status': 200, 'grpc-status': '14', 'grpc-message': 'unavailable' });
    expect(only.body.length).toBe(0);
    expect(only.trailers).toBeUndefined();
  });

  it('answers 502 naming the upstream when the h2c upstream cannot be reached, outcome upstream_error', async () => {
    const sidecar = await startTestSidecar('http://127.0.0.1:1', 'upstream_protocol: h2c\n');
    cleanups.push(() => sidecar.close());
    const result = await h2Request(connect(sidecar.proxyUrl), CHAT, CHAT_BODY);
    expect(result.head[':status']).toBe(502);
    expect(JSON.parse(result.body.toString()).error.message).toMatch(/^tokentap: upstream 127\.0\.0\.1:1 failed/);
    const [line] = await eventually('the request line', () => requestLines(sidecar.logs), (lines) => lines.length === 1);
    expect(line).toMatchObject({ outcome: 'upstream_error', status: 502 });
  });
});

describe('cancellation both ways', () => {
  it('cancels the upstream stream at once (RST_STREAM CANCEL) when the client resets its stream mid-answer, outcome client_cancelled', async () => {
    const { upstream, sidecar, client } = await setUp(() => ({ chunks: Array.from({ length: 200 }, () => Buffer.from('data: {}\n\n')), gapMs: 20 }));
    const stream = client.request(CHAT);
    stream.on('error', () => {});
    stream.end(CHAT_BODY);
    await new Promise<void>((resolve) => stream.once('data', () => resolve()));
    const resetAt = performance.now();
    stream.close(http2.constants.NGHTTP2_CANCEL);
    const seen = await eventually('the upstream to see the reset', () => upstream.seen[0], (s) => s?.resetCode !== undefined);
    expect(seen?.resetCode).toBe(http2.constants.NGHTTP2_CANCEL);
    // At once: well before the stream's remaining 4 s; loose for a loaded machine.
    expect((seen?.resetAtMs as number) - resetAt).toBeLessThan(1_000);
    const [line] = await eventually('the request line', () => requestLines(sidecar.logs), (lines) => lines.length === 1);
    expect(line).toMatchObject({ outcome: 'client_cancelled' });
  });

  it('cancels the upstream stream when the client`s connection drops', async () => {
    const { upstream, client } = await setUp(() => ({ chunks: Array.from({ length: 200 }, () => Buffer.from('data: {}\n\n')), gapMs: 20 }));
    const stream = client.request(CHAT);
    stream.on('error', () => {});
    stream.end(CHAT_BODY);
    await new Promise<void>((resolve) => stream.once('data', () => resolve()));
    client.destroy();
    const seen = await eventually('the upstream to see the reset', () => upstream.seen[0], (s) => s?.resetCode !== undefined);
    expect(seen?.resetCode).toBe(http2.constants.NGHTTP2_CANCEL);
  });

  it('resets the client`s stream (INTERNAL_ERROR, never a clean end) when the upstream resets mid-answer, outcome upstream_error, other streams untouched', async () => {
    const { sidecar, client } = await setUp((request) =>
      request.headers[':path'] === '/broken'
        ? { chunks: [Buffer.from('data: {}\n\n')], ending: 'reset' }
        : { chunks: [Buffer.from('data: {}\n\n'), Buffer.from('data: [DONE]\n\n')], gapMs: 30 },
    );
    const [broken, healthy] = await Promise.all([
      h2Request(client, { ...CHAT, ':path': '/broken' }, CHAT_BODY),
      h2Request(client, { ...CHAT, ':path': '/healthy' }, CHAT_BODY),
    ]);
    expect(broken.head[':status']).toBe(200);
    expect(broken.rstCode).toBe(http2.constants.NGHTTP2_INTERNAL_ERROR);
    expect(healthy.rstCode).toBe(http2.constants.NGHTTP2_NO_ERROR);
    expect(healthy.body.toString()).toBe('data: {}\n\ndata: [DONE]\n\n');
    const lines = await eventually('two request lines', () => requestLines(sidecar.logs), (l) => l.length === 2);
    expect(lines.find((l) => l.path === '/broken')).toMatchObject({ outcome: 'upstream_error' });
  });
});

describe('upstream sessions: pooled, renewed after GOAWAY, a request never sent twice unless provably unprocessed', () => {
  it('carries many client streams on one upstream connection and opens a fresh one after the upstream`s GOAWAY, each request sent once', async () => {
    const { upstream, client } = await setUp(() => ({ chunks: [Buffer.from('data: [DONE]\n\n')] }));
    for (let i = 0; i < 3; i++) expect((await h2Request(client, CHAT, CHAT_BODY)).head[':status']).toBe(200);
    upstream.goaway();
    await new Promise((r) => setTimeout(r, 50));
    for (let i = 0; i < 3; i++) expect((await h2Request(client, CHAT, CHAT_BODY)).head[':status']).toBe(200);
    expect(upstream.seen).toHaveLength(6);
    expect(upstream.streams).toBe(6);
  });

  it('sends a stream the upstream refused (REFUSED_STREAM, RFC 9113 8.7: provably unprocessed) once more, and only once', async () => {
    const refusing = http2.createServer();
    let opened = 0;
    const bodies: Buffer[] = [];
    refusing.on('stream', (stream) => {
      opened++;
      stream.on('error', () => {});
      if (opened === 1) {
        stream.close(http2.constants.NGHTTP2_REFUSED_STREAM);
        return;
      }
      const parts: Buffer[] = [];
      stream.on('data', (d: Buffer) => parts.push(d));
      stream.on('end', () => {
        bodies.push(Buffer.concat(parts));
        stream.respond({ ':status': 200 });
        stream.end('answered');
      });
    });
    await new Promise<void>((resolve) => refusing.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => new Promise<void>((resolve) => refusing.close(() => resolve())));
    const sidecar = await startTestSidecar(`http://127.0.0.1:${(refusing.address() as { port: number }).port}`, 'upstream_protocol: h2c\n');
    cleanups.push(() => sidecar.close());
    const result = await h2Request(connect(sidecar.proxyUrl), CHAT, CHAT_BODY);
    expect(result.body.toString()).toBe('answered');
    expect(opened).toBe(2);
    expect(bodies).toHaveLength(1);
    expect(bodies[0]?.equals(CHAT_BODY)).toBe(true);
    const [line] = await eventually('the request line', () => requestLines(sidecar.logs), (lines) => lines.length === 1);
    expect(line).toMatchObject({ retried: true, outcome: 'completed' });
  });

  it('never sends again a stream the upstream reset after it may have processed it (INTERNAL_ERROR after its head): the client`s stream is reset', async () => {
    const { upstream, client, sidecar } = await setUp(() => ({ chunks: [], ending: 'reset' }));
    const result = await h2Request(client, CHAT, CHAT_BODY);
    expect(result.head[':status']).toBe(200);
    expect(result.rstCode).toBe(http2.constants.NGHTTP2_INTERNAL_ERROR);
    expect(upstream.streams).toBe(1);
    expect(sumValues(await scrape(sidecar.adminUrl), 'tokentap_upstream_retries_total')).toBe(0);
  });
});

describe('flow control is per stream', () => {
  it('finishes a stream while another stream`s client never reads, and holds at most about one window of the stalled stream', async () => {
    const big = Buffer.alloc(16 * 1024, 0x61);
    const { upstream, client } = await setUp((request) =>
      request.headers[':path'] === '/stalled' ? { chunks: Array.from({ length: 256 }, () => big) } : { chunks: Array.from({ length: 64 }, () => big) },
    );
    const stalled = client.request({ ...CHAT, ':path': '/stalled' });
    stalled.on('error', () => {});
    stalled.end(CHAT_BODY);
    // Never read: node:http2 stops opening its window once its buffer is full.
    stalled.pause();
    const flowing = await h2Request(client, { ...CHAT, ':path': '/flowing' }, CHAT_BODY);
    expect(flowing.body.length).toBe(64 * big.length);
    await new Promise((r) => setTimeout(r, 300));
    const stalledSeen = upstream.seen.find((s) => s.headers[':path'] === '/stalled');
    // 4 MiB offered; what left the upstream is bounded by the windows on the way (upstream to
    // tokentap, tokentap to the client) and the streams' buffers: well under 1 MiB.
    expect(stalledSeen?.written).toBeLessThan(1 << 20);
    expect(stalledSeen?.written).toBeGreaterThan(0);
    stalled.close();
  });
});

describe('HTTP/2 clients in front of an HTTP/1.1 upstream (upstream_protocol: http1, the default)', () => {
  it('gives node:http2 the vLLM capture byte for byte from an HTTP/1.1 upstream, measured as the HTTP/1.1 client`s', async () => {
    const events = splitEvents(vllmStream('chat.sse'));
    const h1Upstream = await startReplayUpstream(() => ({ chunks: events, gapMs: 2 }));
    cleanups.push(() => h1Upstream.close());
    const sidecar = await startTestSidecar(h1Upstream.url);
    cleanups.push(() => sidecar.close());
    const proxied = await h2Request(connect(sidecar.proxyUrl), CHAT, CHAT_BODY);
    expect(proxied.head[':status']).toBe(200);
    expect(proxied.rstCode).toBe(http2.constants.NGHTTP2_NO_ERROR);
    expect(proxied.body.equals(vllmStream('chat.sse'))).toBe(true);
    expect(h1Upstream.seen[0]?.body.equals(CHAT_BODY)).toBe(true);
    const [line] = await eventually('the request line', () => requestLines(sidecar.logs), (lines) => lines.length === 1);
    expect(line).toMatchObject({ outcome: 'completed', model: 'tiny' });
    expect(Number(line?.content_events)).toBeGreaterThan(1);
    expect(histogram(await scrape(sidecar.adminUrl), 'tokentap_inter_token_latency_seconds').count).toBeGreaterThan(0);
  });

  it('closes the upstream request`s connection at once when the HTTP/2 client resets its stream, outcome client_cancelled', async () => {
    const h1Upstream = await startReplayUpstream(() => ({ chunks: Array.from({ length: 200 }, () => Buffer.from('data: {}\n\n')), gapMs: 20 }));
    cleanups.push(() => h1Upstream.close());
    const sidecar = await startTestSidecar(h1Upstream.url);
    cleanups.push(() => sidecar.close());
    const stream = connect(sidecar.proxyUrl).request(CHAT);
    stream.on('error', () => {});
    stream.end(CHAT_BODY);
    await new Promise<void>((resolve) => stream.once('data', () => resolve()));
    stream.close(http2.constants.NGHTTP2_CANCEL);
    const seen = await eventually('the upstream to see the close', () => h1Upstream.seen[0], (s) => s?.closedEarlyAtMs !== undefined);
    expect(seen?.closedEarlyAtMs).toEqual(expect.any(Number));
    const [line] = await eventually('the request line', () => requestLines(sidecar.logs), (lines) => lines.length === 1);
    expect(line).toMatchObject({ outcome: 'client_cancelled' });
  });
});

describe('idle HTTP/2 connections', () => {
  it('closes a session without a stream for the keep-alive timeout with GOAWAY(NO_ERROR), as an idle HTTP/1.1 connection is closed, and keeps one whose stream outlasts it', async () => {
    const { sidecar, client: idle } = await setUp((request) =>
      request.headers[':path'] === '/long' ? { chunks: Array.from({ length: 8 }, () => Buffer.from('data: {}\n\n')), gapMs: 1_000 } : { chunks: [Buffer.from('ok')] },
    );
    const busy = connect(sidecar.proxyUrl);
    let busyGoaway = false;
    busy.on('goaway', () => (busyGoaway = true));
    const long = h2Request(busy, { ...CHAT, ':path': '/long' }, CHAT_BODY);
    const goaway = new Promise<number>((resolve) => idle.on('goaway', (code: number) => resolve(code)));
    expect((await h2Request(idle, CHAT, CHAT_BODY)).head[':status']).toBe(200);
    const idleFromMs = performance.now();
    expect(await goaway).toBe(http2.constants.NGHTTP2_NO_ERROR);
    // KEEP_ALIVE_TIMEOUT_MS is 5 s; the sweep checks every second.
    expect(performance.now() - idleFromMs).toBeGreaterThan(4_000);
    const longAnswer = await long;
    expect(longAnswer.rstCode).toBe(http2.constants.NGHTTP2_NO_ERROR);
    expect(longAnswer.body.toString()).toBe('data: {}\n\n'.repeat(8));
    expect(busyGoaway).toBe(false);
  }, 20_000);
});

describe('draining with HTTP/2 clients', () => {
  it('sends an HTTP/2 client GOAWAY at drain start and lets its open stream finish whole', async () => {
    const { sidecar, client } = await setUp(() => ({ chunks: [...Array.from({ length: 5 }, () => Buffer.from('data: {}\n\n')), Buffer.from('data: [DONE]\n\n')], gapMs: 200 }));
    const goaway = new Promise<number>((resolve) => client.on('goaway', (code: number) => resolve(code)));
    const stream = h2Request(client, CHAT, CHAT_BODY);
    // The stream is under way (its head and first event relayed) before the drain starts.
    await new Promise((r) => setTimeout(r, 300));
    const report = sidecar.drain(10_000, 'test');
    expect(await goaway).toBe(http2.constants.NGHTTP2_NO_ERROR);
    const answer = await stream;
    expect(answer.rstCode).toBe(http2.constants.NGHTTP2_NO_ERROR);
    expect(answer.body.toString()).toBe(`${'data: {}\n\n'.repeat(5)}data: [DONE]\n\n`);
    await report;
    const [line] = await eventually('the request line', () => requestLines(sidecar.logs), (lines) => lines.length === 1);
    expect(line).toMatchObject({ outcome: 'completed' });
  });
});

describe('gRPC requests through the wire', () => {
  it('labels a Triton ModelStreamInfer call with the model its first request message names, the stream still open', async () => {
    const { sidecar, client, upstream } = await setUp(() => ({ chunks: [], headers: { 'content-type': 'application/grpc' }, trailers: { 'grpc-status': '0' } }));
    const message = grpcFrame(encode('inference.ModelInferRequest', { model_name: 'ensemble-7b', id: 'one' }));
    const answer = await h2Request(client, { ':method': 'POST', ':path': '/inference.GRPCInferenceService/ModelStreamInfer', 'content-type': 'application/grpc', te: 'trailers' }, message);
    expect(answer.trailers).toMatchObject({ 'grpc-status': '0' });
    expect(upstream.seen[0]?.body.equals(message)).toBe(true);
    const [line] = await eventually('the request line', () => requestLines(sidecar.logs), (lines) => lines.length === 1);
    expect(line).toMatchObject({ model: 'ensemble-7b', path: '/inference.GRPCInferenceService/ModelStreamInfer' });
  });
});
