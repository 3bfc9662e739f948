import { execFile } from 'node:child_process';
import http2 from 'node:http2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RequestSplitter, startCaptureUpstream } from '../helpers/capture-upstream.js';
import { scrape, sumValues } from '../helpers/prometheus-text.js';
import { RawClient } from '../helpers/raw-http.js';
import { eventually, startTestSidecar } from '../helpers/sidecar.js';
import { requireTool } from '../helpers/required-tools.js';

/**
 * HTTP/2 offers on the HTTP/1.1 listener (issue 22 item 5). `curl --http2` on http:// sends an
 * HTTP/1.1 request offering `Upgrade: h2c`: tokentap answered 501 where the engine answers 200, so
 * it now declines the offer (RFC 9110 section 7.8) and forwards the request without it. A
 * prior-knowledge HTTP/2 client got an HTTP/1.1 error text it cannot read ("empty reply"): it now
 * gets SETTINGS and GOAWAY(HTTP_1_1_REQUIRED). Real curl and node:http2 are the clients; the
 * upstream is a raw TCP capture, so what reaches it is asserted byte for byte.
 */

let upstream: Awaited<ReturnType<typeof startCaptureUpstream>>;
let sidecar: Awaited<ReturnType<typeof startTestSidecar>>;
const clients: RawClient[] = [];

beforeAll(async () => {
  upstream = await startCaptureUpstream();
  sidecar = await startTestSidecar(upstream.url);
});

afterAll(async () => {
  for (const c of clients) c.close();
  await sidecar?.close();
  await upstream?.close();
});

async function client(): Promise<RawClient> {
  const c = await RawClient.connect(sidecar.proxyUrl);
  clients.push(c);
  return c;
}

/** Real curl, asynchronously (the sidecar runs in this process); fails with what to install when it is missing. */
function curl(args: readonly string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const command = requireTool('curl');
  return new Promise((resolve) => {
    execFile(command, ['--silent', '--show-error', '--max-time', '10', ...args], { encoding: 'utf8' }, (error, stdout, stderr) => {
      resolve({ code: error === null ? 0 : Number(error.code), stdout, stderr });
    });
  });
}

/** `promise`, or a failure naming `what` after `ms`: a client that hangs fails the test rather than its timeout. */
function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  return Promise.race([promise, new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`no ${what} within ${ms} ms`)), ms))]);
}

async function outcome(name: string): Promise<number> {
  return sumValues(await scrape(sidecar.adminUrl), 'tokentap_requests_total', { outcome: name });
}

/** The GOAWAY's debug data: what the client is told to do. */
const HTTP2_REFUSAL_DEBUG = 'tokentap serves HTTP/1.1 on this port; use HTTP/1.1 (curl: drop --http2-prior-knowledge)';

/** The h2c offer lines `curl --http2` adds to an HTTP/1.1 request head (curl 7.88: these three). */
const OFFER_LINES = /^(Connection: Upgrade, HTTP2-Settings|Upgrade: h2c|HTTP2-Settings: [A-Za-z0-9_-]*)\r\n/gm;

