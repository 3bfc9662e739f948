import { execFile } from 'node:child_process';
import http2 from 'node:http2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RequestSplitter, startCaptureUpstream } from '../helpers/capture-upstream.js';
import { scrape, sumValues } from '../helpers/prometheus-text.js';
import { RawClient } from '../helpers/raw-http.js';
import { startTestSidecar } from '../helpers/sidecar.js';
import { requireTool } from '../helpers/required-tools.js';

/**
 * HTTP/2 offers on the HTTP/1.1 listener (issue 22 item 5). `curl --http2` on http:// sends an
 * HTTP/1.1 request offering `Upgrade: h2c`: tokentap answered 501 where the engine answers 200, so
 * it now declines the offer (RFC 9110 section 7.8) and forwards the request without it. A
 * prior-knowledge HTTP/2 client got an HTTP/1.1 error text it cannot read ("empty reply"): it is
 * now served (issue 24), its streams forwarded as HTTP/1.1 requests. Real curl and node:http2 are the clients; the
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

describe('a prior-knowledge HTTP/2 client is served, its streams forwarded as HTTP/1.1 requests to an HTTP/1.1 upstream (upstream_protocol: http1)', () => {
  it('gives node:http2`s client the engine`s answer, the upstream one HTTP/1.1 request with Host from :authority and no HTTP/2 field (issue 22 gave it GOAWAY; issue 24 serves it)', async () => {
    upstream.mark();
    const session = http2.connect(sidecar.proxyUrl);
    session.on('error', () => {});
    const stream = session.request({ ':path': '/v1/models', ':authority': 'engine.test', 'x-request': 'one', te: 'trailers' });
    stream.end();
    const chunks: Buffer[] = [];
    let head: http2.IncomingHttpHeaders = {};
    stream.on('response', (h) => (head = h));
    stream.on('data', (d: Buffer) => chunks.push(d));
    await within(new Promise((resolve) => stream.on('close', resolve)), 5_000, 'the answer');
    session.destroy();
    expect(head[':status']).toBe(200);
    const sent = upstream.since();
    expect(sent).toMatch(/^GET \/v1\/models HTTP\/1\.1\r\n/);
    expect(sent).toMatch(/\r\nhost: engine\.test\r\n/i);
    expect(sent).toMatch(/\r\nx-request: one\r\n/i);
    expect(sent).not.toMatch(/^te:/im);
    expect(sent).not.toMatch(/^:/m);
    // The capture upstream answers a JSON echo of the request it read: the client got those bytes.
    expect(JSON.parse(Buffer.concat(chunks).toString('utf8'))).toMatchObject({ method: 'GET', target: '/v1/models' });
  });

  it('gives curl --http2-prior-knowledge the engine`s 200', async () => {
    upstream.mark();
    const result = await curl(['--http2-prior-knowledge', '--include', `${sidecar.proxyUrl}/v1/models`]);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/^HTTP\/2 200 ?\r\n/);
    expect(upstream.since()).toMatch(/^GET \/v1\/models HTTP\/1\.1\r\n/);
  });

  it('answers a gRPC call with a trailers-only grpc-status 14 naming upstream_protocol, forwarding nothing (gRPC needs HTTP/2 end to end)', async () => {
    upstream.mark();
    const session = http2.connect(sidecar.proxyUrl);
    session.on('error', () => {});
    const stream = session.request({ ':method': 'POST', ':path': '/vllm.grpc.engine.VllmEngine/Generate', 'content-type': 'application/grpc', te: 'trailers' });
    stream.end(Buffer.alloc(5));
    const head = await within(new Promise<http2.IncomingHttpHeaders>((resolve) => stream.on('response', resolve)), 5_000, 'the answer');
    session.destroy();
    expect(head).toMatchObject({ ':status': 200, 'content-type': 'application/grpc', 'grpc-status': '14' });
    expect(head['grpc-message']).toContain('upstream_protocol: h2c');
    expect(upstream.since()).toBe('');
  });

  it('answers a connection that opens like the preface but is not it as malformed HTTP/1.1 (400), forwarding nothing', async () => {
    upstream.mark();
    const c = await client();
    c.write('PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n');
    const text = await c.readToClose(3_000);
    expect(text).toMatch(/^HTTP\/1\.1 400 /);
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
