import net, { type AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RequestSplitter } from '../helpers/capture-upstream.js';
import type { RawClient } from '../helpers/raw-http.js';
import { RawClient as Client } from '../helpers/raw-http.js';
import { scriptedRelay } from '../helpers/scripted-relay.js';
import { startExpectDesyncUpstream, startZeroClUpstream } from '../helpers/desync-upstreams.js';
import { startTestSidecar } from '../helpers/sidecar.js';

/**
 * A hostile review of the HTTP/1.1 relay, from both sides, pinning what the rest of the suite did
 * not: each case asserts the bytes the client and the upstream received. The theme is the worst
 * defect a relay can have, one request's answer delivered to another: an upstream connection that
 * is out of step (an unasked 101, a `Connection: close` it did not keep, an answer before the
 * request was sent, a body after a bodiless head) is never handed to the next request.
 */

const relay = scriptedRelay();
const { scripts } = relay;
const client = (): Promise<RawClient> => relay.client();
const get = (path: string, extra = '') => `GET ${path} HTTP/1.1\r\nHost: x\r\n${extra}\r\n`;
const forged = 'HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nforged';
const echoOf = (text: string) => JSON.parse(text.slice(text.lastIndexOf('\r\n\r\n') + 4)) as { target: string; authorization: string | null };

