/**
 * The answer to a client that opens with the HTTP/2 connection preface (prior knowledge,
 * `PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n`, RFC 9113 section 3.4) on the HTTP/1.1 listener. llhttp stops
 * there with HPE_PAUSED_H2_UPGRADE; an HTTP/1.1 error text would be garbage to an HTTP/2 client
 * (curl reports an empty reply, node:http2 a bare protocol error). It gets what an HTTP/2 server
 * that will not serve it sends: the server preface, an empty SETTINGS frame (RFC 9113 section 3.4:
 * it must come first), then GOAWAY (section 6.8) with last stream 0 (no stream was processed, so a
 * client may retry every request elsewhere) and HTTP_1_1_REQUIRED (0xd, section 7), whose debug
 * data says what to do.
 */

/** RFC 9113 section 7: "the endpoint requires that HTTP/1.1 be used instead of HTTP/2". */
export const HTTP_1_1_REQUIRED = 0xd;

/** The GOAWAY's debug data (RFC 9113 section 6.8: diagnostic, no semantics), ASCII. */
export const HTTP2_REFUSAL_DEBUG = 'tokentap serves HTTP/1.1 on this port; use HTTP/1.1 (curl: drop --http2-prior-knowledge)';

const FRAME_HEADER_BYTES = 9;
const SETTINGS = 0x4;
const GOAWAY = 0x7;

function frameHeader(frame: Buffer, offset: number, length: number, type: number): void {
  frame.writeUIntBE(length, offset, 3);
  frame.writeUInt8(type, offset + 3);
  frame.writeUInt8(0, offset + 4); // flags
  frame.writeUInt32BE(0, offset + 5); // stream 0: both frames are about the connection
}

function http2Refusal(): Buffer {
  const debug = Buffer.from(HTTP2_REFUSAL_DEBUG, 'latin1');
  const goawayLength = 8 + debug.length;
  const bytes = Buffer.alloc(FRAME_HEADER_BYTES * 2 + goawayLength);
  frameHeader(bytes, 0, 0, SETTINGS);
  const goaway = FRAME_HEADER_BYTES;
  frameHeader(bytes, goaway, goawayLength, GOAWAY);
  bytes.writeUInt32BE(0, goaway + FRAME_HEADER_BYTES); // last stream id: none processed
  bytes.writeUInt32BE(HTTP_1_1_REQUIRED, goaway + FRAME_HEADER_BYTES + 4);
  debug.copy(bytes, goaway + FRAME_HEADER_BYTES + 8);
  return bytes;
}

/** SETTINGS then GOAWAY(HTTP_1_1_REQUIRED), built once. */
export const HTTP2_REFUSAL = http2Refusal();

/** llhttp's code for a request that is the HTTP/2 connection preface. */
export const HTTP2_PREFACE_ERROR = 'HPE_PAUSED_H2_UPGRADE';
