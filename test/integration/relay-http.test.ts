import { createHash, randomBytes } from 'node:crypto';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { scrape, sumValues } from '../helpers/prometheus-text.js';
import { RawClient, responseHeads, startRawUpstream, type RawRequest } from '../helpers/raw-http.js';
import { eventually, startTestSidecar } from '../helpers/sidecar.js';

/**
 * HTTP/1.1 as the relay must speak it (proxy-server.ts, exchange.ts): framing the node:http server
 * would never produce, from an upstream that writes raw bytes, to a client that writes raw bytes.
 * The script for each request is chosen by its path.
 */
const scripts: Record<string, (request: RawRequest, socket: net.Socket) => void> = {};
let upstream: Awaited<ReturnType<typeof startRawUpstream>>;
let sidecar: Awaited<ReturnType<typeof startTestSidecar>>;
const clients: RawClient[] = [];

beforeAll(async () => {
  upstream = await startRawUpstream((request, socket) => {
    const path = request.target.split('?')[0]!;
    const script = scripts[path];
    if (script === undefined) socket.end('HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n');
    else script(request, socket);
  });
  sidecar = await startTestSidecar(upstream.url, 'upstream_idle_timeout: 2s\n');
});

afterAll(async () => {
  for (const client of clients) client.close();
  await sidecar?.close();
  await upstream?.close();
});

async function client(): Promise<RawClient> {
  const c = await RawClient.connect(sidecar.proxyUrl);
  clients.push(c);
  return c;
}

const get = (path: string, extra = '') => `GET ${path} HTTP/1.1\r\nHost: test\r\n${extra}\r\n`;
const count = (text: string, part: string) => text.split(part).length - 1;
const requestsTo = (path: string) => upstream.seen.filter((r) => r.target === path);

async function outcomes(): Promise<{ completed: number; upstream_error: number; truncated: number }> {
  const m = await scrape(sidecar.adminUrl);
  const of = (outcome: string) => sumValues(m, 'tokentap_requests_total', { outcome });
  return { completed: of('completed'), upstream_error: of('upstream_error'), truncated: of('truncated') };
}