describe('an upstream connection out of step is never handed to the next request', () => {
  it('answers 502 to a 101 Switching Protocols nobody asked for, relays none of it, and closes that connection', async () => {
    scripts['/unasked-101'] = (s) => s.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n${forged}`);
    relay.upstream.mark();
    const c = await client();
    c.write(get('/unasked-101'));
    const text = await c.read((t) => t.endsWith('}'));
    expect(text).toMatch(/^HTTP\/1\.1 502 Bad Gateway\r\n/);
    expect(text).toContain('101 Switching Protocols to a request that did not ask to upgrade');
    expect(text).not.toContain('forged');
    expect(text).not.toContain('HTTP/1.1 101');
    const [carrying] = relay.upstream.touched();
    await expect.poll(() => carrying!.closed, { timeout: 2_000 }).toBe(true);
    // The next request, from another client, gets its own answer from a fresh connection.
    const victim = await client();
    victim.write(get('/v1/echo', 'Authorization: Bearer victim\r\n'));
    const answer = await victim.read((t) => t.endsWith('}'));
    expect(echoOf(answer)).toEqual({ method: 'GET', target: '/v1/echo', authorization: 'Bearer victim', body: '' });
    expect(relay.upstream.touched()).toHaveLength(2);
  });

  it('closes a connection whose answer said Connection: close, even when the upstream keeps it and sends a second answer', async () => {
    scripts['/close-kept'] = (s) => {
      s.write('HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok');
      setTimeout(() => s.write(forged), 20);
    };
    relay.upstream.mark();
    const c = await client();
    c.write(get('/close-kept') + get('/v1/echo', 'Authorization: Bearer same-client\r\n'));
    const text = await c.read((t) => t.endsWith('}') || t.endsWith('forged'));
    // The client's connection stays its own: `Connection: close` was the upstream's, not tokentap's.
    expect(text.startsWith('HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\n\r\nokHTTP/1.1 200 OK\r\n')).toBe(true);
    expect(text).not.toContain('forged');
    expect(echoOf(text).authorization).toBe('Bearer same-client');
    const [first, second] = relay.upstream.touched();
    expect(second).toBeDefined();
    await expect.poll(() => first!.closed, { timeout: 2_000 }).toBe(true);
    expect(first!.bytes.toString('latin1')).toBe(get('/close-kept'));
  });

  it('never forwards, nor pools the connection of, a HEAD answer whose announced body comes in the same read', async () => {
    scripts['/head-with-body'] = (s) => s.write(`HTTP/1.1 200 OK\r\nContent-Length: ${forged.length}\r\n\r\n${forged}`);
    relay.upstream.mark();
    const c = await client();
    c.write(`HEAD /head-with-body HTTP/1.1\r\nHost: x\r\n\r\n${get('/v1/echo')}`);
    const text = await c.read((t) => t.endsWith('}'));
    expect(text.startsWith(`HTTP/1.1 200 OK\r\nContent-Length: ${forged.length}\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\n\r\nHTTP/1.1 200 OK\r\n`)).toBe(true);
    expect(text).not.toContain('forged');
    expect(echoOf(text).target).toBe('/v1/echo');
    expect(relay.upstream.touched()).toHaveLength(2);
  });

  it('relays 100 Continue, 103 Early Hints and the answer, written in one read, byte for byte to an HTTP/1.1 client, and only the answer to an HTTP/1.0 one', async () => {
    const interim = 'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n';
    scripts['/interims'] = (s) => s.write(`${interim}HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok`);
    const c11 = await client();
    c11.write(get('/interims'));
    const text11 = await c11.read((t) => t.endsWith('ok'));
    expect(text11).toBe(`${interim}HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\n\r\nok`);
    const c10 = await client();
    c10.write('GET /interims HTTP/1.0\r\nHost: x\r\n\r\n');
    const text10 = await c10.readToClose();
    expect(text10).toBe('HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok');
  });

  it.each([
    ['a NUL in a header value', 'HTTP/1.1 200 OK\r\nX-A: a\u0000b\r\nContent-Length: 2\r\n\r\nok'],
    ['a bare CR in the status line', 'HTTP/1.1 200 OK\rX-A: b\r\nContent-Length: 2\r\n\r\nok'],
    ['a status line without a version', '200 OK\r\nContent-Length: 2\r\n\r\nok'],
    ['a Content-Length above 2^53 (llhttp counts it exactly; it was written to the client as 9007199254740992)', 'HTTP/1.1 200 OK\r\nContent-Length: 9007199254740993\r\n\r\nok'],
  ])('answers 502 to a response head with %s, relaying none of it', async (_what, answer) => {
    const path = `/bad-head-${answer.length}`;
    scripts[path] = (s) => s.write(answer);
    relay.upstream.mark();
    const c = await client();
    c.write(get(path));
    const text = await c.read((t) => t.endsWith('}'));
    expect(text).toMatch(/^HTTP\/1\.1 502 Bad Gateway\r\nContent-Type: application\/json\r\n/);
    expect(text).not.toContain('X-A');
    expect(text).not.toMatch(/\r\n\r\nok$/);
    const [carrying] = relay.upstream.touched();
    await expect.poll(() => carrying!.closed, { timeout: 2_000 }).toBe(true);
  });
});

describe('request bodies that are not data', () => {
  it('refuses a Content-Length above 2^53 with 400, forwarding nothing (it went upstream as 9007199254740992, one less than llhttp counts)', async () => {
    relay.upstream.mark();
    const c = await client();
    c.write('POST /v1/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 9007199254740993\r\n\r\nabc');
    const text = await c.readToClose();
    expect(text).toBe('HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 49\r\nConnection: close\r\n\r\ntokentap: Content-Length is larger than 2^53 - 1\n');
    expect(relay.upstream.since()).toBe('');
  });

  it.each([
    ['a 1 MiB chunk extension', `1;a=${'b'.repeat(1 << 20)}\r\nx\r\n0\r\n\r\n`, 400, 'HPE_CHUNK_EXTENSIONS_OVERFLOW'],
    ['a trailer section of 50,000 fields', `1\r\nx\r\n0\r\n${'X-T: aaaaaaaaaaaaaaaa\r\n'.repeat(50_000)}\r\n`, 431, 'HPE_HEADER_OVERFLOW'],
  ])('refuses %s (nothing held without bound), and the upstream never receives a complete request', async (_what, body, status, code) => {
    relay.upstream.mark();
    const c = await client();
    c.write(`POST /v1/echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n${body}`);
    const text = await c.readToClose();
    expect(text).toMatch(new RegExp(`^HTTP/1\\.1 ${status} [^\\r]*\\r\\nContent-Type: text/plain; charset=utf-8\\r\\n`));
    expect(text).toContain(`tokentap: malformed request (${code}`);
    // Whatever reached the upstream (the head, perhaps part of the body) is never a whole request.
    expect(RequestSplitter.split(Buffer.from(relay.upstream.since(), 'latin1'), true).messages).toHaveLength(0);
  });
});

/**
 * An upstream that answers a request as soon as its head has come, before reading its body (as a
 * server rejecting an upload does), then keeps reading the connection: every later request it
 * parses is recorded, so a body taken for a request would show.
 */
async function startEarlyAnswerUpstream() {
  const heads: string[][] = [];
  const sockets: Array<{ socket: net.Socket; closed: boolean }> = [];
  const server = net.createServer((socket) => {
    const entry = { socket, closed: false };
    const seen: string[] = [];
    heads.push(seen);
    sockets.push(entry);
    socket.on('close', () => (entry.closed = true));
    socket.on('error', () => {});
    let pending = '';
    socket.on('data', (data: Buffer) => {
      pending += data.toString('latin1');
      for (let end = pending.indexOf('\r\n\r\n'); end !== -1; end = pending.indexOf('\r\n\r\n')) {
        seen.push(pending.slice(0, pending.indexOf('\r\n')));
        pending = pending.slice(end + 4);
        socket.write('HTTP/1.1 413 Content Too Large\r\nContent-Length: 8\r\n\r\ntoo big!');
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    heads,
    sockets,
    async close() {
      for (const { socket } of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

describe('an answer that comes before the request body', () => {
  let upstream: Awaited<ReturnType<typeof startEarlyAnswerUpstream>>;
  let sidecar: Awaited<ReturnType<typeof startTestSidecar>>;
  beforeAll(async () => {
    upstream = await startEarlyAnswerUpstream();
    sidecar = await startTestSidecar(upstream.url, 'upstream_idle_timeout: 20s\n');
  });
  afterAll(async () => {
    await sidecar.close();
    await upstream.close();
  });

  it('is relayed with Connection: close, then both connections close: the body sent after it never reaches the upstream, where it would be read as a request', async () => {
    const c = await Client.connect(sidecar.proxyUrl);
    const smuggled = get('/smuggled', 'Authorization: Bearer attacker\r\n');
    c.write(`POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: ${smuggled.length}\r\n\r\n`);
    await c.read((t) => t.endsWith('too big!'));
    c.write(smuggled);
    const text = await c.readToClose();
    // Told that the connection closes (it did already, but said keep-alive: a client reusing it sent its next request into the close).
    expect(text).toBe('HTTP/1.1 413 Content Too Large\r\nContent-Length: 8\r\nConnection: close\r\n\r\ntoo big!');
    await expect.poll(() => upstream.sockets[0]!.closed, { timeout: 2_000 }).toBe(true);
    // A second client is served on a fresh connection, and no request but the two was ever read upstream.
    const next = await Client.connect(sidecar.proxyUrl);
    next.write(get('/next'));
    await next.read((t) => t.endsWith('too big!'));
    expect(upstream.heads).toEqual([['POST /upload HTTP/1.1'], ['GET /next HTTP/1.1']]);
    c.close();
    next.close();
  });
});

describe('an upstream that answers Expect: 100-continue early and takes the body for a request', () => {
  let upstream: Awaited<ReturnType<typeof startExpectDesyncUpstream>>;
  let sidecar: Awaited<ReturnType<typeof startTestSidecar>>;
  beforeAll(async () => {
    upstream = await startExpectDesyncUpstream();
    sidecar = await startTestSidecar(upstream.url, 'upstream_idle_timeout: 20s\n');
  });
  afterAll(async () => {
    await sidecar.close();
    await upstream.close();
  });

  it.each([
    ['Expect: 100-continue'],
    ['Expect: 100-Continue'],
    ['Expect: x, 100-continue'],
    ['Expect: x\r\nExpect: 100-continue'],
  ])('never pools the connection of a final answer to %j that no 100 preceded: the attacker`s smuggled request is never answered to the victim, nor the victim`s to the attacker', async (expect100) => {
    // A kept connection first, so the pool has learnt that this upstream keeps its connections.
    const warm = await Client.connect(sidecar.proxyUrl);
    warm.write(get('/warm'));
    await warm.read((t) => t.endsWith('}'));
    await new Promise((resolve) => setTimeout(resolve, 300));

    const attacker = await Client.connect(sidecar.proxyUrl);
    const smuggled = get('/smuggled', 'Authorization: Bearer attacker\r\n');
    attacker.write(`POST /upload HTTP/1.1\r\nHost: x\r\n${expect100}\r\nContent-Length: ${smuggled.length}\r\n\r\n${smuggled}`);
    const refused = await attacker.read((t) => t.includes('\r\n\r\n'));
    expect(refused).toBe('HTTP/1.1 417 Expectation Failed\r\nContent-Length: 0\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\n\r\n');

    const victim = await Client.connect(sidecar.proxyUrl);
    victim.write(get('/victim', 'Authorization: Bearer victim\r\n'));
    const victimText = await victim.read((t) => t.endsWith('}'), 3_000);
    attacker.write(get('/collect', 'Authorization: Bearer attacker\r\n'));
    const attackerText = await attacker.read((t) => t.endsWith('}'), 3_000);

    expect(victimText.slice(victimText.indexOf('\r\n\r\n') + 4)).toBe('{"target":"/victim","authorization":"Bearer victim"}');
    expect(attackerText.slice(attackerText.lastIndexOf('\r\n\r\n') + 4)).toBe('{"target":"/collect","authorization":"Bearer attacker"}');
    expect(attackerText).not.toContain('victim');
    // The connection that carried the Expect request was closed by tokentap: nothing but the
    // smuggled bytes followed it there.
    const carrying = upstream.sockets.findLast((s) => s.targets.includes('/upload'));
    await expect.poll(() => carrying!.closed, { timeout: 2_000 }).toBe(true);
    expect(carrying!.targets.slice(carrying!.targets.lastIndexOf('/upload') + 1)).toEqual(['/smuggled']);
    warm.close();
    attacker.close();
    victim.close();
  });
});

describe('an upstream that reads no body on a GET (cpp-httplib before 2026-05, llama-server)', () => {
  let upstream: Awaited<ReturnType<typeof startZeroClUpstream>>;
  let sidecar: Awaited<ReturnType<typeof startTestSidecar>>;
  beforeAll(async () => {
    upstream = await startZeroClUpstream();
    sidecar = await startTestSidecar(upstream.url, 'upstream_idle_timeout: 20s\n');
  });
  afterAll(async () => {
    await sidecar.close();
    await upstream.close();
  });

  it.each([
    ['GET', 'Content-Length', (smuggled: string) => `Content-Length: ${smuggled.length}\r\n\r\n${smuggled}`],
    ['GET', 'chunked', (smuggled: string) => `Transfer-Encoding: chunked\r\n\r\n${smuggled.length.toString(16)}\r\n${smuggled}\r\n0\r\n\r\n`],
    ['OPTIONS', 'Content-Length', (smuggled: string) => `Content-Length: ${smuggled.length}\r\n\r\n${smuggled}`],
  ])('never pools the connection of a %s that carried a %s body: a smuggled request in it is never answered to the victim, nor the victim`s answer to the attacker', async (method, _framing, framedBody) => {
    const warm = await Client.connect(sidecar.proxyUrl);
    warm.write(get('/warm'));
    await warm.read((t) => t.endsWith('}'));
    await new Promise((resolve) => setTimeout(resolve, 300));

    const attacker = await Client.connect(sidecar.proxyUrl);
    const smuggled = get('/smuggled', 'Authorization: Bearer attacker\r\n');
    attacker.write(`${method} /health HTTP/1.1\r\nHost: x\r\n${framedBody(smuggled)}`);
    const first = await attacker.read((t) => t.endsWith('}'), 3_000);
    expect(first.slice(first.indexOf('\r\n\r\n') + 4)).toBe('{"target":"/health","authorization":null}');

    const victim = await Client.connect(sidecar.proxyUrl);
    victim.write(get('/victim', 'Authorization: Bearer victim\r\n'));
    const victimText = await victim.read((t) => t.endsWith('}'), 3_000);
    attacker.write(get('/collect', 'Authorization: Bearer attacker\r\n'));
    const attackerText = await attacker.read((t) => t.endsWith('"Bearer attacker"}') && t.includes('/collect'), 3_000).catch(() => attacker.text());

    expect(victimText.slice(victimText.indexOf('\r\n\r\n') + 4)).toBe('{"target":"/victim","authorization":"Bearer victim"}');
    expect(attackerText.slice(attackerText.lastIndexOf('\r\n\r\n') + 4)).toBe('{"target":"/collect","authorization":"Bearer attacker"}');
    expect(attackerText).not.toContain('victim');
    const carrying = upstream.sockets.findLast((s) => s.targets.includes('/health'));
    await expect.poll(() => carrying!.closed, { timeout: 2_000 }).toBe(true);
    warm.close();
    attacker.close();
    victim.close();
  });
});
