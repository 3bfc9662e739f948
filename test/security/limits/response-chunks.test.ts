import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { startRawUpstream } from '../../helpers/raw-http.js';
import { eventually } from '../../helpers/sidecar.js';
import { cpuMs, oneByteChunks, rssMiB, startSidecarProcess, type SidecarProcess } from './harness.js';

/**
 * Response bodies an upstream sends in 1-byte chunks (6 bytes on the wire per byte of data): the
 * taps hold what they need of them (a JSON answer to parse at its end, an unfinished NDJSON or SSE
 * line) as bytes, not as an object per piece. Held per piece, 2 JSON answers of 4 MB grew the
 * sidecar by 925 MiB, 12 killed it (V8 out of memory), 4 NDJSON lines of 1 MB took 504 MiB and 4
 * SSE lines of 2 MB 209 MiB; with observation off the same cases grew it by 15-25 MiB.
 */

/** A request through the proxy whose answer is read as bytes, resolved once `wireBytes` of body have arrived after the head. */
function request(proxy: string, path: string, wireBytes: number): Promise<Buffer> {
  const { hostname, port } = new URL(proxy);
  const body = '{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}';
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: hostname, port: Number(port) });
    const parts: Buffer[] = [];
    let received = 0;
    let bodyStart = -1;
    socket.on('error', reject);
    socket.on('close', () => reject(new Error(`closed after ${received} bytes`)));
    socket.on('data', (data: Buffer) => {
      parts.push(data);
      received += data.length;
      if (bodyStart === -1) {
        const head = Buffer.concat(parts).indexOf('\r\n\r\n');
        if (head === -1) return;
        bodyStart = head + 4;
      }
      if (received - bodyStart < wireBytes) return;
      socket.removeAllListeners('close');
      socket.destroy();
      resolve(Buffer.concat(parts).subarray(bodyStart));
    });
    socket.write(`POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
  });
}

/** The data of a chunked body (sizes in hex, no extensions), up to its last chunk. */
function dechunk(wire: string): string {
  let data = '';
  for (let at = 0; ; ) {
    const lineEnd = wire.indexOf('\r\n', at);
    const size = Number.parseInt(wire.slice(at, lineEnd), 16);
    if (size === 0) return data;
    data += wire.slice(lineEnd + 2, lineEnd + 2 + size);
    at = lineEnd + 2 + size + 2;
  }
}

let sidecar: SidecarProcess | undefined;
let closeUpstream: (() => Promise<void>) | undefined;
afterEach(async () => {
  sidecar?.stop();
  sidecar = undefined;
  await closeUpstream?.();
  closeUpstream = undefined;
});

const content = (size: number): string => 'a'.repeat(size);

describe('response bodies in 1-byte chunks', { timeout: 90_000 }, () => {
  it.each([
    {
      what: 'two JSON answers of 4 MB, parsed at their end',
      path: '/v1/chat/completions',
      type: 'application/json',
      streams: 2,
      data: Buffer.from(`{"choices":[{"message":{"content":"${content(4_000_000)}"}}],"usage":{"prompt_tokens":3,"completion_tokens":1}}`),
      end: true,
    },
    { what: 'four NDJSON lines of 1 MB not yet ended', path: '/api/chat', type: 'application/x-ndjson', streams: 4, data: Buffer.from(`{"message":{"content":"${content(1_000_000)}`), end: false },
    { what: 'four SSE lines of 2 MB not yet ended', path: '/v1/chat/completions', type: 'text/event-stream', streams: 4, data: Buffer.from(`data: {"x":"${content(2_000_000)}`), end: false },
  ])('$what: the client gets every byte, and the sidecar holds about the bytes, not an object per piece', async ({ path, type, streams, data, end }) => {
    const wire = oneByteChunks(data, end);
    const upstream = await startRawUpstream((request, socket) => {
      // The sidecar's own requests (model discovery, readiness) get a plain 404.
      if (request.method !== 'POST') {
        socket.write('HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n');
        return;
      }
      socket.write(`HTTP/1.1 200 OK\r\nContent-Type: ${type}\r\nTransfer-Encoding: chunked\r\n\r\n`);
      socket.write(wire);
    });
    closeUpstream = upstream.close;
    sidecar = await startSidecarProcess(upstream.url);
    const before = rssMiB(sidecar.pid);
    const bodies = await Promise.all(Array.from({ length: streams }, () => request((sidecar as SidecarProcess).proxy, path, wire.length)));
    const grownMiB = rssMiB(sidecar.pid) - before;
    for (const body of bodies) expect(body.equals(wire)).toBe(true);
    expect(grownMiB).toBeLessThan(120);
  });
});

