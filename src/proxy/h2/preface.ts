import type net from 'node:net';

/** RFC 9113 section 3.4: what an HTTP/2 client with prior knowledge sends first, 24 bytes. */
export const HTTP2_PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');

/**
 * Tells HTTP/2 (prior knowledge) from HTTP/1.1 by a connection's first bytes, once per connection:
 * a first read that is not a prefix of the 24-byte preface is HTTP/1.1 at once (every HTTP/1.1
 * method differs from `PRI *` by its second byte at the latest), so an HTTP/1.1 connection costs one
 * comparison and its reads after the first go straight to `http1`, with no check of their own. A
 * preface split across reads is held (at most 23 bytes) until it is whole or diverges.
 *
 * `http1` gets the held bytes then every later read; `http2` gets the socket paused with the bytes
 * read so far (preface included) to hand to node:http2.
 */
export function detectProtocol(socket: net.Socket, http1: (data: Buffer) => void, http2: (held: Buffer) => void): void {
  let held: Buffer | undefined;
  const first = (data: Buffer): void => {
    const bytes = held === undefined ? data : Buffer.concat([held, data]);
    const compared = Math.min(bytes.length, HTTP2_PREFACE.length);
    if (bytes.compare(HTTP2_PREFACE, 0, compared, 0, compared) !== 0) {
      socket.off('data', first);
      socket.on('data', http1);
      http1(bytes);
    } else if (bytes.length >= HTTP2_PREFACE.length) {
      socket.off('data', first);
      socket.pause();
      http2(bytes);
    } else {
      held = bytes;
    }
  };
  socket.on('data', first);
}
