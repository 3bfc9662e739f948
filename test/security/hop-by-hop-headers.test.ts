import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCaptureUpstream } from '../helpers/capture-upstream.js';
import { RawClient } from '../helpers/raw-http.js';
import { startTestSidecar } from '../helpers/sidecar.js';

/**
 * Which request headers reach the upstream. tokentap keeps its upstream connections in a pool shared
 * by every client, so a header about the client's own connection (RFC 9110 section 7.6.1: Connection
 * and the fields it names, Keep-Alive, Proxy-Connection, TE, Trailer, Transfer-Encoding, Upgrade)
 * must stop at tokentap: forwarded, it would act on a connection other clients' requests travel on.
 * Every other header passes in its place, case and bytes. Each case asserts the bytes the upstream
 * read (a raw TCP capture).
 *
 * Equivalent mutants (no test can tell them apart): removing `content-length` or `transfer-encoding`
 * from NOT_NOMINABLE in src/proxy/hop-by-hop.ts changes nothing, since both fields are dropped
 * whether or not Connection names them (Content-Length by name, Transfer-Encoding as hop-by-hop)
 * and tokentap writes the framing itself; the set keeps them for the reader, as the framing fields
 * Connection may not take away.
 */

let upstream: Awaited<ReturnType<typeof startCaptureUpstream>>;
let sidecar: Awaited<ReturnType<typeof startTestSidecar>>;
const clients: RawClient[] = [];

beforeAll(async () => {
  upstream = await startCaptureUpstream();
  sidecar = await startTestSidecar(upstream.url, 'upstream_idle_timeout: 20s\n');
});

afterAll(async () => {
  for (const c of clients) c.close();
  await sidecar?.close();
  await upstream?.close();
});

/** Sends `request` on a new client connection; returns the bytes the upstream read for it. */
async function forwarded(request: string): Promise<string> {
  upstream.mark();
  const c = await RawClient.connect(sidecar.proxyUrl);
  clients.push(c);
  c.write(request);
  await c.read((t) => t.endsWith('}'));
  return upstream.since();
}

describe('connection-specific request headers stop at tokentap; every other header reaches the upstream', () => {
  it('forwards a plain request head as the client wrote it (the baseline for the cases below)', async () => {
    expect(await forwarded('GET /v1/echo HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n')).toBe('GET /v1/echo HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n');
  });

  it('keeps Authorization when Access-Control-Request-Headers names it: only Connection is read as a list of fields to drop', async () => {
    const request = 'GET /v1/echo HTTP/1.1\r\nHost: x\r\nAccess-Control-Request-Headers: authorization\r\nAuthorization: Bearer k\r\n\r\n';
    expect(await forwarded(request)).toBe(request);
  });

  it('keeps Host in its place when Connection names it: no client moves or drops the routing field', async () => {
    const request = 'GET /v1/echo HTTP/1.1\r\nAccept: */*\r\nHost: x\r\nConnection: Host\r\n\r\n';
    expect(await forwarded(request)).toBe('GET /v1/echo HTTP/1.1\r\nAccept: */*\r\nHost: x\r\n\r\n');
  });

  it('drops the client\'s Connection: close, so one client cannot make the upstream close a pooled connection', async () => {
    expect(await forwarded('GET /v1/echo HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAccept: */*\r\n\r\n')).toBe('GET /v1/echo HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n');
  });

  it('drops Keep-Alive, so one client cannot set the lifetime of a pooled upstream connection', async () => {
    expect(await forwarded('GET /v1/echo HTTP/1.1\r\nHost: x\r\nKeep-Alive: timeout=1, max=1\r\nAccept: */*\r\n\r\n')).toBe('GET /v1/echo HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n');
  });

  it('drops Proxy-Connection, so a legacy client header cannot close or hold a pooled upstream connection', async () => {
    expect(await forwarded('GET /v1/echo HTTP/1.1\r\nHost: x\r\nProxy-Connection: close\r\nAccept: */*\r\n\r\n')).toBe('GET /v1/echo HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n');
  });

  it('drops TE, so a client cannot ask the upstream for a transfer coding tokentap\'s chunk reader does not decode', async () => {
    expect(await forwarded('GET /v1/echo HTTP/1.1\r\nHost: x\r\nTE: gzip, trailers\r\nAccept: */*\r\n\r\n')).toBe('GET /v1/echo HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n');
  });

  it('drops Trailer, so the upstream is not promised trailer fields tokentap\'s own framing of the body does not carry', async () => {
    const request = 'POST /v1/echo HTTP/1.1\r\nHost: x\r\nTrailer: X-Checksum\r\nContent-Length: 2\r\n\r\nab';
    expect(await forwarded(request)).toBe('POST /v1/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nab');
  });

  it('drops an Upgrade sent without Connection: upgrade, so a lenient upstream cannot switch a pooled connection to another protocol', async () => {
    expect(await forwarded('GET /v1/echo HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nAccept: */*\r\n\r\n')).toBe('GET /v1/echo HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n');
  });

  it('writes one Transfer-Encoding: chunked itself, never the client\'s beside it (no duplicated framing field for the upstream to read its own way)', async () => {
    const wire = await forwarded('POST /v1/echo HTTP/1.1\r\nHost: x\r\ntransfer-encoding:  chunked\r\n\r\n2\r\nab\r\n0\r\n\r\n');
    expect(wire).toBe('POST /v1/echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n0\r\n\r\n');
  });
});
