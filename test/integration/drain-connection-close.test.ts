import type net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { FLAG, FRAME, frame, headerBlock, RawH2Client } from '../helpers/h2-frames.js';
import { RawClient, responseHeads, startRawUpstream, type RawRequest } from '../helpers/raw-http.js';
import { startServeProcess } from '../helpers/serve-process.js';
import { eventually } from '../helpers/sidecar.js';

/**
 * Connections busy when SIGTERM comes. HTTP/1.1: the drain closes each after its response, so a
 * response head written during the drain must say `Connection: close` (RFC 9112 section 9.6). One
 * that says `keep-alive` with `Keep-Alive: timeout=5` invites the client to send its next request
 * into a connection tokentap is about to close: a POST sent in that race is lost with no answer and
 * no way for the client to know whether it ran. HTTP/2: GOAWAY at once, naming the last stream
 * taken, so a stream the client opens before reading it is known unprocessed and may be retried
 * elsewhere; it must then never reach the upstream (RFC 9113 section 6.8). The built CLI, stopped
 * by a real signal, in front of an upstream that answers only when the test says so (after the
 * drain has begun).
 */

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const BODY = '{"model":"m","stream":false,"messages":[{"role":"user","content":"drain"}]}';
const request = (id: string) => `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-Request-Id: ${id}\r\nContent-Length: ${BODY.length}\r\n\r\n${BODY}`;
const ANSWER = '{"id":"c1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}';
const response = `HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ${ANSWER.length}\r\n\r\n${ANSWER}`;

/** An upstream holding every request until `answer()`. */
async function heldUpstream() {
  const held: net.Socket[] = [];
  const upstream = await startRawUpstream((_request: RawRequest, socket) => held.push(socket));
  cleanups.push(() => upstream.close());
  return {
    upstream,
    answer: () => {
      for (const socket of held.splice(0)) socket.write(response);
    },
  };
}

async function drainStarted(serve: Awaited<ReturnType<typeof startServeProcess>>): Promise<void> {
  serve.child.kill('SIGTERM');
  await eventually('the drain to begin', () => serve.logs().some((l) => typeof l.msg === 'string' && l.msg.startsWith('tokentap draining')), (x) => x);
}

describe('a keep-alive connection answered during the drain', () => {
  it('gets its response byte for byte with Connection: close and no Keep-Alive, then the connection closes', async () => {
    const { upstream, answer } = await heldUpstream();
    const serve = await startServeProcess(upstream.url, ['--drain-timeout', '20s']);
    cleanups.push(serve.kill);
    const client = await RawClient.connect(serve.proxy);
    cleanups.push(() => client.close());
    client.write(request('keep-alive-during-drain'));
    await eventually('the upstream to hold the request', () => upstream.seen.length, (n) => n === 1);

    await drainStarted(serve);
    answer();
    const received = await client.readToClose(10_000);

    const [head, body] = received.split('\r\n\r\n');
    expect(head).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    expect(head).toMatch(/\r\nConnection: close(\r\n|$)/i);
    expect(head).not.toMatch(/keep-alive/i);
    expect(body).toBe(ANSWER);
    expect((await serve.exit).code).toBe(0);
    expect(serve.logs().filter((l) => l.msg === 'request').map((l) => l.outcome)).toEqual(['completed']);
  }, 60_000);

  it('says Connection: close before the close, so the request pipelined behind it is known unprocessed, never reaches the upstream and is counted shutdown, not client_cancelled', async () => {
    const { upstream, answer } = await heldUpstream();
    const serve = await startServeProcess(upstream.url, ['--drain-timeout', '20s']);
    cleanups.push(serve.kill);
    const client = await RawClient.connect(serve.proxy);
    cleanups.push(() => client.close());
    client.write(request('pipelined-first') + request('pipelined-second'));
    await eventually('the upstream to hold the first request', () => upstream.seen.length, (n) => n === 1);

    await drainStarted(serve);
    answer();
    const received = await client.readToClose(10_000);

    expect(responseHeads(received)).toEqual(['HTTP/1.1 200 OK']);
    expect(received.split('\r\n\r\n')[0]).toMatch(/\r\nConnection: close(\r\n|$)/i);
    expect(received.endsWith(ANSWER)).toBe(true);
    expect((await serve.exit).code).toBe(0);
    expect(upstream.seen.map((r) => r.headers.find(([name]) => name.toLowerCase() === 'x-request-id')?.[1])).toEqual(['pipelined-first']);
    // The client did not cancel the second request: the drain declined it (status 0: nothing was answered).
    const requests = serve.logs().filter((l) => l.msg === 'request');
    expect(requests.map((l) => [l.outcome, l.status]).sort()).toEqual([
      ['completed', 200],
      ['shutdown', 0],
    ]);
  }, 60_000);
});

const requestHead = (id: string) =>
  headerBlock([
    [':method', 'POST'],
    [':scheme', 'http'],
    [':path', '/v1/chat/completions'],
    [':authority', 'x'],
    ['content-type', 'application/json'],
    ['x-request-id', id],
  ]);
const h2Request = (stream: number, id: string) => Buffer.concat([frame(FRAME.HEADERS, FLAG.END_HEADERS, stream, requestHead(id)), frame(FRAME.DATA, FLAG.END_STREAM, stream, Buffer.from(BODY))]);

describe('an HTTP/2 session during the drain', () => {
  it('gets GOAWAY(NO_ERROR) naming the stream in flight at once, that stream answered byte for byte, and a stream opened after it never forwarded', async () => {
    const { upstream, answer } = await heldUpstream();
    const serve = await startServeProcess(upstream.url, ['--drain-timeout', '20s']);
    cleanups.push(serve.kill);
    const client = await RawH2Client.connect(serve.proxy);
    cleanups.push(() => client.socket.destroy());
    client.write(h2Request(1, 'h2-in-flight'));
    await eventually('the upstream to hold the first stream', () => upstream.seen.length, (n) => n === 1);

    await drainStarted(serve);
    const goaway = await eventually('a GOAWAY', () => client.frames().find((f) => f.type === FRAME.GOAWAY), (f) => f !== undefined);
    expect(goaway?.payload.readUInt32BE(0)).toBe(1);
    expect(client.goawayCode()).toBe(0);
    // A client that had not read the GOAWAY yet opens its next stream.
    client.write(h2Request(3, 'h2-after-goaway'));
    answer();
    await eventually('the first stream to end', () => client.ended(1), (ended) => ended);

    expect(client.data(1).toString('latin1')).toBe(ANSWER);
    expect((await serve.exit).code).toBe(0);
    expect(upstream.seen.map((r) => r.headers.find(([name]) => name.toLowerCase() === 'x-request-id')?.[1])).toEqual(['h2-in-flight']);
    expect(client.frames().filter((f) => f.streamId === 3 && f.type === FRAME.HEADERS)).toEqual([]);
    expect(serve.logs().filter((l) => l.msg === 'request').map((l) => l.outcome)).toEqual(['completed']);
  }, 60_000);
});
