import net, { type AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FLAG, FRAME, frame, headerBlock, RawH2Client } from '../helpers/h2-frames.js';
import { eventually, startTestSidecar } from '../helpers/sidecar.js';

/**
 * An HTTP/2 client that resets its stream in the middle of a request body (RST_STREAM CANCEL, no
 * END_STREAM before it, as curl and browsers cancel). The request must never be completed upstream:
 * the upstream sees the half body and then the close, nothing that ends it (an HTTP/1.1 upstream
 * given the chunked body's last chunk would run a request the client never finished).
 */
const HALF = '{"model":"m","messages":[{"role":"user","content":"delete every';

/** An HTTP/1.1 upstream that records every byte it gets and never answers. */
async function startRecordingUpstream() {
  const received: Buffer[] = [];
  let closed = false;
  const server = net.createServer((socket) => {
    socket.on('data', (data: Buffer) => received.push(data));
    socket.on('error', () => {});
    socket.on('close', () => (closed = true));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    text: () => Buffer.concat(received).toString('latin1'),
    get closed() {
      return closed;
    },
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}

let upstream: Awaited<ReturnType<typeof startRecordingUpstream>>;
beforeAll(async () => {
  upstream = await startRecordingUpstream();
});
afterAll(async () => {
  await upstream.close();
});

describe('an HTTP/2 stream reset in the middle of its request body, to an HTTP/1.1 upstream', () => {
  it('is never ended upstream: the upstream gets the half body then the close, no last chunk, and the request counts client_cancelled', async () => {
    const sidecar = await startTestSidecar(upstream.url, 'upstream_protocol: http1\n');
    try {
      const client = await RawH2Client.connect(sidecar.proxyUrl);
      const head = headerBlock([[':method', 'POST'], [':scheme', 'http'], [':path', '/v1/chat/completions'], [':authority', 'tokentap.test'], ['content-type', 'application/json']]);
      client.write(Buffer.concat([frame(FRAME.HEADERS, FLAG.END_HEADERS, 1, head), frame(FRAME.DATA, 0, 1, Buffer.from(HALF, 'latin1'))]));
      await eventually('the half body upstream', () => upstream.text(), (text) => text.includes('delete every'));
      // RST_STREAM CANCEL, no END_STREAM before it: the client gave up on the request.
      const cancel = Buffer.alloc(4);
      cancel.writeUInt32BE(0x8);
      client.write(frame(FRAME.RST_STREAM, 0, 1, cancel));
      await eventually('the upstream connection closed', () => upstream.closed, (closed) => closed);
      const text = upstream.text();
      const body = text.slice(text.indexOf('\r\n\r\n') + 4);
      // Byte for byte: the one chunk the client sent, and nothing that ends the body.
      expect(body).toBe(`${HALF.length.toString(16)}\r\n${HALF}\r\n`);
      const lines = await eventually('the request line', () => sidecar.logs.filter((l) => l.msg === 'request'), (l) => l.length === 1);
      expect(lines[0]).toMatchObject({ outcome: 'client_cancelled' });
      client.socket.destroy();
    } finally {
      await sidecar.close();
    }
  });
});
