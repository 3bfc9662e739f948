import { describe, expect, it } from 'vitest';
import { scrape, sumValues } from '../helpers/prometheus-text.js';
import type { RawClient } from '../helpers/raw-http.js';
import { scriptedRelay } from '../helpers/scripted-relay.js';

/**
 * Each line of chunked framing ends with CRLF (RFC 9112 section 7.1): the chunk-size line, the CRLF
 * after each chunk's data, each trailer line and the empty line that ends the body. tokentap reads
 * the upstream's framing to know where the response ends, then forwards those bytes unchanged and
 * may reuse the connection. An upstream that ends one of these lines with another byte (a broken
 * or hostile server, or a chunk whose data is longer than its size) is read differently by every
 * parser that guesses: one that takes any byte after CR as the LF, or the byte after the data as
 * its CR, ends the body somewhere else than the upstream meant, and the rest of the connection's
 * bytes become the next client's response. tokentap must not guess: the client's stream is cut
 * after the head (none of the malformed bytes forwarded), counted upstream_error, and the upstream
 * connection is closed, never pooled for another client.
 */

const relay = scriptedRelay();
const { scripts } = relay;
const client = (): Promise<RawClient> => relay.client();

const get = (path: string) => `GET ${path} HTTP/1.1\r\nHost: x\r\n\r\n`;
const outcome = async (name: string) => sumValues(await scrape(relay.sidecar.adminUrl), 'tokentap_requests_total', { outcome: name });

const head = 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n';
/** The head tokentap writes for `head`: the framing it read, and its own keep-alive hint. */
const forwardedHead = 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\n\r\n';

// Each body is well-formed chunked framing except for one line end, which a guessing reader accepts
// (so its whole body, and then the bytes after it, would pass as one complete response).
const cases: Array<[string, string]> = [
  ['a chunk-size line ended by CR and another byte instead of CRLF', '2\rXok\r\n0\r\n\r\n'],
  ['chunk data followed by another byte instead of CR (data longer than its size)', '2\r\nokX\n0\r\n\r\n'],
  ['chunk data followed by CR and another byte instead of LF', '2\r\nok\rX0\r\n\r\n'],
  ['a trailer line ended by CR and another byte instead of CRLF', '2\r\nok\r\n0\r\nX-T: a\rZ\r\n'],
  ['the last empty line ended by CR and another byte instead of CRLF', '2\r\nok\r\n0\r\n\rZ'],
];

describe('a chunked response with a line not ended by CRLF is cut, never forwarded or pooled', () => {
  for (const [index, [problem, body]] of cases.entries()) {
    it(`stops a response desync on ${problem}: the client gets the head only, upstream_error, the upstream connection closed`, async () => {
      const path = `/crlf-${index}`;
      scripts[path] = (s) => {
        s.write(head);
        // A later read: the head has gone to the client; the body's framing breaks mid-stream.
        setTimeout(() => s.write(body), 30);
      };
      const before = await outcome('upstream_error');
      relay.upstream.mark();
      const c = await client();
      c.write(get(path));
      // A guessing reader would forward the body and keep the connection open: wait for either.
      const text = await c.read((t) => t.length > forwardedHead.length);
      expect(text).toBe(forwardedHead);
      await expect.poll(() => c.isClosed, { timeout: 2_000 }).toBe(true);
      expect(c.text()).toBe(forwardedHead);
      await expect.poll(() => outcome('upstream_error'), { timeout: 2_000 }).toBe(before + 1);
      const [carrying] = relay.upstream.touched();
      await expect.poll(() => carrying!.closed, { timeout: 2_000 }).toBe(true);
    });
  }

  it('still forwards a response whose every line ends with CRLF, byte for byte, and keeps its connection open', async () => {
    const body = '2\r\nok\r\n0\r\nX-T: a\r\n\r\n';
    scripts['/crlf-well-formed'] = (s) => {
      s.write(head);
      setTimeout(() => s.write(body), 30);
    };
    relay.upstream.mark();
    const c = await client();
    c.write(get('/crlf-well-formed'));
    const text = await c.read((t) => t.endsWith('X-T: a\r\n\r\n'));
    expect(text).toBe(forwardedHead + body);
    // Neither side's connection is closed: the client's carries its next request.
    const [carrying] = relay.upstream.touched();
    c.write(get('/v1/echo'));
    await c.read((t) => t.endsWith('}'));
    expect(c.isClosed).toBe(false);
    expect(carrying!.closed).toBe(false);
  });
});
