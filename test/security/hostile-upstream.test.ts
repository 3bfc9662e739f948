import { createHash } from 'node:crypto';
import net, { type AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCaptureUpstream, type SplitMessage } from '../helpers/capture-upstream.js';
import { scrape, sumValues } from '../helpers/prometheus-text.js';
import { RawClient } from '../helpers/raw-http.js';
import { startTestSidecar } from '../helpers/sidecar.js';

/**
 * An upstream that misbehaves (refuses, resets, goes silent, never ends, sends garbage, huge
 * lines, invalid UTF-8, a huge head): each gives the client a 502 or 504 before the head or a
 * broken stream after it, counted with the right outcome, and the sidecar answers the next
 * request. Bounded: every endless upstream stops when its connection closes or after 5 s.
 */

const scripts: Record<string, (socket: net.Socket) => void> = {};
let upstream: Awaited<ReturnType<typeof startCaptureUpstream>>;
let sidecar: Awaited<ReturnType<typeof startTestSidecar>>;
const clients: RawClient[] = [];
const IDLE_TIMEOUT_MS = 500;

beforeAll(async () => {
  upstream = await startCaptureUpstream((message: SplitMessage, socket) => {
    const script = scripts[message.target];
    if (script === undefined) return false;
    script(socket);
    return true;
  });
  sidecar = await startTestSidecar(upstream.url, `upstream_idle_timeout: ${IDLE_TIMEOUT_MS}ms\n`);
});

afterAll(async () => {
  for (const c of clients) c.close();
  await sidecar?.close();
  await upstream?.close();
});

async function client(url = sidecar.proxyUrl): Promise<RawClient> {
  const c = await RawClient.connect(url);
  clients.push(c);
  return c;
}

const get = (path: string) => `GET ${path} HTTP/1.1\r\nHost: x\r\n\r\n`;
const sha = (data: Buffer) => createHash('sha256').update(data).digest('hex');

async function outcome(name: string, adminUrl = sidecar.adminUrl): Promise<number> {
  return sumValues(await scrape(adminUrl), 'tokentap_requests_total', { outcome: name });
}

/** The sidecar still serves: a plain request gets its answer. */
async function stillServes(): Promise<void> {
  const c = await client();
  c.write(get('/v1/echo'));
  const text = await c.read((t) => t.endsWith('}'));
  expect(text).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
}