describe('response framing', () => {
  it('forwards a Content-Length body as is, and carries sequential requests on one client and one upstream connection', async () => {
    scripts['/length'] = (_r, socket) => socket.write('HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello');
    const c = await client();
    const connectionsBefore = upstream.connections();
    for (let i = 1; i <= 3; i++) {
      c.write(get('/length'));
      const text = await c.read((t) => count(t, 'hello') === i);
      expect(count(text, 'HTTP/1.1 200 OK\r\n')).toBe(i);
      // A fresh pool hands a connection out again once it has outlived REUSE_PROBATION_MS (100 ms).
      if (i === 1) await new Promise((resolve) => setTimeout(resolve, 300));
    }
    expect(c.text()).toContain('Content-Length: 5\r\n');
    // The idle time after which tokentap closes the connection, announced as node:http does.
    expect(count(c.text(), 'Connection: keep-alive\r\nKeep-Alive: timeout=5\r\n')).toBe(3);
    expect(c.isClosed).toBe(false);
    // One upstream connection for the three (a fresh one at most, if the pool had none idle).
    const used = new Set(requestsTo('/length').map((r) => r.connection));
    expect(used.size).toBe(1);
    expect(upstream.connections() - connectionsBefore).toBeLessThanOrEqual(1);
  });

  it('answers HEAD with the headers and no body, and reads the next request on the same connection', async () => {
    scripts['/head'] = (request, socket) => socket.write(request.method === 'HEAD' ? 'HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n' : 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok');
    const c = await client();
    c.write(`HEAD /head HTTP/1.1\r\nHost: test\r\n\r\n`);
    await c.read((t) => t.endsWith('\r\n\r\n'));
    expect(c.text()).toContain('Content-Length: 1234\r\n');
    c.write(get('/head'));
    const text = await c.read((t) => t.endsWith('ok'));
    expect(responseHeads(text)).toEqual(['HTTP/1.1 200 OK', 'HTTP/1.1 200 OK']);
  });

  it('answers 204 and 304 without a body, and keeps the connection', async () => {
    scripts['/204'] = (_r, socket) => socket.write('HTTP/1.1 204 No Content\r\nX-A: 1\r\n\r\n');
    scripts['/304'] = (_r, socket) => socket.write('HTTP/1.1 304 Not Modified\r\nETag: "x"\r\n\r\n');
    const c = await client();
    c.write(get('/204'));
    await c.read((t) => t.includes('X-A: 1\r\n') && t.endsWith('\r\n\r\n'));
    c.write(get('/304'));
    const text = await c.read((t) => t.includes('ETag: "x"\r\n') && t.endsWith('\r\n\r\n'));
    expect(responseHeads(text)).toEqual(['HTTP/1.1 204 No Content', 'HTTP/1.1 304 Not Modified']);
    expect(c.isClosed).toBe(false);
  });

  it('relays a body delimited by the upstream closing, then closes the client connection; counted completed', async () => {
    scripts['/until-close'] = (_r, socket) => {
      socket.write('HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\ndata: {"choices":[{"delta":{"content":"a"}}]}\n\n');
      setTimeout(() => socket.end('data: [DONE]\n\n'), 30);
    };
    const before = await outcomes();
    const c = await client();
    c.write(get('/until-close'));
    const text = await c.readToClose();
    expect(text).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    expect(text).toContain('Connection: close\r\n');
    expect(text.endsWith('\r\n\r\ndata: {"choices":[{"delta":{"content":"a"}}]}\n\ndata: [DONE]\n\n')).toBe(true);
    await eventually('completed', outcomes, (o) => o.completed === before.completed + 1);
  });

  it('removes chunk framing for an HTTP/1.0 client and closes after the body', async () => {
    scripts['/chunked'] = (_r, socket) => socket.write('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n');
    const c = await client();
    c.write('GET /chunked HTTP/1.0\r\nHost: test\r\n\r\n');
    const text = await c.readToClose();
    expect(text.toLowerCase()).not.toContain('transfer-encoding');
    expect(text.endsWith('\r\n\r\nabcdefg')).toBe(true);
  });

  it('forwards chunk extensions and trailers to an HTTP/1.1 client byte for byte', async () => {
    const body = '5;name=value\r\nhello\r\n0\r\nX-Checksum: 42\r\n\r\n';
    scripts['/trailers'] = (_r, socket) => socket.write(`HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n${body}`);
    const c = await client();
    c.write(get('/trailers'));
    const text = await c.read((t) => t.endsWith('X-Checksum: 42\r\n\r\n'));
    expect(text).toContain('Transfer-Encoding: chunked\r\n');
    expect(text.endsWith(`\r\n\r\n${body}`)).toBe(true);
  });

  it('passes an upstream 103 Early Hints to the client before the final answer', async () => {
    scripts['/hints'] = (_r, socket) => socket.write('HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok');
    const c = await client();
    c.write(get('/hints'));
    const text = await c.read((t) => t.endsWith('ok'));
    expect(responseHeads(text)).toEqual(['HTTP/1.1 103 Early Hints', 'HTTP/1.1 200 OK']);
    expect(text).toContain('Link: </a.css>; rel=preload\r\n');
  });

  it('carries more than 32 request and response headers complete and in order', async () => {
    const names = Array.from({ length: 40 }, (_, i) => `X-H${i}`);
    scripts['/many'] = (_r, socket) => socket.write(`HTTP/1.1 200 OK\r\n${names.map((n) => `${n}: r`).join('\r\n')}\r\nContent-Length: 0\r\n\r\n`);
    const c = await client();
    c.write(get('/many', names.map((n) => `${n}: q\r\n`).join('')));
    const text = await c.read((t) => t.includes('Content-Length: 0\r\n') && t.endsWith('\r\n\r\n'));
    expect([...text.matchAll(/X-H(\d+): r/g)].map((m) => Number(m[1]))).toEqual(names.map((_, i) => i));
    const seen = requestsTo('/many').at(-1)!;
    expect(seen.headers.filter(([n]) => n.startsWith('X-H')).map(([n, v]) => `${n}:${v}`)).toEqual(names.map((n) => `${n}:q`));
  });
});

describe('requests', () => {
  it('forwards a chunked request body as chunked, with the same data', async () => {
    scripts['/upload'] = (request, socket) => socket.write(`HTTP/1.1 200 OK\r\nContent-Length: ${request.body.length}\r\n\r\n${request.body.toString('latin1')}`);
    const c = await client();
    c.write('POST /upload HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n{"a"\r\n');
    await new Promise((r) => setTimeout(r, 30));
    c.write('3\r\n:1}\r\n0\r\n\r\n');
    const text = await c.read((t) => t.endsWith('{"a":1}'));
    expect(text).toContain('Content-Length: 7\r\n');
    const seen = requestsTo('/upload').at(-1)!;
    expect(seen.body.toString()).toBe('{"a":1}');
    expect(seen.headers.find(([n]) => n.toLowerCase() === 'transfer-encoding')?.[1]).toBe('chunked');
  });

  it('answers pipelined requests in order', async () => {
    scripts['/slow'] = (_r, socket) => setTimeout(() => socket.write('HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nslow'), 50);
    scripts['/fast'] = (_r, socket) => socket.write('HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nfast');
    const c = await client();
    c.write(get('/slow') + get('/fast') + get('/fast'));
    const text = await c.read((t) => count(t, 'fast') === 2);
    expect(text.indexOf('slow')).toBeLessThan(text.indexOf('fast'));
    expect(responseHeads(text)).toHaveLength(3);
  });

  it("passes the upstream's 100 Continue to a client that expects it, then the answer", async () => {
    scripts['/continue'] = (request, socket) => socket.write(`HTTP/1.1 200 OK\r\nContent-Length: ${request.body.length}\r\n\r\n${request.body.toString()}`);
    const c = await client();
    c.write('POST /continue HTTP/1.1\r\nHost: test\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n');
    // The body goes only once told to, as curl does.
    await c.read((t) => t.includes('HTTP/1.1 100 Continue\r\n\r\n'));
    c.write('hi');
    const text = await c.read((t) => t.endsWith('hi'));
    expect(responseHeads(text)).toEqual(['HTTP/1.1 100 Continue', 'HTTP/1.1 200 OK']);
    expect(requestsTo('/continue').at(-1)!.headers.some(([n, v]) => n === 'Expect' && v === '100-continue')).toBe(true);
  });

  it('answers a malformed request with 400 naming the parser error, and closes', async () => {
    const c = await client();
    c.write('GET /x HTTP/1.1\r\nHost: test\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n');
    const text = await c.readToClose();
    expect(text).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/);
    expect(text).toContain('tokentap: malformed request (HPE_UNEXPECTED_CONTENT_LENGTH');
  });

  it('answers a head larger than the limit with 431', async () => {
    const c = await client();
    c.write(get('/x', `X-Big: ${'a'.repeat(20_000)}\r\n`));
    const text = await c.readToClose();
    expect(text).toMatch(/^HTTP\/1\.1 431 Request Header Fields Too Large\r\n/);
  });

  it('refuses a protocol upgrade with 501', async () => {
    const c = await client();
    c.write(get('/ws', 'Connection: Upgrade\r\nUpgrade: websocket\r\n'));
    const text = await c.readToClose();
    expect(text).toMatch(/^HTTP\/1\.1 501 Not Implemented\r\n/);
  });
});

