import http2 from 'node:http2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RequestSplitter, startCaptureUpstream } from '../helpers/capture-upstream.js';
import { startExpectDesyncUpstream } from '../helpers/desync-upstreams.js';
import { startTestSidecar } from '../helpers/sidecar.js';

/**
 * An HTTP/2 client's stream forwarded to an HTTP/1.1 upstream (`upstream_protocol: http1`, the
 * default) goes out through node:http, which frames a request body with chunks only for methods it
 * expects one on: for GET, HEAD, DELETE, OPTIONS and TRACE (`useChunkedEncodingByDefault` false) it
 * wrote the stream's DATA after the head with no framing at all. A review found that any HTTP/2
 * client could so smuggle a request past tokentap to any upstream (a strict parser reads the body
 * as the next request), and on the kept-alive connection the smuggled request's answer went to the
 * next client's stream. The body must be framed, and the upstream must read exactly one request.
 */

let upstream: Awaited<ReturnType<typeof startCaptureUpstream>>;
let sidecar: Awaited<ReturnType<typeof startTestSidecar>>;
beforeAll(async () => {
  upstream = await startCaptureUpstream();
  sidecar = await startTestSidecar(upstream.url, 'upstream_idle_timeout: 20s\n');
});
afterAll(async () => {
  await sidecar.close();
  await upstream.close();
});

/** One HTTP/2 request on a session of its own; the answer's body as text. */
function h2request(method: string, path: string, authorization: string, body?: string, fields: Record<string, string> = {}, proxyUrl = sidecar.proxyUrl): Promise<string> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(proxyUrl);
    session.on('error', reject);
    const stream = session.request({ ':method': method, ':path': path, authorization, ...fields }, { endStream: body === undefined });
    let text = '';
    stream.on('data', (data: Buffer) => (text += data.toString('latin1')));
    stream.on('end', () => {
      session.close();
      resolve(text);
    });
    stream.on('error', reject);
    if (body !== undefined) stream.end(body);
  });
}

const SMUGGLED = 'GET /smuggled HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer attacker\r\n\r\n';

describe('an HTTP/2 request body forwarded to an HTTP/1.1 upstream', () => {
  it.each(['GET', 'DELETE', 'OPTIONS', 'POST'])('frames the body of a %s, so the upstream reads one request with that body and no smuggled one', async (method) => {
    upstream.mark();
    const answer = await h2request(method, '/v1/echo', 'Bearer attacker', SMUGGLED);
    expect(JSON.parse(answer)).toEqual({ method, target: '/v1/echo', authorization: 'Bearer attacker', body: SMUGGLED });
    const wire = Buffer.from(upstream.since(), 'latin1');
    // A strict and a lenient parser split the upstream's bytes into the same single request.
    for (const lenient of [false, true]) {
      const { messages, error } = RequestSplitter.split(wire, lenient);
      expect(error).toBeUndefined();
      expect(messages.map((m) => `${m.method} ${m.target} ${JSON.stringify(m.body)}`)).toEqual([`${method} /v1/echo ${JSON.stringify(SMUGGLED)}`]);
    }
    // Framed as chunks (HTTP/2 carries no length), never unframed after the head.
    expect(wire.toString('latin1')).toMatch(/\r\ntransfer-encoding: chunked\r\n/i);
    // A body on a method some servers read none on: that connection is closed after it, never pooled.
    if (method !== 'POST') {
      const [carrying] = upstream.touched();
      await expect.poll(() => carrying!.closed, { timeout: 2_000 }).toBe(true);
    }
  });

  it('never delivers an answer meant for one HTTP/2 client to another: the victim`s stream gets its own answer after a GET body', async () => {
    // A kept-alive upstream connection first, as under any traffic.
    await h2request('GET', '/v1/echo', 'Bearer warm');
    await h2request('GET', '/v1/echo', 'Bearer attacker', SMUGGLED);
    const victim = await h2request('GET', '/v1/echo', 'Bearer victim');
    expect(JSON.parse(victim)).toEqual({ method: 'GET', target: '/v1/echo', authorization: 'Bearer victim', body: '' });
  });
});

describe('an HTTP/2 request with expect: 100-continue forwarded to an HTTP/1.1 upstream that declines the body and reads on', () => {
  it('gets a connection of its own: the attacker`s smuggled request is never answered to the victim`s stream', async () => {
    const desync = await startExpectDesyncUpstream();
    const relay = await startTestSidecar(desync.url, 'upstream_idle_timeout: 20s\n');
    try {
      await h2request('GET', '/warm', 'Bearer warm', undefined, {}, relay.proxyUrl);
      await new Promise((resolve) => setTimeout(resolve, 300));
      const declined = await h2request('POST', '/upload', 'Bearer attacker', SMUGGLED, { expect: '100-continue' }, relay.proxyUrl);
      expect(declined).toBe('');
      const victim = await h2request('GET', '/victim', 'Bearer victim', undefined, {}, relay.proxyUrl);
      expect(victim).toBe('{"target":"/victim","authorization":"Bearer victim"}');
      const carrying = desync.sockets.findLast((s) => s.targets.includes('/upload'));
      await expect.poll(() => carrying!.closed, { timeout: 2_000 }).toBe(true);
      // The upstream took the body for requests (the smuggled one among them), but nothing of the victim's came on that connection.
      const after = carrying!.targets.slice(carrying!.targets.indexOf('/upload') + 1);
      expect(after).toContain('/smuggled');
      expect(after).not.toContain('/victim');
    } finally {
      await relay.close();
      await desync.close();
    }
  });
});