describe('an HTTP/1.1 request offering h2c (curl --http2) is answered in HTTP/1.1, as the engine answers it', () => {
  it('gives curl --http2 the engine`s 200 and sends the upstream the request byte for byte without Upgrade, HTTP2-Settings or their Connection tokens (issue 22: 501 through tokentap)', async () => {
    // Straight to the engine (the capture upstream): what curl sends, and the engine's answer.
    upstream.mark();
    const direct = await curl(['--http2', '--include', `${upstream.url}/v1/models`]);
    const sentByCurl = upstream.since();
    expect(direct.code).toBe(0);
    expect(direct.stdout).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    expect(sentByCurl.match(OFFER_LINES)).toHaveLength(3);

    upstream.mark();
    const before = await outcome('client_error');
    const through = await curl(['--http2', '--include', `${sidecar.proxyUrl}/v1/models`]);
    expect(through.code).toBe(0);
    expect(through.stdout).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    expect(through.stdout.slice(through.stdout.indexOf('\r\n\r\n'))).toBe(direct.stdout.slice(direct.stdout.indexOf('\r\n\r\n')));
    // curl's own bytes less the three offer lines; the port in Host is tokentap's, as curl wrote it.
    const expected = sentByCurl.replace(OFFER_LINES, '').replace(`Host: ${new URL(upstream.url).host}`, `Host: ${new URL(sidecar.proxyUrl).host}`);
    expect(upstream.since()).toBe(expected);
    expect(await outcome('client_error')).toBe(before);
  });

  it('answers an h2c offer and the request pipelined behind it in the same write, in order, forwarding both without the offer', async () => {
    upstream.mark();
    const c = await client();
    c.write(
      'POST /v1/echo HTTP/1.1\r\nHost: x\r\nConnection: keep-alive, Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\nContent-Length: 5\r\n\r\nhello' +
        'GET /v1/second HTTP/1.1\r\nHost: x\r\n\r\n',
    );
    const text = await c.read((t) => t.includes('/v1/second') && t.endsWith('}'), 3_000);
    expect([...text.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => m[1])).toEqual(['200', '200']);
    expect(text).toContain('"target":"/v1/echo"');
    expect(text).not.toContain('101 Switching Protocols');
    expect(upstream.since()).toBe('POST /v1/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello' + 'GET /v1/second HTTP/1.1\r\nHost: x\r\n\r\n');
    expect(c.isClosed).toBe(false);
  });

  it('parses on after an h2c offer whose body ends in a later read than its head, with the next request in that read', async () => {
    upstream.mark();
    const c = await client();
    c.write('POST /v1/echo HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: h2c\r\nContent-Length: 5\r\n\r\nhe');
    await c.read((t) => t !== '', 300).catch(() => '');
    c.write('lloGET /v1/second HTTP/1.1\r\nHost: x\r\n\r\n');
    const text = await c.read((t) => t.includes('/v1/second') && t.endsWith('}'), 3_000);
    expect([...text.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => m[1])).toEqual(['200', '200']);
    expect(upstream.since()).toBe('POST /v1/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello' + 'GET /v1/second HTTP/1.1\r\nHost: x\r\n\r\n');
  });

  it('declines an h2c offer whose Connection also says close: answered, then the connection closes', async () => {
    upstream.mark();
    const c = await client();
    c.write('GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, close\r\nUpgrade: H2C\r\n\r\n');
    const text = await c.readToClose(3_000);
    expect(text).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    expect(text).toContain('Connection: close\r\n');
    expect(upstream.since()).toBe('GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n');
  });

  // Security review: Node's parser reports no parse error while its upgrade state is set, so after
  // a declined offer malformed bytes were swallowed: no 400, and the connection's parser was dead.
  const pipelinedAfterOffer: Array<[string, string]> = [
    ['garbage', '\x00garbage\r\n\r\n'],
    ['a head with both Content-Length and Transfer-Encoding', 'POST /v1/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n'],
  ];
  for (const [what, after] of pipelinedAfterOffer) {
    it(`answers ${what} pipelined after a declined h2c offer with 400 and closes, forwarding none of it`, async () => {
      upstream.mark();
      const c = await client();
      c.write(`GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n${after}`);
      const text = await c.readToClose(3_000);
      expect([...text.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => m[1])).toEqual(['200', '400']);
      expect(upstream.since()).toBe('GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n');
    });
  }

  it('parses the next read after a declined h2c offer that ended a read: a request written later on the connection is answered', async () => {
    upstream.mark();
    const c = await client();
    c.write('GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n');
    await c.read((t) => t.endsWith('}'), 3_000);
    c.write('GET /v1/third HTTP/1.1\r\nHost: x\r\n\r\n');
    const text = await c.read((t) => t.includes('/v1/third') && t.endsWith('}'), 3_000);
    expect([...text.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => m[1])).toEqual(['200', '200']);
    c.write('\x00garbage\r\n\r\n');
    expect(await c.readToClose(3_000)).toMatch(/HTTP\/1\.1 400 /);
    expect(upstream.since()).toBe('GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n' + 'GET /v1/third HTTP/1.1\r\nHost: x\r\n\r\n');
  });

  it('refuses an h2c offer with a chunked body with 501 at once, forwarding nothing (its framing could not be checked)', async () => {
    upstream.mark();
    const c = await client();
    c.write('POST /v1/echo HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: h2c\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\nZZ\r\n');
    const text = await c.readToClose(3_000);
    expect(text).toMatch(/^HTTP\/1\.1 501 Not Implemented\r\n/);
    expect(text).toContain('an h2c upgrade offer with a chunked body is not proxied');
    expect(upstream.since()).toBe('');
  });

  const stillRefused: Array<[string, string]> = [
    ['Upgrade: websocket', 'GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n'],
    ['Upgrade: h2c, websocket (a WebSocket handshake cannot be answered by declining h2c alone)', 'GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: h2c, websocket\r\n\r\n'],
    ['Upgrade: h2c then Upgrade: websocket in two fields', 'GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: h2c\r\nUpgrade: websocket\r\n\r\n'],
    ['CONNECT', 'CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n'],
  ];
  for (const [offer, payload] of stillRefused) {
    it(`still refuses ${offer} with 501, forwarding nothing`, async () => {
      upstream.mark();
      const c = await client();
      c.write(payload);
      const text = await c.readToClose(3_000);
      expect(text).toMatch(/^HTTP\/1\.1 501 Not Implemented\r\n/);
      expect(text).toContain('tokentap: protocol upgrades and CONNECT are not proxied');
      expect(upstream.since()).toBe('');
    });
  }

  it('leaves the upstream bytes parseable alike by a strict and a lenient parser', () => {
    for (const connection of upstream.connections) {
      const strict = RequestSplitter.split(connection.bytes, false);
      const lenient = RequestSplitter.split(connection.bytes, true);
      expect(strict.error).toBeUndefined();
      expect(lenient.messages).toEqual(strict.messages);
    }
  });
});