describe('backpressure', () => {
  const sha = (data: Buffer) => createHash('sha256').update(data).digest('hex');

  it('carries a large upload to an upstream that stops reading for a while, byte for byte', async () => {
    const body = randomBytes(8 << 20);
    scripts['/big-upload'] = (request, socket) => socket.write(`HTTP/1.1 200 OK\r\nContent-Length: 64\r\n\r\n${sha(request.body)}`);
    const readBefore = new Map(upstream.openSockets().map((s) => [s, s.bytesRead]));
    const c = await client();
    c.write(`POST /big-upload HTTP/1.1\r\nHost: test\r\nContent-Length: ${body.length}\r\n\r\n`);
    // The upstream connection that got the head stops reading, so the relay's writes back up to the client.
    const carrying = () => upstream.openSockets().find((s) => s.bytesRead > (readBefore.get(s) ?? 0));
    const upstreamSide = (await eventually('the head upstream', carrying, (s) => s !== undefined))!;
    upstreamSide.pause();
    c.write(body);
    await new Promise((r) => setTimeout(r, 300));
    upstreamSide.resume();
    const text = await c.read((t) => t.endsWith(sha(body)), 15_000);
    expect(text).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
  });

  it('carries a large answer to a client that stops reading for a while, byte for byte', async () => {
    // Larger than the kernel buffers on both sides of loopback, so the relay must hold the upstream back.
    const answer = randomBytes(24 << 20);
    scripts['/big-answer'] = (_r, socket) => {
      socket.write(`HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: ${answer.length}\r\n\r\n`);
      socket.write(answer);
    };
    const { hostname, port } = new URL(sidecar.proxyUrl);
    const socket = net.connect({ host: hostname, port: Number(port) });
    const parts: Buffer[] = [];
    socket.on('data', (d: Buffer) => parts.push(d));
    // The client reads nothing for half a second from the start.
    socket.pause();
    socket.write('GET /big-answer HTTP/1.1\r\nHost: test\r\n\r\n');
    await new Promise((r) => setTimeout(r, 500));
    socket.resume();
    await eventually('the whole answer', () => Buffer.concat(parts), (b) => b.length >= answer.length + 100 && b.subarray(b.length - answer.length).equals(answer), 15_000);
    socket.destroy();
  });
});

