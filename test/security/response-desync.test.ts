import { describe, expect, it } from 'vitest';
import { scrape, sumValues } from '../helpers/prometheus-text.js';
import type { RawClient } from '../helpers/raw-http.js';
import { scriptedRelay } from '../helpers/scripted-relay.js';

/**
 * The response direction: an upstream whose framing headers or bytes disagree must never
 * desynchronise a client connection or hand one client's answer to another. The head tokentap
 * writes carries exactly the framing it decided; a response that overruns its length or its
 * chunked end, or closes before it, is cut and its upstream connection is never reused.
 */

const relay = scriptedRelay();
const { scripts } = relay;
const client = (): Promise<RawClient> => relay.client();

const get = (path: string, extra = '') => `GET ${path} HTTP/1.1\r\nHost: x\r\n${extra}\r\n`;
const count = (text: string, part: string) => text.split(part).length - 1;
const head = (text: string) => text.slice(0, text.indexOf('\r\n\r\n') + 2);

async function outcome(name: string): Promise<number> {
  return sumValues(await scrape(relay.sidecar.adminUrl), 'tokentap_requests_total', { outcome: name });
}

describe('response framing is written by tokentap', () => {
  it('forwards no response Content-Length named by Connection, and writes the length it read', async () => {
    scripts['/nominated'] = (s) => s.write('HTTP/1.1 200 OK\r\nConnection: Content-Length\r\nContent-Length: 5\r\n\r\nhello');
    const c = await client();
    c.write(get('/nominated'));
    const text = await c.read((t) => t.endsWith('hello'));
    expect(head(text)).toBe('HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\n');
    // The client connection is still in step: the next answer is read whole.
    c.write(get('/v1/echo'));
    await c.read((t) => t.endsWith('}'));
    expect(count(c.text(), 'HTTP/1.1 200 OK\r\n')).toBe(2);
  });

  it('writes Transfer-Encoding: chunked itself, whatever case or spacing the upstream used', async () => {
    scripts['/chunked-case'] = (s) => s.write('HTTP/1.1 200 OK\r\nTransfer-Encoding:  CHUNKED\r\n\r\n2\r\nok\r\n0\r\n\r\n');
    const c = await client();
    c.write(get('/chunked-case'));
    const text = await c.read((t) => t.endsWith('0\r\n\r\n'));
    expect(head(text)).toBe('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\n');
  });

  const unframeable: Array<[string, string]> = [
    ['a transfer coding other than chunked (gzip, chunked)', 'HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n2\r\nQZ\r\n0\r\n\r\n'],
    ['Transfer-Encoding: gzip alone', 'HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nQZ'],
    ['an empty Transfer-Encoding beside a Content-Length (was a finished answer counted timeout)', 'HTTP/1.1 200 OK\r\nTransfer-Encoding:\r\nContent-Length: 2\r\n\r\nQZ'],
    ['Transfer-Encoding in an HTTP/1.0 response', 'HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nQZ\r\n0\r\n\r\n'],
    ['Content-Length beside Transfer-Encoding', 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nQZ\r\n0\r\n\r\n'],
    ['Content-Length: 2, 2', 'HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\n\r\nQZ'],
    ['two Content-Length fields', 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nQZ!'],
    ['obs-fold in the response head', 'HTTP/1.1 200 OK\r\nX-A: 1\r\n Content-Length: 2\r\nContent-Length: 2\r\n\r\nQZ'],
  ];
  for (const [problem, answer] of unframeable) {
    it(`answers 502 at once for ${problem}, counted upstream_error, and never reuses that connection`, async () => {
      const path = `/unframeable-${unframeable.findIndex(([p]) => p === problem)}`;
      scripts[path] = (s) => s.write(answer);
      const before = await outcome('upstream_error');
      relay.upstream.mark();
      const c = await client();
      const started = performance.now();
      c.write(get(path));
      const text = await c.read((t) => t.endsWith('}'), 2_000);
      expect(performance.now() - started).toBeLessThan(2_000);
      expect(text).toMatch(/^HTTP\/1\.1 502 Bad Gateway\r\n/);
      expect(text).toContain('cannot be forwarded');
      expect(text).not.toContain('QZ');
      const [carrying] = relay.upstream.touched();
      await expect.poll(() => carrying!.closed, { timeout: 2_000 }).toBe(true);
      expect(await outcome('upstream_error')).toBe(before + 1);
    });
  }
});

describe('a response whose bytes disagree with its framing is cut and never reused', () => {
  it('drops bytes past the Content-Length (an overrun in the same read) and answers the next client from a fresh connection', async () => {
    scripts['/overrun-same'] = (s) => s.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nforged');
    relay.upstream.mark();
    const attacker = await client();
    attacker.write(get('/overrun-same'));
    await attacker.read((t) => t.endsWith('ok'));
    const victim = await client();
    victim.write(get('/v1/echo', 'Authorization: Bearer victim\r\n'));
    const text = await victim.read((t) => t.endsWith('}'));
    expect(text).not.toContain('forged');
    expect(attacker.text()).not.toContain('forged');
    expect(JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4))).toMatchObject({ target: '/v1/echo', authorization: 'Bearer victim' });
    const [first, second] = relay.upstream.touched();
    expect(second).toBeDefined();
    expect(first!.closed).toBe(true);
  });

  it('closes an idle pooled connection that sends an overrun after its response ended (a later read)', async () => {
    scripts['/overrun-later'] = (s) => {
      s.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok');
      setTimeout(() => s.write('HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nforged'), 30);
    };
    relay.upstream.mark();
    const attacker = await client();
    attacker.write(get('/overrun-later'));
    await attacker.read((t) => t.endsWith('ok'));
    const [carrying] = relay.upstream.touched();
    await expect.poll(() => carrying!.closed, { timeout: 2_000 }).toBe(true);
    const victim = await client();
    victim.write(get('/v1/echo', 'Authorization: Bearer victim\r\n'));
    const text = await victim.read((t) => t.endsWith('}'));
    expect(text).not.toContain('forged');
  });

  it('drops bytes after the chunked terminator and does not reuse the connection', async () => {
    scripts['/after-chunked-end'] = (s) => s.write('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nforged');
    relay.upstream.mark();
    const c = await client();
    c.write(get('/after-chunked-end'));
    await c.read((t) => t.endsWith('0\r\n\r\n'));
    c.write(get('/v1/echo'));
    const text = await c.read((t) => t.endsWith('}'));
    expect(text).not.toContain('forged');
    const touched = relay.upstream.touched();
    expect(touched).toHaveLength(2);
    expect(touched[0]!.closed).toBe(true);
  });

  it('cuts the client stream when the upstream closes before its Content-Length (an underrun), counted upstream_error', async () => {
    scripts['/underrun'] = (s) => s.end('HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort');
    const before = await outcome('upstream_error');
    const c = await client();
    c.write(get('/underrun'));
    const text = await c.readToClose();
    // Never completed: the client sees 5 of 10 bytes and a closed connection.
    expect(text.endsWith('\r\n\r\nshort')).toBe(true);
    await expect.poll(() => outcome('upstream_error'), { timeout: 2_000 }).toBe(before + 1);
    const next = await client();
    next.write(get('/v1/echo'));
    await next.read((t) => t.endsWith('}'));
  });

  it('cuts the client stream when the upstream closes before the chunked end, counted upstream_error', async () => {
    scripts['/underrun-chunked'] = (s) => s.end('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n');
    const before = await outcome('upstream_error');
    const c = await client();
    c.write(get('/underrun-chunked'));
    const text = await c.readToClose();
    expect(text.endsWith('2\r\nok\r\n')).toBe(true);
    await expect.poll(() => outcome('upstream_error'), { timeout: 2_000 }).toBe(before + 1);
  });
});
