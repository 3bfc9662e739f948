import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import { credentials, Metadata, makeGenericClientConstructor, status as GrpcStatus, type ServiceError } from '@grpc/grpc-js';
import { afterEach, describe, expect, it } from 'vitest';
import { ENGINE_PROTOS } from '../../src/taps/grpc/engine-protos.js';
import { encode, grpcFrame } from '../helpers/grpc-frames.js';
import { connectH2, h2Request } from '../helpers/h2c-upstream.js';
import { scrape, sumValues } from '../helpers/prometheus-text.js';
import { eventually, startTestSidecar } from '../helpers/sidecar.js';

/**
 * A hostile review of the gRPC path: a broken or hostile engine behind tokentap (framing a gRPC
 * client cannot read, a CANCELLED it sent itself, a grpc-message echoing a credential) and a hostile
 * client (grpc-timeout values). Real @grpc/grpc-js and raw HTTP/2 clients, a node:http2 upstream
 * scripted byte for byte, tokentap's real h2c relay between them; loopback only.
 */

const GENERATE = '/vllm.grpc.engine.VllmEngine/Generate';
const RESPONSE = 'vllm.grpc.engine.GenerateResponse';
const GenerateRequest = ENGINE_PROTOS.smg.lookupType('vllm.grpc.engine.GenerateRequest');
const GenerateResponse = ENGINE_PROTOS.smg.lookupType(RESPONSE);
const Client = makeGenericClientConstructor(
  {
    Generate: {
      path: GENERATE,
      requestStream: false,
      responseStream: true,
      requestSerialize: (value: object) => Buffer.from(GenerateRequest.encode(GenerateRequest.fromObject(value)).finish()),
      requestDeserialize: (bytes: Buffer) => GenerateRequest.decode(bytes),
      responseSerialize: (value: object) => Buffer.from(GenerateResponse.encode(GenerateResponse.fromObject(value)).finish()),
      responseDeserialize: (bytes: Buffer) => GenerateResponse.decode(bytes),
    },
  },
  'VllmEngine',
);
type Call = NodeJS.EventEmitter & { cancel(): void };
type GenerateClient = InstanceType<typeof Client> & { Generate(request: object, metadata: Metadata): Call };

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const chunk = (ids: number[]) => grpcFrame(encode(RESPONSE, { chunk: { token_ids: ids, prompt_tokens: 7, completion_tokens: ids.length } }));
const complete = (completion: number) => grpcFrame(encode(RESPONSE, { complete: { finish_reason: 'stop', prompt_tokens: 7, completion_tokens: completion } }));

interface Answer {
  headers?: Record<string, string>;
  frames: readonly Buffer[];
  /** Trailers after the frames; none: the body ends without any. */
  trailers?: Record<string, string>;
  /** Pause before the answer (ms). */
  delayMs?: number;
  /** Never end the stream after the frames (the client or tokentap ends it). */
  hang?: boolean;
  /** A trailers-only answer: the head (with `headers`) and END_STREAM, nothing else. */
  headOnly?: boolean;
}

