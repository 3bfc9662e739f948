import http2 from 'node:http2';
import net, { type AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { scrape, sumValues } from '../../helpers/prometheus-text.js';
import { eventually, startTestSidecar } from '../../helpers/sidecar.js';
import { sleep } from './harness.js';

/**
 * A client that stops reading its answer: tokentap stops reading the upstream for it (backpressure),
 * so the upstream goes quiet. That quiet is the client's doing. A review found it cut as the
 * upstream's silence after upstream_idle_timeout: outcome `timeout`, logged "upstream ... sent
 * nothing", which burns the SLO, so any client could page on-call by opening streams and not
 * reading them; and a client that only paused for longer than upstream_idle_timeout lost its answer.
 */

/** 48 MiB: far more than the loopback socket buffers on both sides hold, so the upstream must wait. */
const BODY_BYTES = 48 << 20;
/** The body, a byte pattern whose every MiB differs, so a lost or repeated piece shows. */
const BODY = Buffer.alloc(BODY_BYTES);
for (let i = 0; i < BODY_BYTES; i++) BODY[i] = (i * 7 + (i >> 20)) & 0xff;
const HEAD = `HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: ${BODY_BYTES}\r\n\r\n`;

/** An upstream that answers every request with BODY, written as fast as the connection takes it, and says when it was closed. */
async function startBulkUpstream() {
  const sockets: Array<{ socket: net.Socket; written: number; closed: boolean }> = [];
  const server = net.createServer((socket) => {
    const entry = { socket, written: 0, closed: false };
    sockets.push(entry);
    socket.on('error', () => {});
    socket.on('close', () => (entry.closed = true));
    socket.once('data', () => {
      socket.write(HEAD);
      const piece = 256 << 10;
      const more = (): void => {
        while (entry.written < BODY_BYTES) {
          const end = Math.min(BODY_BYTES, entry.written + piece);
          const ok = socket.write(BODY.subarray(entry.written, end));
          entry.written = end;
          if (!ok) {
            socket.once('drain', more);
            return;
          }
        }
      };
      more();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    sockets,
    async close() {
      for (const { socket } of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/** A client that sends one GET and stops reading at once; `resume()` reads on and collects everything. */
async function stalledClient(proxyUrl: string) {
  const { hostname, port } = new URL(proxyUrl);
  const socket = net.connect({ host: hostname, port: Number(port) });
  socket.on('error', () => {});
  await new Promise((resolve) => socket.once('connect', resolve));
  const received: Buffer[] = [];
  let receivedBytes = 0;
  let burst: { untilBytes: number; done: () => void } | undefined;
  let closed = false;
  socket.on('close', () => {
    closed = true;
    burst?.done();
  });
  socket.pause();
  // Paused before the listener is added, so the listener does not start the flow.
  socket.on('data', (data: Buffer) => {
    received.push(data);
    receivedBytes += data.length;
    if (burst !== undefined && receivedBytes >= burst.untilBytes) {
      socket.pause();
      burst.done();
    }
  });
  socket.write('GET /bulk HTTP/1.1\r\nHost: x\r\n\r\n');
  return {
    socket,
    get closed() {
      return closed;
    },
    received: () => Buffer.concat(received),
    receivedBytes: () => receivedBytes,
    /** Reads `bytes` more (or to the close), then stops reading again. */
    readBurst: (bytes: number) =>
      new Promise<void>((resolve) => {
        burst = {
          untilBytes: receivedBytes + bytes,
          done: () => {
            burst = undefined;
            resolve();
          },
        };
        socket.resume();
      }),
  };
}

let upstream: Awaited<ReturnType<typeof startBulkUpstream>>;
beforeAll(async () => {
  upstream = await startBulkUpstream();
});
afterAll(async () => {
  await upstream.close();
});

describe('limits.response_send_timeout: a client that takes no byte of its answer', () => {
  it('is not cut as the upstream`s silence: a client that pauses for five times upstream_idle_timeout then reads gets every byte, outcome completed', async () => {
    const sidecar = await startTestSidecar(upstream.url, 'upstream_idle_timeout: 300ms\nlimits:\n  response_send_timeout: 20s\n');
    try {
      const client = await stalledClient(sidecar.proxyUrl);
      await sleep(1_500);
      client.socket.resume();
      const expected = Buffer.concat([Buffer.from(`HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: ${BODY_BYTES}\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\n\r\n`, 'latin1'), BODY]);
      await eventually('the whole answer', () => client.received().length, (n) => n >= expected.length || client.closed, 20_000);
      // Byte for byte: the head tokentap wrote, then the upstream's 48 MiB unchanged.
      expect(client.received().length).toBe(expected.length);
      expect(client.received().equals(expected)).toBe(true);
      const lines = await eventually('the request line', () => sidecar.logs.filter((l) => l.msg === 'request'), (l) => l.length === 1);
      expect(lines[0]).toMatchObject({ outcome: 'completed', status: 200 });
      expect(lines[0]?.error).toBeUndefined();
      client.socket.destroy();
    } finally {
      await sidecar.close();
    }
  }, 40_000);

  it('is cut after response_send_timeout, not upstream_idle_timeout: outcome client_cancelled naming the limit, counted, and the upstream connection closed', async () => {
    const sidecar = await startTestSidecar(upstream.url, 'upstream_idle_timeout: 60s\nlimits:\n  response_send_timeout: 1s\n');
    try {
      const connectionsBefore = upstream.sockets.length;
      const startedMs = performance.now();
      const client = await stalledClient(sidecar.proxyUrl);
      const upstreamSide = await eventually('the upstream connection', () => upstream.sockets[connectionsBefore], (s) => s !== undefined && s.written > 0);
      const lines = await eventually('the request line', () => sidecar.logs.filter((l) => l.msg === 'request'), (l) => l.length === 1, 15_000);
      const tookMs = performance.now() - startedMs;
      expect(lines[0]).toMatchObject({ outcome: 'client_cancelled', status: 200, error: 'the client took no response bytes for 1000 ms (limits.response_send_timeout)' });
      // Not before the limit, and long before upstream_idle_timeout (60 s) could have cut it.
      expect(tookMs).toBeGreaterThanOrEqual(1_000);
      expect(tookMs).toBeLessThan(15_000);
      await eventually('the upstream connection closed', () => upstreamSide!.closed, (closed) => closed);
      // The upstream was stopped: it could not write its whole answer into a reader that is gone.
      expect(upstreamSide!.written).toBeLessThan(BODY_BYTES);
      // Its stream was broken, never ended cleanly: once it reads again it finds the close, short of the length.
      client.socket.resume();
      await eventually('the client connection closed', () => client.closed, (closed) => closed);
      expect(client.received().length).toBeLessThan(HEAD.length + BODY_BYTES);
      const metrics = await scrape(sidecar.adminUrl);
      expect(sumValues(metrics, 'tokentap_limit_exceeded_total', { limit: 'response_send_timeout' })).toBe(1);
      expect(sumValues(metrics, 'tokentap_requests_total', { outcome: 'timeout' })).toBe(0);
      client.socket.destroy();
    } finally {
      await sidecar.close();
    }
  }, 40_000);

  it('is not cut while it keeps taking bytes, however slowly: a client reading in bursts 300 ms apart for three times the limit gets every byte', async () => {
    const sidecar = await startTestSidecar(upstream.url, 'upstream_idle_timeout: 60s\nlimits:\n  response_send_timeout: 2s\n');
    try {
      const client = await stalledClient(sidecar.proxyUrl);
      // Reads 1 MiB, then nothing for 300 ms, for three times the limit: slow enough that the body
      // is still coming at the end (a burst of 5 ms read it all at once on a quiet machine, so the
      // limit was never tested), and 1 MiB a burst so the kernel's receive window opens each time.
      const slowUntil = performance.now() + 6_000;
      while (performance.now() < slowUntil && !client.closed) {
        await client.readBurst(1 << 20);
        await sleep(300);
      }
      expect(client.receivedBytes(), 'the body was still coming after the slow reads').toBeLessThan(BODY_BYTES);
      client.socket.resume();
      await eventually('the whole body', () => client.received().length, (n) => n >= BODY_BYTES || client.closed, 20_000);
      expect(client.closed).toBe(false);
      expect(client.received().subarray(-BODY_BYTES).equals(BODY)).toBe(true);
      const lines = await eventually('the request line', () => sidecar.logs.filter((l) => l.msg === 'request'), (l) => l.length === 1);
      expect(lines[0]).toMatchObject({ outcome: 'completed' });
      client.socket.destroy();
    } finally {
      await sidecar.close();
    }
  }, 40_000);
});

/** An HTTP/2 client that asks for the bulk answer and reads none of it until `resume()`: its flow-control window stays shut. */
function stalledH2Client(proxyUrl: string) {
  const session = http2.connect(proxyUrl);
  session.on('error', () => {});
  const stream = session.request({ ':method': 'GET', ':path': '/bulk' });
  stream.pause();
  const received: Buffer[] = [];
  let status = 0;
  let ended = false;
  let resetCode: number | undefined;
  stream.on('response', (headers) => (status = Number(headers[':status'])));
  stream.on('data', (data: Buffer) => received.push(data));
  stream.on('end', () => (ended = true));
  stream.on('error', () => {});
  stream.on('close', () => (resetCode = stream.rstCode));
  return {
    stream,
    session,
    get status() {
      return status;
    },
    get ended() {
      return ended;
    },
    get resetCode() {
      return resetCode;
    },
    received: () => Buffer.concat(received),
  };
}

describe('limits.response_send_timeout over HTTP/2: a stream whose client opens no window', () => {
  it('is not cut as the upstream`s silence: a client that pauses for five times upstream_idle_timeout then reads gets every byte, outcome completed', async () => {
    const sidecar = await startTestSidecar(upstream.url, 'upstream_idle_timeout: 300ms\nlimits:\n  response_send_timeout: 20s\n');
    try {
      const client = stalledH2Client(sidecar.proxyUrl);
      await sleep(1_500);
      client.stream.resume();
      await eventually('the whole body', () => client.ended || client.resetCode !== undefined, (done) => done, 20_000);
      expect(client.status).toBe(200);
      expect(client.ended).toBe(true);
      expect(client.received().equals(BODY)).toBe(true);
      const lines = await eventually('the request line', () => sidecar.logs.filter((l) => l.msg === 'request'), (l) => l.length === 1);
      expect(lines[0]).toMatchObject({ outcome: 'completed', status: 200 });
      client.session.close();
    } finally {
      await sidecar.close();
    }
  }, 40_000);

  it('is cut after response_send_timeout, not upstream_idle_timeout: outcome client_cancelled naming the limit, counted, the upstream connection closed', async () => {
    const sidecar = await startTestSidecar(upstream.url, 'upstream_idle_timeout: 60s\nlimits:\n  response_send_timeout: 1s\n');
    try {
      const connectionsBefore = upstream.sockets.length;
      const startedMs = performance.now();
      const client = stalledH2Client(sidecar.proxyUrl);
      const upstreamSide = await eventually('the upstream connection', () => upstream.sockets[connectionsBefore], (s) => s !== undefined && s.written > 0);
      const lines = await eventually('the request line', () => sidecar.logs.filter((l) => l.msg === 'request'), (l) => l.length === 1, 15_000);
      const tookMs = performance.now() - startedMs;
      expect(lines[0]).toMatchObject({ outcome: 'client_cancelled', status: 200, error: 'the client took no response bytes for 1000 ms (limits.response_send_timeout)' });
      expect(tookMs).toBeGreaterThanOrEqual(1_000);
      expect(tookMs).toBeLessThan(15_000);
      await eventually('the upstream connection closed', () => upstreamSide!.closed, (closed) => closed);
      expect(upstreamSide!.written).toBeLessThan(BODY_BYTES);
      // The stream is reset (INTERNAL_ERROR: node:http2 resets a stream mid-body with no other code), never ended cleanly.
      client.stream.resume();
      await eventually('the stream closed', () => client.resetCode, (code) => code !== undefined);
      expect(client.ended).toBe(false);
      expect(client.resetCode).toBe(http2.constants.NGHTTP2_INTERNAL_ERROR);
      const metrics = await scrape(sidecar.adminUrl);
      expect(sumValues(metrics, 'tokentap_limit_exceeded_total', { limit: 'response_send_timeout' })).toBe(1);
      expect(sumValues(metrics, 'tokentap_requests_total', { outcome: 'timeout' })).toBe(0);
      client.session.close();
    } finally {
      await sidecar.close();
    }
  }, 40_000);
});
