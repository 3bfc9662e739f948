import { describe, expect, it } from 'vitest';
import { scrape, sumValues } from '../helpers/prometheus-text.js';
import type { RawClient } from '../helpers/raw-http.js';
import { scriptedRelay } from '../helpers/scripted-relay.js';

/**
 * A chunked response is forwarded with the upstream's own framing bytes. A bare LF inside a chunk
 * extension or a trailer line is one line to a strict reader (tokentap's, which ends lines at CRLF
 * only) and two lines to the many that end lines at LF (nginx's ngx_http_parse_chunked, Go's
 * net/http, Python's http.client): forwarded, it makes the client (or an ingress pooling its
 * connections to tokentap) split the body somewhere else than tokentap did, so bytes tokentap
 * counted in one response are read as the start of the next (RFC 9112 section 7.1: the chunk-size
 * line and each trailer field line end with CRLF; section 2.2 lets a recipient take a bare LF as a
 * line end).
 */

const relay = scriptedRelay();
const { scripts } = relay;
const client = (): Promise<RawClient> => relay.client();

const get = (path: string) => `GET ${path} HTTP/1.1\r\nHost: x\r\n\r\n`;
const outcome = async (name: string) => sumValues(await scrape(relay.sidecar.adminUrl), 'tokentap_requests_total', { outcome: name });

const head = 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n';
// Each body is valid to tokentap's CRLF-only reading before the fix; an LF-tolerant parser reads
// other chunks (`QZ` as data) or, in the trailer case, a forged response head after the body.
const forged = 'HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nforged';
const cases: Array<[string, string]> = [
  ['a bare LF in a chunk extension', '2;x\nQZ\r\nok\r\n0\r\n\r\n'],
  ['a bare LF after the chunk size (whitespace, then LF)', '2 \nQZ\r\nok\r\n0\r\n\r\n'],
  ['a bare LF in a trailer line', `2\r\nok\r\n0\r\nX-T: a\n\r\n${forged.slice(0, forged.indexOf('\r\n\r\n') + 2)}\r\n`],
];

describe('a chunked response with a bare LF in its framing lines is cut, never forwarded', () => {
  for (const [index, [problem, body]] of cases.entries()) {
    it(`breaks the client stream on ${problem}, counted upstream_error, and never forwards the ambiguous bytes`, async () => {
      const path = `/bare-lf-${index}`;
      scripts[path] = (s) => {
        s.write(head);
        // A later read: the head has gone to the client; the body's framing breaks mid-stream.
        setTimeout(() => s.write(body), 30);
      };
      const before = await outcome('upstream_error');
      relay.upstream.mark();
      const c = await client();
      c.write(get(path));
      const text = await c.readToClose();
      // The client received the head tokentap wrote and nothing of the body's ambiguous framing.
      expect(text).toBe('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\n\r\n');
      await expect.poll(() => outcome('upstream_error'), { timeout: 2_000 }).toBe(before + 1);
      const [carrying] = relay.upstream.touched();
      await expect.poll(() => carrying!.closed, { timeout: 2_000 }).toBe(true);
    });
  }

  it('still forwards a chunk extension and a trailer ended by CRLF, byte for byte', async () => {
    const body = '2;name=value\r\nok\r\n0\r\nX-T: a\r\n\r\n';
    scripts['/crlf-extension'] = (s) => s.write(head + body);
    const c = await client();
    c.write(get('/crlf-extension'));
    const text = await c.read((t) => t.endsWith('\r\n\r\n') && t.includes('X-T'));
    expect(text.slice(text.indexOf('\r\n\r\n') + 4)).toBe(body);
  });
});