/** An h2c upstream answering every stream with `answer`, one DATA write per frame, recording each request's raw header list. */
async function scriptedEngine(answer: Answer) {
  const seen: string[][] = [];
  const server = http2.createServer();
  server.on('session', (session) => session.on('error', () => {}));
  server.on('stream', (stream: http2.ServerHttp2Stream, _headers: http2.IncomingHttpHeaders, _flags: number, rawHeaders: string[]) => {
    seen.push(rawHeaders);
    stream.on('error', () => {});
    stream.resume();
    stream.on('end', async () => {
      if (answer.delayMs !== undefined) await new Promise((r) => setTimeout(r, answer.delayMs));
      if (stream.destroyed) return;
      const trailers = answer.trailers;
      if (answer.headOnly) {
        stream.respond({ ':status': 200, 'content-type': 'application/grpc', ...answer.headers }, { endStream: true });
        return;
      }
      stream.respond({ ':status': 200, 'content-type': 'application/grpc', ...answer.headers }, { waitForTrailers: trailers !== undefined });
      if (trailers !== undefined) stream.once('wantTrailers', () => stream.sendTrailers(trailers));
      for (const frame of answer.frames) stream.write(frame);
      if (!answer.hang) stream.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen, server };
}

async function sidecarFor(url: string, extraConfig = '') {
  const sidecar = await startTestSidecar(url, `upstream_protocol: h2c\n${extraConfig}`);
  cleanups.push(() => sidecar.close());
  return sidecar;
}

async function requestLine(sidecar: Awaited<ReturnType<typeof sidecarFor>>) {
  const [line] = await eventually('the request line', () => sidecar.logs.filter((l) => l.msg === 'request'), (lines) => lines.length === 1);
  return line as Record<string, unknown>;
}

/** One raw HTTP/2 Generate call through tokentap: the response bytes exactly as the client received them. */
async function rawCall(proxyUrl: string, headers: Record<string, string> = {}) {
  const session = connectH2(proxyUrl, cleanups);
  const request = grpcFrame(encode('vllm.grpc.engine.GenerateRequest', { request_id: 'r1', stream: true }));
  return h2Request(session, { ':method': 'POST', ':path': GENERATE, 'content-type': 'application/grpc', te: 'trailers', ...headers }, request);
}

function grpcClient(proxyUrl: string): GenerateClient {
  const client = new Client(new URL(proxyUrl).host, credentials.createInsecure()) as GenerateClient;
  cleanups.push(() => client.close());
  return client;
}

describe('framing a gRPC client cannot read, from the engine', () => {
  const flagged = (flag: number) => {
    const frame = chunk([9, 9, 9]);
    frame[0] = flag;
    return frame;
  };
  const cases = [
    { name: 'a compressed flag on a response without grpc-encoding', frames: [chunk([1]), flagged(1), chunk([2, 3]), complete(3)] },
    { name: 'a flag of 2', frames: [chunk([1]), flagged(2), chunk([2, 3]), complete(3)] },
    { name: 'a flag of 0x80', frames: [chunk([1]), flagged(0x80), chunk([2, 3]), complete(3)] },
  ];

  it.each(cases)('relays $name byte for byte with its OK trailers, reads nothing after it, and records the call upstream_error', async ({ frames }) => {
    // Reproduction: recorded `completed` with TTFT and 3 output tokens, while grpc-go fails such a
    // call (INTERNAL) and @grpc/grpc-js delivered none of the messages of the first case.
    const engine = await scriptedEngine({ frames, trailers: { 'grpc-status': '0' } });
    const sidecar = await sidecarFor(engine.url);
    const answer = await rawCall(sidecar.proxyUrl);
    expect(answer.body.equals(Buffer.concat(frames))).toBe(true);
    expect(answer.trailers?.['grpc-status']).toBe('0');
    expect(answer.rstCode).toBe(0);
    const line = await requestLine(sidecar);
    expect(line).toMatchObject({ outcome: 'upstream_error', counted_tokens: 1 });
    const metrics = await scrape(sidecar.adminUrl);
    expect(sumValues(metrics, 'tokentap_tap_errors_total', { reason: 'malformed_event' })).toBe(1);
    expect(sumValues(metrics, 'tokentap_requests_total', { outcome: 'upstream_error' })).toBe(1);
  });

  it('reads the same compressed flag as a compressed message when the response declares grpc-encoding: completed, counted compressed', async () => {
    const frames = cases[0]!.frames;
    const engine = await scriptedEngine({ headers: { 'grpc-encoding': 'gzip' }, frames, trailers: { 'grpc-status': '0' } });
    const sidecar = await sidecarFor(engine.url);
    const answer = await rawCall(sidecar.proxyUrl);
    expect(answer.body.equals(Buffer.concat(frames))).toBe(true);
    expect(answer.head['grpc-encoding']).toBe('gzip');
    expect(await requestLine(sidecar)).toMatchObject({ outcome: 'completed' });
    const metrics = await scrape(sidecar.adminUrl);
    expect(sumValues(metrics, 'tokentap_tap_errors_total', { reason: 'compressed_message' })).toBe(1);
    expect(sumValues(metrics, 'tokentap_tap_errors_total', { reason: 'malformed_event' })).toBe(0);
  });

  it('relays a message cut off by OK trailers byte for byte and records the call upstream_error', async () => {
    const cut = chunk([2, 3]);
    const frames = [chunk([1]), cut.subarray(0, cut.length - 2)];
    const engine = await scriptedEngine({ frames, trailers: { 'grpc-status': '0' } });
    const sidecar = await sidecarFor(engine.url);
    const answer = await rawCall(sidecar.proxyUrl);
    expect(answer.body.equals(Buffer.concat(frames))).toBe(true);
    expect(answer.trailers?.['grpc-status']).toBe('0');
    expect(await requestLine(sidecar)).toMatchObject({ outcome: 'upstream_error' });
  });
});

describe('messages however the engine frames them', () => {
  it('relays messages packed into one DATA frame and a message spread over one-byte DATA frames byte for byte, and counts exactly the token_ids the proto says', async () => {
    const stream = Buffer.concat([chunk([1]), chunk([2, 3]), grpcFrame(Buffer.alloc(0)), chunk([4, 5, 6]), complete(6)]);
    const packed = chunk([1]).length + chunk([2, 3]).length + 5;
    const frames = [stream.subarray(0, packed), ...Array.from(stream.subarray(packed), (byte) => Buffer.from([byte]))];
    const engine = await scriptedEngine({ frames, trailers: { 'grpc-status': '0' } });
    const sidecar = await sidecarFor(engine.url);
    const answer = await rawCall(sidecar.proxyUrl);
    expect(answer.body.equals(stream)).toBe(true);
    expect(await requestLine(sidecar)).toMatchObject({ outcome: 'completed', content_events: 3, counted_tokens: 6, output_tokens: 6, input_tokens: 7 });
  });
});

describe('a gRPC call answered in something other than gRPC', () => {
  it('relays an HTML page answered 200 to a Generate call byte for byte, and records the call upstream_error as @grpc/grpc-js fails it', async () => {
    // Reproduction: recorded `completed` (no token, a good e2e event) while grpc-js failed the call.
    const page = '<html><body>502 Bad Gateway (ingress)</body></html>';
    const engine = await scriptedEngine({ headers: { 'content-type': 'text/html' }, frames: [Buffer.from(page)] });
    const sidecar = await sidecarFor(engine.url);
    const raw = await rawCall(sidecar.proxyUrl);
    expect(raw.head['content-type']).toBe('text/html');
    expect(raw.body.toString()).toBe(page);
    const call = grpcClient(sidecar.proxyUrl).Generate(GenerateRequest.fromObject({ request_id: 'r2', stream: true }), new Metadata());
    const error = await new Promise<ServiceError>((resolve) => {
      call.on('data', () => {});
      call.on('error', resolve);
    });
    expect(error.code).not.toBe(GrpcStatus.OK);
    const lines = await eventually('both request lines', () => sidecar.logs.filter((l) => l.msg === 'request'), (l) => l.length === 2);
    expect(lines.map((line) => line.outcome)).toEqual(['upstream_error', 'upstream_error']);
  });
});

describe('an engine that answers before the request has ended, then closes its stream', () => {
  /** Answers at the request's head, before its body ends, then resets its stream NO_ERROR (RFC 9113 8.1), as grpc-go does. */
  async function earlyAnswerEngine(frames: readonly Buffer[]) {
    const server = http2.createServer();
    server.on('session', (session) => session.on('error', () => {}));
    server.on('stream', (stream: http2.ServerHttp2Stream) => {
      stream.on('error', () => {});
      stream.resume();
      const reset = () => setTimeout(() => stream.close(http2.constants.NGHTTP2_NO_ERROR), 20);
      if (frames.length === 0) {
        stream.respond({ ':status': 200, 'content-type': 'application/grpc', 'grpc-status': '12', 'grpc-message': 'unimplemented' }, { endStream: true });
        reset();
        return;
      }
      stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
      stream.once('wantTrailers', () => {
        stream.sendTrailers({ 'grpc-status': '3' });
        reset();
      });
      for (const frame of frames) stream.write(frame);
      stream.end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  }

  /** A call whose request never ends: its head and part of a message. How its stream closed (or that it did not within 5 s), and what it received. */
  async function unendedCall(proxyUrl: string) {
    const session = connectH2(proxyUrl, cleanups);
    const stream = session.request({ ':method': 'POST', ':path': GENERATE, 'content-type': 'application/grpc', te: 'trailers' });
    stream.on('error', () => {});
    stream.write(Buffer.from([0, 0, 0, 0, 10, 1]));
    const received: { head?: http2.IncomingHttpHeaders; trailers?: http2.IncomingHttpHeaders; body: Buffer[] } = { body: [] };
    stream.on('response', (head) => (received.head = head));
    stream.on('trailers', (trailers) => (received.trailers = trailers));
    stream.on('data', (chunk: Buffer) => received.body.push(chunk));
    const closed = await new Promise<number | 'open'>((resolve) => {
      const timer = setTimeout(() => resolve('open'), 5000);
      stream.on('close', () => {
        clearTimeout(timer);
        resolve(stream.rstCode ?? 0);
      });
    });
    stream.destroy();
    return { ...received, closed };
  }

  it('closes the client`s stream NO_ERROR after relaying a trailers-only answer, as the engine closed its own', async () => {
    // Reproduction: the client's stream stayed open with no timer on it (still open after 5 s; a
    // direct client's closed at once), so a client that never ends its request held it for good.
    const sidecar = await sidecarFor(await earlyAnswerEngine([]));
    const call = await unendedCall(sidecar.proxyUrl);
    expect(call.head).toMatchObject({ ':status': 200, 'grpc-status': '12', 'grpc-message': 'unimplemented' });
    expect(call.closed).toBe(http2.constants.NGHTTP2_NO_ERROR);
    expect(await requestLine(sidecar)).toMatchObject({ outcome: 'upstream_error' });
  });

  it('closes it only after the whole answer, its messages and trailers, has been relayed', async () => {
    const frames = [chunk([1]), chunk([2, 3])];
    const sidecar = await sidecarFor(await earlyAnswerEngine(frames));
    const call = await unendedCall(sidecar.proxyUrl);
    expect(Buffer.concat(call.body).equals(Buffer.concat(frames))).toBe(true);
    expect(call.trailers?.['grpc-status']).toBe('3');
    expect(call.closed).toBe(http2.constants.NGHTTP2_NO_ERROR);
    expect(await requestLine(sidecar)).toMatchObject({ outcome: 'client_error' });
  });
});

describe('who cancelled: the client`s cancel and the engine`s CANCELLED', () => {
  const SLO = 'workloads:\n  - name: default\n    slo: { objective: 0.99, e2e: 60s }\n';

  it('records a CANCELLED the engine sent to a client still waiting as upstream_error, a bad e2e event', async () => {
    // Reproduction: recorded client_cancelled, which within the threshold is no SLO event at all,
    // so an engine cancelling every call never burned the budget.
    const engine = await scriptedEngine({ frames: [chunk([1])], trailers: { 'grpc-status': String(GrpcStatus.CANCELLED), 'grpc-message': 'cancelled by the engine' } });
    const sidecar = await sidecarFor(engine.url, SLO);
    const call = grpcClient(sidecar.proxyUrl).Generate(GenerateRequest.fromObject({ request_id: 'r1', stream: true }), new Metadata());
    const error = await new Promise<ServiceError>((resolve) => {
      call.on('data', () => {});
      call.on('error', resolve);
    });
    expect(error.code).toBe(GrpcStatus.CANCELLED);
    expect(await requestLine(sidecar)).toMatchObject({ outcome: 'upstream_error' });
    const metrics = await scrape(sidecar.adminUrl);
    expect(sumValues(metrics, 'tokentap_slo_events_total', { slo: 'e2e', result: 'bad' })).toBe(1);
  });

  it('records a grpc-js cancel() as client_cancelled, no e2e event within the threshold, and the engine`s stream is reset', async () => {
    const engine = await scriptedEngine({ frames: [chunk([1])], hang: true });
    const reset = new Promise<number | undefined>((resolve) => engine.server.on('stream', (stream: http2.ServerHttp2Stream) => stream.on('close', () => resolve(stream.rstCode))));
    const sidecar = await sidecarFor(engine.url, SLO);
    const call = grpcClient(sidecar.proxyUrl).Generate(GenerateRequest.fromObject({ request_id: 'r1', stream: true }), new Metadata());
    call.on('error', () => {});
    call.once('data', () => call.cancel());
    expect(await reset).toBe(http2.constants.NGHTTP2_CANCEL);
    expect(await requestLine(sidecar)).toMatchObject({ outcome: 'client_cancelled' });
    const metrics = await scrape(sidecar.adminUrl);
    expect(sumValues(metrics, 'tokentap_slo_events_total', { slo: 'e2e' })).toBe(0);
  });
});

describe('trailers an engine fills with what must not leave', () => {
  // A value with a control character other than HTAB (ESC, as in `\u001b[31m`) never reaches
  // tokentap: node:http2's nghttp2 drops the field on receipt, as it does for a direct client
  // (measured on Node 20 and 24), so what is relayed is the value as a client reads it.
  it('relays a grpc-message carrying a bearer token, an encoded bidi override and a tab, and grpc-status-details-bin, unchanged; none of it reaches a log line, /metrics or /status.json', async () => {
    const secret = 'sk-live-0123456789abcdef';
    const trailers = {
      'grpc-status': String(GrpcStatus.UNAUTHENTICATED),
      'grpc-message': `token Bearer ${secret} refused %E2%80%AE\t${secret}`,
      'grpc-status-details-bin': Buffer.from(`details ${secret}`).toString('base64'),
    };
    const engine = await scriptedEngine({ frames: [chunk([1])], trailers });
    const sidecar = await sidecarFor(engine.url);
    const answer = await rawCall(sidecar.proxyUrl);
    expect(answer.trailers).toMatchObject(trailers);
    expect(await requestLine(sidecar)).toMatchObject({ outcome: 'client_error' });
    const logs = JSON.stringify(sidecar.logs);
    const metrics = await (await fetch(`${sidecar.adminUrl}/metrics`)).text();
    const status = await (await fetch(`${sidecar.adminUrl}/status.json`)).text();
    for (const [where, text] of Object.entries({ logs, metrics, status })) {
      expect(text.includes(secret), where).toBe(false);
      expect(text.includes(Buffer.from(secret).toString('base64').slice(0, 12)), where).toBe(false);
    }
  });
});

describe('grpc-timeout from a hostile client', () => {
  it('forwards grpc-timeout values exactly as sent, huge, tiny or malformed, and none of them changes tokentap`s own timers', async () => {
    const values = ['99999999H', '1n', '-5x', '123456789012S'];
    // The engine answers after 300 ms: a 1 ns deadline read by tokentap would cut it; a huge one would not shorten upstream_idle_timeout (below).
    const engine = await scriptedEngine({ frames: [chunk([1]), complete(1)], trailers: { 'grpc-status': '0' }, delayMs: 300 });
    const sidecar = await sidecarFor(engine.url, 'upstream_idle_timeout: 20s\n');
    for (const value of values) {
      const answer = await rawCall(sidecar.proxyUrl, { 'grpc-timeout': value });
      expect(answer.trailers?.['grpc-status'], value).toBe('0');
    }
    const forwarded = engine.seen.map((raw) => raw[raw.findIndex((name, i) => i % 2 === 0 && name === 'grpc-timeout') + 1]);
    expect(forwarded).toEqual(values);
    const lines = await eventually('the request lines', () => sidecar.logs.filter((l) => l.msg === 'request'), (l) => l.length === values.length);
    expect(lines.map((line) => line.outcome)).toEqual(values.map(() => 'completed'));
  });

  it('does not let a client`s tiny grpc-timeout burn the SLO: the engine`s DEADLINE_EXCEEDED for it is client_cancelled, without it a timeout', async () => {
    // Reproduction: `grpc-timeout: 1m` made the engine answer DEADLINE_EXCEEDED at once and every
    // such call a `timeout`: bad TTFT and e2e events, the same client deadline that is
    // client_cancelled when the client's own timer fires first.
    const engine = await scriptedEngine({ headers: { 'grpc-status': String(GrpcStatus.DEADLINE_EXCEEDED) }, frames: [], headOnly: true });
    const sidecar = await sidecarFor(engine.url, 'workloads:\n  - name: default\n    slo: { objective: 0.99, ttft: 10s, e2e: 60s }\n');
    const withDeadline = await rawCall(sidecar.proxyUrl, { 'grpc-timeout': '1m' });
    expect(withDeadline.head['grpc-status']).toBe('4');
    await eventually('the request line', () => sidecar.logs.filter((l) => l.msg === 'request'), (lines) => lines.length === 1);
    let metrics = await scrape(sidecar.adminUrl);
    expect(sumValues(metrics, 'tokentap_requests_total', { outcome: 'client_cancelled' })).toBe(1);
    expect(sumValues(metrics, 'tokentap_slo_events_total')).toBe(0);
    await rawCall(sidecar.proxyUrl);
    await eventually('both request lines', () => sidecar.logs.filter((l) => l.msg === 'request'), (lines) => lines.length === 2);
    metrics = await scrape(sidecar.adminUrl);
    expect(sumValues(metrics, 'tokentap_requests_total', { outcome: 'timeout' })).toBe(1);
    expect(sumValues(metrics, 'tokentap_slo_events_total', { result: 'bad' })).toBe(2);
  });

  it('cuts a silent engine at upstream_idle_timeout whatever grpc-timeout the client asked for', async () => {
    const engine = await scriptedEngine({ frames: [chunk([1])], hang: true });
    const sidecar = await sidecarFor(engine.url, 'upstream_idle_timeout: 500ms\n');
    const answer = await rawCall(sidecar.proxyUrl, { 'grpc-timeout': '99999999H' });
    expect(answer.rstCode).not.toBe(0);
    expect(await requestLine(sidecar)).toMatchObject({ outcome: 'timeout' });
  });
});