describe('a prior-knowledge HTTP/2 client gets SETTINGS and GOAWAY(HTTP_1_1_REQUIRED), not an empty reply', () => {
  it('sends exactly an empty SETTINGS frame and a GOAWAY with last stream 0, code 0xd and debug text, then closes (issue 22: empty reply, HPE_PAUSED_H2_UPGRADE)', async () => {
    upstream.mark();
    const before = await outcome('client_error');
    const c = await client();
    c.write('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n');
    // The client's SETTINGS follows the preface, as real clients send it; it is read and dropped.
    c.write(Buffer.from('000000040000000000', 'hex'));
    const text = await c.readToClose(3_000);
    const debug = Buffer.from(HTTP2_REFUSAL_DEBUG, 'latin1');
    const goawayLength = Buffer.alloc(3);
    goawayLength.writeUIntBE(8 + debug.length, 0, 3);
    const expected = Buffer.concat([
      Buffer.from('000000040000000000', 'hex'), // SETTINGS, no parameters, stream 0
      goawayLength,
      Buffer.from('07' + '00' + '00000000' + '00000000' + '0000000d', 'hex'), // GOAWAY, flags 0, stream 0, last stream 0, HTTP_1_1_REQUIRED
      debug,
    ]);
    expect(Buffer.from(text, 'latin1').toString('hex')).toBe(expected.toString('hex'));
    expect(upstream.since()).toBe('');
    expect(await outcome('client_error')).toBe(before + 1);
    const line = await eventually('the request line', () => sidecar.logs.find((l) => l.method === 'PRI'), (l) => l !== undefined);
    expect(line).toMatchObject({ msg: 'request', path: '*', status: 505, outcome: 'client_error', error: 'this client spoke HTTP/2 (prior knowledge); tokentap serves HTTP/1.1 on this port' });
    expect(JSON.stringify(sidecar.logs)).not.toContain('HPE_PAUSED_H2_UPGRADE');
  });

  it('gives node:http2`s client the GOAWAY with HTTP_1_1_REQUIRED, not a hang or a bare reset', async () => {
    upstream.mark();
    const session = http2.connect(sidecar.proxyUrl);
    const goaway = new Promise<{ code: number; lastStreamID: number; debug: string }>((resolve) =>
      session.on('goaway', (code: number, lastStreamID: number, data?: Buffer) => resolve({ code, lastStreamID, debug: data?.toString('latin1') ?? '' })),
    );
    const sessionError = new Promise<NodeJS.ErrnoException>((resolve) => session.on('error', resolve));
    const stream = session.request({ ':path': '/v1/models' });
    const streamError = new Promise<NodeJS.ErrnoException>((resolve) => stream.on('error', resolve));
    stream.end();
    const received = await within(goaway, 5_000, 'GOAWAY');
    expect(received).toEqual({ code: http2.constants.NGHTTP2_HTTP_1_1_REQUIRED, lastStreamID: 0, debug: HTTP2_REFUSAL_DEBUG });
    expect(received.code).toBe(0xd);
    expect((await sessionError).code).toBe('ERR_HTTP2_SESSION_ERROR');
    expect((await sessionError).message).toContain('13');
    // The request was never processed (last stream 0): the client may send it again over HTTP/1.1.
    expect((await streamError).code).toMatch(/^ERR_HTTP2_(SESSION_ERROR|GOAWAY_SESSION|STREAM_CANCEL)$/);
    expect(upstream.since()).toBe('');
    session.destroy();
  });

  it('gives curl --http2-prior-knowledge the GOAWAY with error 13 and last stream 0', async () => {
    upstream.mark();
    const result = await curl(['--http2-prior-knowledge', '--verbose', `${sidecar.proxyUrl}/v1/models`]);
    expect(result.stderr).toMatch(/GOAWAY, error=13, last_stream=0/);
    expect(result.stdout).toBe('');
    expect(upstream.since()).toBe('');
  });

  it('answers the preface after an HTTP/1.1 request on the same connection as malformed HTTP/1.1 (400), not with HTTP/2 frames', async () => {
    upstream.mark();
    const c = await client();
    c.write('GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\nPRI * HTTP/2.0\r\n\r\nSM\r\n\r\n');
    const text = await c.readToClose(3_000);
    expect([...text.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => m[1])).toEqual(['200', '400']);
    expect(text).toContain('tokentap: malformed request (HPE_PAUSED_H2_UPGRADE');
    expect(upstream.since()).toBe('GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n');
  });
});
