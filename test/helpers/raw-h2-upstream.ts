import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { FLAG, FRAME, frame, PREFACE } from './h2-frames.js';

/** What a scripted request handler may do on the connection that carried the request. */
export interface RawH2Connection {
  /** Which connection this is, from 1 in the order they were accepted. */
  readonly number: number;
  write(bytes: Buffer): void;
  /** Closes the connection with a FIN: no GOAWAY, no RST_STREAM, no END_STREAM. */
  end(): void;
}

/**
 * An h2c upstream without a codec, for what node:http2's server refuses to send: a `:status`
 * outside 200-599, a connection closed (FIN) under an open stream, a GOAWAY naming a stream it
 * received. It sends its SETTINGS, acknowledges the client's, and hands each request's HEADERS
 * frame (the stream's id and header block) to `onRequest`; everything else the client sends is
 * read and ignored.
 */
export async function startRawH2Upstream(onRequest: (streamId: number, connection: RawH2Connection) => void) {
  let connections = 0;
  let requests = 0;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
    const connection: RawH2Connection = {
      number: ++connections,
      write: (bytes) => {
        if (!socket.destroyed) socket.write(bytes);
      },
      end: () => socket.end(),
    };
    socket.write(frame(FRAME.SETTINGS, 0, 0));
    let received = Buffer.alloc(0);
    let prefaceRead = false;
    socket.on('data', (data: Buffer) => {
      received = Buffer.concat([received, data]);
      if (!prefaceRead) {
        if (received.length < PREFACE.length) return;
        received = received.subarray(PREFACE.length);
        prefaceRead = true;
      }
      while (received.length >= 9) {
        const length = received.readUIntBE(0, 3);
        if (received.length < 9 + length) return;
        const type = received[3] as number;
        const flags = received[4] as number;
        const streamId = received.readUInt32BE(5) & 0x7fffffff;
        received = received.subarray(9 + length);
        if (type === FRAME.SETTINGS && (flags & FLAG.ACK) === 0) connection.write(frame(FRAME.SETTINGS, FLAG.ACK, 0));
        if (type === FRAME.HEADERS) {
          requests++;
          onRequest(streamId, connection);
        }
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    /** HEADERS frames received: the requests the upstream was sent. */
    get requests() {
      return requests;
    },
    get connections() {
      return connections;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

/** A GOAWAY frame's payload fields: the last stream the sender may have processed, and its error code (RFC 9113 section 6.8). */
export function goaway(lastStreamId: number, errorCode: number): Buffer {
  const payload = Buffer.alloc(8);
  payload.writeUInt32BE(lastStreamId, 0);
  payload.writeUInt32BE(errorCode, 4);
  return frame(FRAME.GOAWAY, 0, 0, payload);
}