describe('upstream failures', () => {
  it('breaks the client stream on a malformed chunk mid-body and names it in the log', async () => {
    scripts['/bad-chunk'] = (_r, socket) => {
      socket.write('HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n6\r\ndata: \r\n');
      setTimeout(() => socket.write('zz\r\n'), 20);
    };
    const before = await outcomes();
    const c = await client();
    c.write('POST /bad-chunk HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}');
    const text = await c.readToClose();
    // Framed as the upstream framed it, and cut without the last chunk: the client sees a broken stream.
    expect(text.endsWith('6\r\ndata: \r\n')).toBe(true);
    await eventually('upstream_error', outcomes, (o) => o.upstream_error === before.upstream_error + 1);
    const logged = sidecar.logs.filter((l) => l.msg === 'request' && l.path === '/bad-chunk').at(-1);
    expect(logged?.error).toMatch(/^upstream 127\.0\.0\.1:\d+ sent a malformed chunked body \(chunk size expected, found byte 0x7a\)$/);
  });

  it('answers 502 when the upstream closes without answering', async () => {
    scripts['/hang-up'] = (_r, socket) => socket.end();
    const c = await client();
    c.write(get('/hang-up'));
    const text = await c.read((t) => t.includes('}'));
    expect(text).toMatch(/^HTTP\/1\.1 502 Bad Gateway\r\n/);
    expect(text).toContain('closed the connection before answering');
    // The client's connection outlives the upstream's.
    c.write(get('/length'));
    await c.read((t) => t.endsWith('hello'));
  });

  it('does not reuse an upstream connection that sent bytes past the end of its response', async () => {
    scripts['/overrun'] = (_r, socket) => socket.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokEXTRA');
    const c = await client();
    c.write(get('/overrun'));
    const text = await c.read((t) => t.endsWith('ok'));
    expect(text).not.toContain('EXTRA');
    c.write(get('/overrun'));
    await c.read((t) => count(t, 'HTTP/1.1 200') === 2 && t.endsWith('ok'));
    const [first, second] = requestsTo('/overrun').slice(-2);
    expect(second!.connection).not.toBe(first!.connection);
  });
});