describe('hostile upstreams', () => {
  it('answers 502 naming the refusal when the upstream refuses connections, and goes on serving', async () => {
    const closed = net.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const refusing = await startTestSidecar(`http://127.0.0.1:${port}`);
    try {
      for (let i = 0; i < 2; i++) {
        const c = await client(refusing.proxyUrl);
        c.write(get('/v1/echo'));
        const text = await c.read((t) => t.endsWith('}'));
        expect(text).toMatch(/^HTTP\/1\.1 502 Bad Gateway\r\n/);
        expect(text).toContain('ECONNREFUSED');
      }
      expect(await outcome('upstream_error', refusing.adminUrl)).toBe(2);
    } finally {
      await refusing.close();
    }
  });

  it('answers 502 when the upstream resets before the head', async () => {
    scripts['/reset-before-head'] = (s) => s.resetAndDestroy();
    const before = await outcome('upstream_error');
    const c = await client();
    c.write(get('/reset-before-head'));
    const text = await c.read((t) => t.endsWith('}'));
    expect(text).toMatch(/^HTTP\/1\.1 502 Bad Gateway\r\n/);
    expect(await outcome('upstream_error')).toBe(before + 1);
    await stillServes();
  });

  it('breaks the client stream when the upstream resets after the head', async () => {
    scripts['/reset-after-head'] = (s) => {
      s.write('HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n6\r\ndata: \r\n');
      setTimeout(() => s.resetAndDestroy(), 20);
    };
    const before = await outcome('upstream_error');
    const c = await client();
    c.write(get('/reset-after-head'));
    const text = await c.readToClose();
    expect(text.endsWith('6\r\ndata: \r\n')).toBe(true);
    await expect.poll(() => outcome('upstream_error')).toBe(before + 1);
    await stillServes();
  });

  it('answers 504 when the upstream stays silent for upstream_idle_timeout, counted timeout', async () => {
    scripts['/silent'] = () => {};
    const before = await outcome('timeout');
    const c = await client();
    const started = performance.now();
    c.write(get('/silent'));
    const text = await c.read((t) => t.endsWith('}'), 5_000);
    expect(text).toMatch(/^HTTP\/1\.1 504 Gateway Timeout\r\n/);
    expect(performance.now() - started).toBeGreaterThanOrEqual(IDLE_TIMEOUT_MS - 50);
    expect(await outcome('timeout')).toBe(before + 1);
    await stillServes();
  });

  it('stops an endless body at the upstream as soon as the client leaves, counted client_cancelled', async () => {
    let upstreamClosed = false;
    scripts['/endless'] = (s) => {
      s.write('HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n');
      const started = performance.now();
      const timer = setInterval(() => {
        if (s.destroyed || performance.now() - started > 5_000) clearInterval(timer);
        else s.write('data: {"choices":[{"delta":{"content":"a"}}]}\n\n');
      }, 5);
      s.on('close', () => (upstreamClosed = true));
    };
    const before = await outcome('client_cancelled');
    const c = await client();
    c.write(get('/endless'));
    await c.read((t) => t.length > 10_000, 5_000);
    c.close();
    await expect.poll(() => upstreamClosed, { timeout: 2_000 }).toBe(true);
    await expect.poll(() => outcome('client_cancelled')).toBe(before + 1);
    await stillServes();
  });

  it('answers 502 when the upstream sends garbage instead of a head', async () => {
    scripts['/garbage'] = (s) => s.write('hello, this is not HTTP\r\n\r\n');
    const c = await client();
    c.write(get('/garbage'));
    const text = await c.read((t) => t.endsWith('}'));
    expect(text).toMatch(/^HTTP\/1\.1 502 Bad Gateway\r\n/);
    expect(text).toContain('HPE_INVALID_CONSTANT');
    await stillServes();
  });

  it('answers 502 to a 1 MiB response head (past the parser head limit)', async () => {
    scripts['/huge-head'] = (s) => s.write(`HTTP/1.1 200 OK\r\nX-Big: ${'a'.repeat(1 << 20)}\r\nContent-Length: 0\r\n\r\n`);
    const c = await client();
    c.write(get('/huge-head'));
    const text = await c.read((t) => t.endsWith('}'));
    expect(text).toMatch(/^HTTP\/1\.1 502 Bad Gateway\r\n/);
    expect(text).toContain('HPE_HEADER_OVERFLOW');
    await stillServes();
  });

  it('relays a 10 MiB SSE line byte for byte, and goes on serving', async () => {
    const body = Buffer.concat([Buffer.from('data: {"choices":[{"delta":{"content":"'), Buffer.alloc(10 << 20, 0x61), Buffer.from('"}}]}\n\ndata: [DONE]\n\n')]);
    scripts['/huge-line'] = (s) => {
      s.write(`HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: ${body.length}\r\n\r\n`);
      s.write(body);
    };
    const { hostname, port } = new URL(sidecar.proxyUrl);
    const socket = net.connect({ host: hostname, port: Number(port) });
    const parts: Buffer[] = [];
    let received = 0;
    socket.on('data', (d: Buffer) => {
      parts.push(d);
      received += d.length;
    });
    socket.write(get('/huge-line'));
    await expect.poll(() => received >= body.length, { timeout: 15_000 }).toBe(true);
    const all = Buffer.concat(parts);
    expect(sha(all.subarray(all.indexOf('\r\n\r\n') + 4))).toBe(sha(body));
    socket.destroy();
    await stillServes();
  });

  it('relays invalid UTF-8 byte for byte', async () => {
    const body = Buffer.concat([Buffer.from('data: {"choices":[{"delta":{"content":"'), Buffer.from([0xff, 0xfe, 0xc3, 0x28, 0xed, 0xa0, 0x80]), Buffer.from('"}}]}\n\ndata: [DONE]\n\n')]);
    scripts['/bad-utf8'] = (s) => {
      s.write(`HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: ${body.length}\r\n\r\n`);
      s.write(body);
    };
    const c = await client();
    c.write(get('/bad-utf8'));
    const text = await c.read((t) => t.endsWith('[DONE]\n\n'));
    expect(Buffer.from(text.slice(text.indexOf('\r\n\r\n') + 4), 'latin1').equals(body)).toBe(true);
    await stillServes();
  });
});
