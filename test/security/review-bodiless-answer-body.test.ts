import { describe, expect, it } from 'vitest';
import type { RawClient } from '../helpers/raw-http.js';
import { scriptedRelay } from '../helpers/scripted-relay.js';

/**
 * Answers to HEAD, 204 and 304 have no body whatever their head says (RFC 9110 sections 9.3.2,
 * 15.3.5, 15.4.5), but a broken upstream may send the body its head announces anyway, in a write
 * after the head. If the connection went back to the pool at the head, the next request on it
 * (a pipelined one from the same client, or any other client's) reads those bytes as its own
 * response: here a forged answer. The connection must not be reused after such a head.
 */

const relay = scriptedRelay();
const { scripts } = relay;
const client = (): Promise<RawClient> => relay.client();

const forged = 'HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nforged';
const real = 'HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nreal';
// The real answer to the second request comes after the stray body, as a server writing the
// first response's body before reading the next request would send it.
scripts['/late-real'] = (s) => setTimeout(() => s.write(real), 150);

const bodiless: Array<[string, string, string]> = [
  ['a HEAD answer', 'HEAD', `HTTP/1.1 200 OK\r\nContent-Length: ${forged.length}\r\n\r\n`],
  ['a 204 answer', 'GET', `HTTP/1.1 204 No Content\r\nContent-Length: ${forged.length}\r\n\r\n`],
  ['a 304 answer', 'GET', `HTTP/1.1 304 Not Modified\r\nContent-Length: ${forged.length}\r\n\r\n`],
  ['a chunked HEAD answer', 'HEAD', 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n'],
];

describe('a body sent after a bodiless answer never becomes the next response', () => {
  for (const [index, [answer, method, responseHead]] of bodiless.entries()) {
    it(`does not reuse the upstream connection after ${answer} whose head announces a body`, async () => {
      const path = `/bodiless-${index}`;
      scripts[path] = (s) => {
        s.write(responseHead);
        setTimeout(() => s.write(forged), 50);
      };
      relay.upstream.mark();
      const c = await client();
      c.write(`${method} ${path} HTTP/1.1\r\nHost: x\r\n\r\nGET /late-real HTTP/1.1\r\nHost: x\r\n\r\n`);
      const text = await c.read((t) => t.endsWith('real') || t.endsWith('forged'), 3_000);
      expect(text).not.toContain('forged');
      expect(text.endsWith('\r\n\r\nreal')).toBe(true);
      // The second request went on a connection of its own.
      expect(relay.upstream.touched()).toHaveLength(2);
    });
  }
});
