import http2 from 'node:http2';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { encode, grpcFrame } from '../helpers/grpc-frames.js';
import { FLAG, FRAME, frame, literal, RawH2Client } from '../helpers/h2-frames.js';
import { connectH2, h2Request, startH2cReplayUpstream } from '../helpers/h2c-upstream.js';
import { scrape, sumValues } from '../helpers/prometheus-text.js';
import { goaway, startRawH2Upstream, type RawH2Connection } from '../helpers/raw-h2-upstream.js';
import { eventually, startTestSidecar } from '../helpers/sidecar.js';

/**
 * A broken or hostile upstream behind HTTP/2 clients: what node:http2 reports of it must neither
 * take the sidecar down (an exception out of a stream's event handler ends the process, and every
 * stream with it), nor pass a cut answer off as whole, nor send a request the upstream may have
 * processed a second time. And a client's request body in tiny DATA frames is bounded as a
 * chunked HTTP/1.1 body is.
 */

const { NGHTTP2_INTERNAL_ERROR, NGHTTP2_NO_ERROR, NGHTTP2_REFUSED_STREAM } = http2.constants;

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const CHAT = { ':method': 'POST', ':path': '/v1/chat/completions', 'content-type': 'application/json' };
const CHAT_BODY = Buffer.from(JSON.stringify({ model: 'tiny', stream: true, messages: [{ role: 'user', content: 'Hi' }] }));

/** `:status 200` from HPACK's static table (RFC 7541 appendix A, index 8). */
const STATUS_200 = Buffer.from([0x88]);

/** Answers `200 ok` on `streamId`, whole. */
function answerOk(connection: RawH2Connection, streamId: number): void {
  connection.write(frame(FRAME.HEADERS, FLAG.END_HEADERS, streamId, STATUS_200));
  connection.write(frame(FRAME.DATA, FLAG.END_STREAM, streamId, Buffer.from('ok')));
}

/** A raw h2c upstream that answers its first request with `fault` and every later one `200 ok`. */
async function setUpRaw(fault: (streamId: number, connection: RawH2Connection) => void) {
  let first = true;
  const upstream = await startRawH2Upstream((streamId, connection) => {
    if (first) {
      first = false;
      fault(streamId, connection);
    } else {
      answerOk(connection, streamId);
    }
  });
  cleanups.push(() => upstream.close());
  const sidecar = await startTestSidecar(upstream.url, 'upstream_protocol: h2c\n');
  cleanups.push(() => sidecar.close());
  return { upstream, sidecar, client: connect(sidecar.proxyUrl) };
}

/** An h2c upstream answering every call with grpc-status 0 and no message, behind a sidecar with `config` added. */
async function setUpGrpc(config = '') {
  const upstream = await startH2cReplayUpstream(() => ({ chunks: [], headers: { 'content-type': 'application/grpc' }, trailers: { 'grpc-status': '0' } }));
  cleanups.push(() => upstream.close());
  const sidecar = await startTestSidecar(upstream.url, `upstream_protocol: h2c\n${config}`);
  cleanups.push(() => sidecar.close());
  return { upstream, sidecar };
}

function connect(url: string): http2.ClientHttp2Session {
  return connectH2(url, cleanups);
}

function requestLines(logs: ReadonlyArray<Record<string, unknown>>) {
  return logs.filter((line) => line.msg === 'request');
}

async function onlyLine(sidecar: { logs: Array<Record<string, unknown>> }) {
  const [line] = await eventually('the request line', () => requestLines(sidecar.logs), (lines) => lines.length >= 1);
  return line as Record<string, unknown>;
}