describe('inject_usage on an event sent in 1-byte chunks', { timeout: 60_000 }, () => {
  it('reads each byte once: 65 KB events cost tens of milliseconds of CPU, not seconds, and reach the client whole', async () => {
    const event = Buffer.from(`data: {"choices":[{"delta":{"content":"${content(65_000)}"}}]}\n\n`);
    const data = Buffer.concat([event, event, Buffer.from('data: [DONE]\n\n')]);
    const wire = oneByteChunks(data, true);
    const upstream = await startRawUpstream((request, socket) => {
      if (request.method !== 'POST') {
        socket.write('HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n');
        return;
      }
      socket.write('HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n');
      socket.write(wire);
    });
    closeUpstream = upstream.close;
    sidecar = await startSidecarProcess(upstream.url, { config: 'inject_usage: true\n' });
    const cpuBefore = cpuMs(sidecar.pid);
    const { hostname, port } = new URL(sidecar.proxy);
    const body = '{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}';
    const received = await new Promise<string>((resolve, reject) => {
      const socket = net.connect({ host: hostname, port: Number(port) });
      const parts: Buffer[] = [];
      socket.on('error', reject);
      socket.on('data', (chunk: Buffer) => {
        parts.push(chunk);
        if (chunk.includes('0\r\n\r\n')) {
          socket.destroy();
          resolve(Buffer.concat(parts).toString('latin1'));
        }
      });
      socket.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
    });
    const cpu = cpuMs(sidecar.pid) - cpuBefore;
    // Re-framed for the client: the events whole, in order.
    expect(dechunk(received.slice(received.indexOf('\r\n\r\n') + 4))).toBe(data.toString('latin1'));
    // 4.7 s of CPU per such event when each byte was joined to the held start and read again from its first byte.
    expect(cpu).toBeLessThan(2_000);
  });
});

describe('SSE lines the spec ignores', { timeout: 60_000 }, () => {
  it('cost the decoder no stack trace each: 4 MB of `x` lines cost seconds less than the 15 s they did', async () => {
    const data = Buffer.concat([Buffer.from('x\n'.repeat(2 << 20)), Buffer.from('data: [DONE]\n\n')]);
    const upstream = await startRawUpstream((request, socket) => {
      if (request.method !== 'POST') {
        socket.write('HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n');
        return;
      }
      socket.write(`HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: ${data.length}\r\n\r\n`);
      socket.write(data);
    });
    closeUpstream = upstream.close;
    sidecar = await startSidecarProcess(upstream.url);
    const cpuBefore = cpuMs(sidecar.pid);
    const body = await request(sidecar.proxy, '/v1/chat/completions', data.length);
    const cpu = cpuMs(sidecar.pid) - cpuBefore;
    expect(body.equals(data)).toBe(true);
    // Each such line made eventsource-parser build an Error with its stack: 3.5 ms of CPU per KB.
    expect(cpu).toBeLessThan(6_000);
  });
});

describe('a model listing in 1-byte chunks', { timeout: 60_000 }, () => {
  it('is read into one buffer: the sidecar holds about its bytes, not the million pieces node:http hands out', async () => {
    const listing = Buffer.from(JSON.stringify({ object: 'list', data: [{ id: 'm', object: 'model', padding: content(1_000_000) }] }));
    const wire = oneByteChunks(listing, true);
    let listings = 0;
    const upstream = await startRawUpstream((request, socket) => {
      if (request.method !== 'GET') return;
      listings++;
      socket.write('HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n');
      socket.write(wire, () => socket.end());
    });
    closeUpstream = upstream.close;
    // Time enough for node:http to read 6 MB of framing (the default is 2 s).
    const started = await startSidecarProcess(upstream.url, { config: 'model_discovery:\n  timeout: 30s\n' });
    sidecar = started;
    const rss = rssMiB(started.pid);
    // The discovery at start-up logs what it read.
    const read = await eventually('the listing read', () => started.logs().find((line) => typeof line.msg === 'string' && line.msg.startsWith('model discovery')), (line) => line !== undefined, 30_000);
    expect(read?.models).toEqual(['m']);
    expect(listings).toBe(1);
    // About 300 MiB per listing held as pieces.
    expect(rssMiB(started.pid) - rss).toBeLessThan(120);
  });
});