describe('a response head HTTP/2 cannot carry is the stream`s 502, never an exception out of its event handler', () => {
  it.each([
    ['a trailers-only head (END_STREAM)', FLAG.END_HEADERS | FLAG.END_STREAM],
    ['a head followed by a body', FLAG.END_HEADERS],
  ])('answers 502 to an h2c upstream`s :status 700 in %s, outcome upstream_error, and the sidecar serves the next stream', async (_what, flags) => {
    const { client, sidecar } = await setUpRaw((streamId, connection) => {
      connection.write(frame(FRAME.HEADERS, flags, streamId, literal(':status', '700')));
      if ((flags & FLAG.END_STREAM) === 0) connection.write(frame(FRAME.DATA, FLAG.END_STREAM, streamId, Buffer.from('body')));
    });
    const answer = await h2Request(client, CHAT, CHAT_BODY);
    expect(answer.head[':status']).toBe(502);
    expect(answer.body.toString()).toContain('status 700, not a final HTTP status');
    expect(await onlyLine(sidecar)).toMatchObject({ status: 502, outcome: 'upstream_error' });
    const next = await h2Request(client, CHAT, CHAT_BODY);
    expect(next.head[':status']).toBe(200);
    expect(next.body.toString()).toBe('ok');
  });

  it.each([
    ['two Content-Type lines', 'HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Type: text/html\r\nContent-Length: 2\r\n\r\nhi', 'cannot be relayed over HTTP/2'],
    ['status 700', 'HTTP/1.1 700 Weird\r\nContent-Length: 2\r\n\r\nhi', 'status 700, not a final HTTP status'],
  ])('answers an HTTP/2 client 502 when the HTTP/1.1 upstream`s head has %s, and the sidecar serves the next stream', async (_what, head, reason) => {
    let answered = 0;
    const server = net.createServer((socket) => {
      socket.on('error', () => {});
      socket.once('data', () => {
        answered++;
        socket.end(answered === 1 ? head : 'HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok');
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
    const sidecar = await startTestSidecar(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    cleanups.push(() => sidecar.close());
    const client = connect(sidecar.proxyUrl);
    const answer = await h2Request(client, CHAT, CHAT_BODY);
    expect(answer.head[':status']).toBe(502);
    expect(answer.body.toString()).toContain(reason);
    expect(await onlyLine(sidecar)).toMatchObject({ status: 502, outcome: 'upstream_error' });
    const next = await h2Request(client, CHAT, CHAT_BODY);
    expect(next.head[':status']).toBe(200);
    expect(next.body.toString()).toBe('ok');
  });
});

describe('an upstream connection that closes under an open stream', () => {
  it('answers 502 when the h2c upstream closes its connection (FIN, no GOAWAY) before the response head: the client is not left waiting', async () => {
    const { client, sidecar } = await setUpRaw((_streamId, connection) => setTimeout(() => connection.end(), 20));
    const answer = await h2Request(client, CHAT, CHAT_BODY);
    expect(answer.head[':status']).toBe(502);
    expect(answer.body.toString()).toContain('closed without END_STREAM');
    expect(await onlyLine(sidecar)).toMatchObject({ status: 502, outcome: 'upstream_error' });
  });

  it('breaks the client`s stream (INTERNAL_ERROR) when the connection closes mid-body: a cut answer never ends cleanly, outcome upstream_error', async () => {
    const { client, sidecar } = await setUpRaw((streamId, connection) => {
      connection.write(frame(FRAME.HEADERS, FLAG.END_HEADERS, streamId, STATUS_200));
      connection.write(frame(FRAME.DATA, 0, streamId, Buffer.from('partial, more to come')));
      setTimeout(() => connection.end(), 20);
    });
    const answer = await h2Request(client, CHAT, CHAT_BODY);
    expect(answer.head[':status']).toBe(200);
    expect(answer.body.toString()).toBe('partial, more to come');
    expect(answer.rstCode).toBe(NGHTTP2_INTERNAL_ERROR);
    expect(await onlyLine(sidecar)).toMatchObject({ outcome: 'upstream_error' });
  });
});

describe('only END_STREAM ends an answer cleanly', () => {
  it('breaks the client`s stream (INTERNAL_ERROR) when the upstream resets its stream with NO_ERROR before END_STREAM, outcome upstream_error', async () => {
    const { client, sidecar } = await setUpRaw((streamId, connection) => {
      connection.write(frame(FRAME.HEADERS, FLAG.END_HEADERS, streamId, STATUS_200));
      connection.write(frame(FRAME.DATA, 0, streamId, Buffer.from('partial')));
      // RFC 9113 section 8.1: NO_ERROR may follow a complete answer only; here none was.
      setTimeout(() => connection.write(frame(FRAME.RST_STREAM, 0, streamId, Buffer.alloc(4))), 20);
    });
    const answer = await h2Request(client, CHAT, CHAT_BODY);
    expect(answer.body.toString()).toBe('partial');
    expect(answer.rstCode).toBe(NGHTTP2_INTERNAL_ERROR);
    expect(await onlyLine(sidecar)).toMatchObject({ status: 200, outcome: 'upstream_error' });
  });

  it('ends the client`s stream cleanly when END_STREAM came and the upstream then resets with NO_ERROR (a complete answer; RFC 9113 section 8.1)', async () => {
    const { client, sidecar } = await setUpRaw((streamId, connection) => {
      connection.write(frame(FRAME.HEADERS, FLAG.END_HEADERS, streamId, STATUS_200));
      connection.write(frame(FRAME.DATA, FLAG.END_STREAM, streamId, Buffer.from('whole')));
      connection.write(frame(FRAME.RST_STREAM, 0, streamId, Buffer.alloc(4)));
    });
    const answer = await h2Request(client, CHAT, CHAT_BODY);
    expect(answer.body.toString()).toBe('whole');
    expect(answer.rstCode).toBe(NGHTTP2_NO_ERROR);
    expect(await onlyLine(sidecar)).toMatchObject({ status: 200, outcome: 'completed' });
  });
});

describe('a GOAWAY decides what was processed, not the code node:http2 copies from it', () => {
  it('never sends again a stream at or below the GOAWAY`s last-stream-id, even when its code is REFUSED_STREAM: 502, the upstream sent it once', async () => {
    const { upstream, client, sidecar } = await setUpRaw((streamId, connection) => {
      // Received and possibly processed (last-stream-id names it), then the connection goes.
      connection.write(goaway(streamId, NGHTTP2_REFUSED_STREAM));
      setTimeout(() => connection.end(), 20);
    });
    const answer = await h2Request(client, CHAT, CHAT_BODY);
    expect(answer.head[':status']).toBe(502);
    expect(upstream.requests).toBe(1);
    expect(sumValues(await scrape(sidecar.adminUrl), 'tokentap_upstream_retries_total')).toBe(0);
    const line = await onlyLine(sidecar);
    expect(line).toMatchObject({ status: 502, outcome: 'upstream_error' });
    expect(line.retried).toBeUndefined();
  });

  it.each([
    ['above the last stream id of a GOAWAY(NO_ERROR)', (_streamId: number, connection: RawH2Connection) => connection.write(goaway(0, NGHTTP2_NO_ERROR))],
    ['above the last stream id of a GOAWAY(INTERNAL_ERROR): provably unprocessed whatever the code', (_streamId: number, connection: RawH2Connection) => connection.write(goaway(0, NGHTTP2_INTERNAL_ERROR))],
    [
      'refused (RST_STREAM REFUSED_STREAM) with a GOAWAY in the same read, which retires the connection first',
      (streamId: number, connection: RawH2Connection) => connection.write(Buffer.concat([frame(FRAME.RST_STREAM, 0, streamId, Buffer.from([0, 0, 0, NGHTTP2_REFUSED_STREAM])), goaway(streamId, NGHTTP2_NO_ERROR)])),
    ],
  ])('sends once more, on a fresh connection, a stream %s (RFC 9113 sections 6.8, 8.7)', async (_what, fault) => {
    const { upstream, client, sidecar } = await setUpRaw((streamId, connection) => {
      fault(streamId, connection);
      setTimeout(() => connection.end(), 50);
    });
    const answer = await h2Request(client, CHAT, CHAT_BODY);
    expect(answer.head[':status']).toBe(200);
    expect(answer.body.toString()).toBe('ok');
    expect(upstream.requests).toBe(2);
    expect(upstream.connections).toBe(2);
    expect(await onlyLine(sidecar)).toMatchObject({ status: 200, retried: true });
  });
});

const TRITON_STREAM = { ':method': 'POST', ':path': '/inference.GRPCInferenceService/ModelStreamInfer', 'content-type': 'application/grpc', te: 'trailers' };

/** A POST to /v1/chat/completions on stream 1: `:method POST` and `:scheme http` from HPACK's static table, the rest literal. */
function chatRequestBlock(): Buffer {
  return Buffer.concat([Buffer.from([0x83, 0x86]), literal(':path', '/v1/chat/completions'), literal(':authority', 'tokentap.test'), literal('content-type', 'application/json')]);
}

describe('a request body in tiny DATA frames (limits.min_request_chunk_bytes, as for a chunked HTTP/1.1 body)', () => {
  it('answers 400 naming the limit past 1,024 frames averaging under 64 bytes, resets the upstream stream, counts it, and serves the next stream', async () => {
    const upstream = await startH2cReplayUpstream(() => ({ chunks: [Buffer.from('ok')] }));
    cleanups.push(() => upstream.close());
    const sidecar = await startTestSidecar(upstream.url, 'upstream_protocol: h2c\n');
    cleanups.push(() => sidecar.close());
    const attacker = await RawH2Client.connect(sidecar.proxyUrl);
    cleanups.push(() => attacker.close());
    attacker.write(frame(FRAME.HEADERS, FLAG.END_HEADERS, 1, chatRequestBlock()));
    const oneByte = frame(FRAME.DATA, 0, 1, Buffer.from('{'));
    attacker.write(Buffer.concat(Array.from({ length: 2_000 }, () => oneByte)));
    await eventually('the stream ended', () => attacker.ended(1), (ended) => ended);
    expect(attacker.data(1).toString()).toContain('limits.min_request_chunk_bytes');
    const line = await onlyLine(sidecar);
    expect(line).toMatchObject({ status: 400, outcome: 'client_error' });
    expect(String(line.error)).toContain('1025 DATA frames within a second averaging 1.0 bytes');
    // The rest of the body is not wanted: RST_STREAM(NO_ERROR) after the complete 400 (RFC 9113 section 8.1).
    await eventually('the stream closed', () => attacker.resetCodes(1), (codes) => codes.length > 0);
    expect(attacker.resetCodes(1)).toEqual([NGHTTP2_NO_ERROR]);
    expect(sumValues(await scrape(sidecar.adminUrl), 'tokentap_limit_exceeded_total', { limit: 'min_request_chunk_bytes' })).toBe(1);
    // The upstream stream (if it was opened before the cut) is reset: no part of the body reaches it as a whole request.
    await eventually('every upstream stream reset', () => upstream.resets, (resets) => resets === upstream.streams);
    expect(upstream.seen).toHaveLength(0);
    const next = await h2Request(connect(sidecar.proxyUrl), CHAT, CHAT_BODY);
    expect(next.head[':status']).toBe(200);
  });

  it('resets the client`s stream (INTERNAL_ERROR) and the upstream`s when the tiny frames come after the answer began, outcome client_error', async () => {
    const { upstream, sidecar } = await setUpRaw((streamId, connection) => {
      // Answers at once and keeps the stream open: a bidirectional call.
      connection.write(frame(FRAME.HEADERS, FLAG.END_HEADERS, streamId, STATUS_200));
      connection.write(frame(FRAME.DATA, 0, streamId, Buffer.from('first')));
    });
    const attacker = await RawH2Client.connect(sidecar.proxyUrl);
    cleanups.push(() => attacker.close());
    attacker.write(frame(FRAME.HEADERS, FLAG.END_HEADERS, 1, chatRequestBlock()));
    await eventually('the answer begun', () => attacker.data(1).toString(), (data) => data === 'first');
    const oneByte = frame(FRAME.DATA, 0, 1, Buffer.from('{'));
    attacker.write(Buffer.concat(Array.from({ length: 2_000 }, () => oneByte)));
    await eventually('the client`s stream reset', () => attacker.resetCodes(1), (codes) => codes.length > 0);
    expect(attacker.resetCodes(1)).toEqual([NGHTTP2_INTERNAL_ERROR]);
    expect(await onlyLine(sidecar)).toMatchObject({ status: 200, outcome: 'client_error' });
    expect(sumValues(await scrape(sidecar.adminUrl), 'tokentap_limit_exceeded_total', { limit: 'min_request_chunk_bytes' })).toBe(1);
    expect(upstream.requests).toBe(1);
  });

  it('lets a gRPC call stream more than 1,024 small messages at a pace no flood keeps to (100 frames every 110 ms): its frames are counted per second, not over the call', async () => {
    const upstream = await startH2cReplayUpstream(() => ({ chunks: [grpcFrame(new Uint8Array(0))], headers: { 'content-type': 'application/grpc' }, trailers: { 'grpc-status': '0' } }));
    cleanups.push(() => upstream.close());
    const sidecar = await startTestSidecar(upstream.url, 'upstream_protocol: h2c\n');
    cleanups.push(() => sidecar.close());
    // Raw frames, so that each message is its own DATA frame (node:http2 would merge queued writes).
    const client = await RawH2Client.connect(sidecar.proxyUrl);
    cleanups.push(() => client.close());
    const head = Buffer.concat([Buffer.from([0x83, 0x86]), literal(':path', '/pkg.Svc/Chat'), literal(':authority', 'tokentap.test'), literal('content-type', 'application/grpc'), literal('te', 'trailers')]);
    client.write(frame(FRAME.HEADERS, FLAG.END_HEADERS, 1, head));
    const message = frame(FRAME.DATA, 0, 1, grpcFrame(new Uint8Array(35)));
    for (let batch = 0; batch < 11; batch++) {
      client.write(Buffer.concat(Array.from({ length: 100 }, () => message)));
      await new Promise((resolve) => setTimeout(resolve, 110));
    }
    client.write(frame(FRAME.DATA, FLAG.END_STREAM, 1));
    await eventually('the call answered', () => client.ended(1), (ended) => ended);
    expect(client.resetCodes(1)).toEqual([]);
    expect(upstream.seen[0]?.body.length).toBe(1_100 * 40);
    expect(await onlyLine(sidecar)).toMatchObject({ status: 200, outcome: 'completed' });
    expect(sumValues(await scrape(sidecar.adminUrl), 'tokentap_limit_exceeded_total', { limit: 'min_request_chunk_bytes' })).toBe(0);
  });

  it('reads the model of a Triton call whose first frame carries more than its first message, under a small sniffed_body_bytes: only the first message is held', async () => {
    const { sidecar } = await setUpGrpc('limits:\n  sniffed_body_bytes: 1024\n');
    const first = grpcFrame(encode('inference.ModelInferRequest', { model_name: 'ensemble-7b', id: 'one' }));
    const second = grpcFrame(encode('inference.ModelInferRequest', { model_name: 'ensemble-7b', id: 'y'.repeat(2_000) }));
    const answer = await h2Request(connect(sidecar.proxyUrl), TRITON_STREAM, Buffer.concat([first, second]));
    expect(answer.trailers).toMatchObject({ 'grpc-status': '0' });
    expect(await onlyLine(sidecar)).toMatchObject({ model: 'ensemble-7b' });
    expect(sumValues(await scrape(sidecar.adminUrl), 'tokentap_limit_exceeded_total', { limit: 'sniffed_body_bytes' })).toBe(0);
  });

  it('gives back every byte a Triton head held, whether the call finished, was reset before its first message was whole, or announced one over the cap', async () => {
    // A budget of two heads: a head left charged after its call would starve the later ones.
    const { sidecar } = await setUpGrpc('limits:\n  held_body_bytes: 7000\n  sniffed_body_bytes: 4096\n');
    const client = connect(sidecar.proxyUrl);
    const message = grpcFrame(encode('inference.ModelInferRequest', { model_name: 'ensemble-7b', id: 'z'.repeat(3_000) }));
    const overCap = Buffer.concat([Buffer.from([0, 0, 0, 0x20, 0]), Buffer.alloc(100)]);
    for (let round = 0; round < 4; round++) {
      expect((await h2Request(client, TRITON_STREAM, message)).trailers).toMatchObject({ 'grpc-status': '0' });
      const cut = client.request(TRITON_STREAM);
      cut.on('error', () => {});
      await new Promise<void>((resolve) => cut.write(message.subarray(0, 2_000), () => resolve()));
      await new Promise((resolve) => setTimeout(resolve, 20));
      cut.close(http2.constants.NGHTTP2_CANCEL);
      await new Promise((resolve) => cut.on('close', resolve));
      await h2Request(client, TRITON_STREAM, overCap);
    }
    const finished = await eventually('the request lines', () => requestLines(sidecar.logs), (lines) => lines.length === 12);
    expect(finished.filter((line) => line.outcome === 'completed' && line.model === 'ensemble-7b')).toHaveLength(4);
    const trips = await scrape(sidecar.adminUrl);
    expect(sumValues(trips, 'tokentap_limit_exceeded_total', { limit: 'held_body_bytes' })).toBe(0);
    expect(sumValues(trips, 'tokentap_limit_exceeded_total', { limit: 'sniffed_body_bytes' })).toBe(4);
  });

  it('reads the model of a Triton call whose first message comes split across frames, the prefix a byte at a time, longer than the first buffer made for it', async () => {
    const { upstream, sidecar } = await setUpGrpc();
    const message = grpcFrame(encode('inference.ModelInferRequest', { model_name: 'ensemble-7b', id: 'x'.repeat(3_000) }));
    const stream = connect(sidecar.proxyUrl).request({ ':method': 'POST', ':path': '/inference.GRPCInferenceService/ModelStreamInfer', 'content-type': 'application/grpc', te: 'trailers' });
    stream.on('error', () => {});
    stream.on('data', () => {});
    // Each write its own DATA frame: the next is written once the previous has gone.
    const pieces = [...Array.from({ length: 5 }, (_, i) => message.subarray(i, i + 1)), message.subarray(5, 700), message.subarray(700)];
    for (const piece of pieces) await new Promise<void>((resolve) => stream.write(piece, () => resolve()));
    stream.end();
    await new Promise((resolve) => stream.on('close', resolve));
    expect(upstream.seen[0]?.body.equals(message)).toBe(true);
    expect(await onlyLine(sidecar)).toMatchObject({ model: 'ensemble-7b', outcome: 'completed' });
  });
});
