import net from 'node:net';

/** Raw HTTP/2 frames for attacks that Node's http2 client refuses to send (RFC 9113 section 4.1). */

export const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');
export const FRAME = { DATA: 0x0, HEADERS: 0x1, RST_STREAM: 0x3, SETTINGS: 0x4, PING: 0x6, GOAWAY: 0x7, WINDOW_UPDATE: 0x8, CONTINUATION: 0x9 } as const;
export const FLAG = { END_STREAM: 0x1, END_HEADERS: 0x4, ACK: 0x1 } as const;

export function frame(type: number, flags: number, streamId: number, payload: Buffer = Buffer.alloc(0)): Buffer {
  const head = Buffer.alloc(9);
  head.writeUIntBE(payload.length, 0, 3);
  head[3] = type;
  head[4] = flags;
  head.writeUInt32BE(streamId, 5);
  return Buffer.concat([head, payload]);
}

/** An HPACK integer with an `prefixBits`-bit prefix (RFC 7541 section 5.1). */
function hpackInteger(value: number, prefixBits: number, firstByteFlags: number): Buffer {
  const max = (1 << prefixBits) - 1;
  if (value < max) return Buffer.from([firstByteFlags | value]);
  const bytes = [firstByteFlags | max];
  let rest = value - max;
  while (rest >= 128) {
    bytes.push((rest % 128) + 128);
    rest = Math.floor(rest / 128);
  }
  bytes.push(rest);
  return Buffer.from(bytes);
}

/** A literal header field without indexing, new name (RFC 7541 section 6.2.2), no Huffman coding. */
export function literal(name: string, value: string): Buffer {
  const n = Buffer.from(name, 'latin1');
  const v = Buffer.from(value, 'latin1');
  return Buffer.concat([Buffer.from([0x00]), hpackInteger(n.length, 7, 0), n, hpackInteger(v.length, 7, 0), v]);
}

/** A header block of `fields` in order, each a literal without indexing: bytes exactly as given, nothing validated. */
export function headerBlock(fields: ReadonlyArray<readonly [string, string]>): Buffer {
  return Buffer.concat(fields.map(([name, value]) => literal(name, value)));
}

/** `:method GET`, `:scheme http`, `:path /` from the static table (RFC 7541 appendix A), then `:authority`. */
export function getRequestBlock(path = '/v1/models'): Buffer {
  return Buffer.concat([Buffer.from([0x82, 0x86]), literal(':path', path), literal(':authority', 'tokentap.test')]);
}

export interface ServerFrame {
  type: number;
  flags: number;
  streamId: number;
  payload: Buffer;
}

/** A raw HTTP/2 client connection that records the frames the server sends. */
export class RawH2Client {
  readonly socket: net.Socket;
  private received = Buffer.alloc(0);
  closed = false;

  private constructor(socket: net.Socket) {
    this.socket = socket;
    socket.on('data', (data: Buffer) => {
      this.received = Buffer.concat([this.received, data]);
    });
    socket.on('error', () => {});
    socket.on('close', () => {
      this.closed = true;
    });
  }

  static async connect(url: string): Promise<RawH2Client> {
    const { hostname, port } = new URL(url);
    const socket = net.connect(Number(port), hostname);
    await new Promise<void>((resolve, reject) => {
      socket.once('connect', resolve);
      socket.once('error', reject);
    });
    const client = new RawH2Client(socket);
    client.write(Buffer.concat([PREFACE, frame(FRAME.SETTINGS, 0, 0)]));
    return client;
  }

  /** Writes unless the connection has closed; false once it has. */
  write(bytes: Buffer): boolean {
    if (this.closed || this.socket.destroyed) return false;
    this.socket.write(bytes);
    return true;
  }

  frames(): ServerFrame[] {
    const frames: ServerFrame[] = [];
    const bytes = this.received;
    for (let at = 0; at + 9 <= bytes.length; ) {
      const length = bytes.readUIntBE(at, 3);
      if (at + 9 + length > bytes.length) break;
      frames.push({ type: bytes[at + 3] as number, flags: bytes[at + 4] as number, streamId: bytes.readUInt32BE(at + 5) & 0x7fffffff, payload: bytes.subarray(at + 9, at + 9 + length) });
      at += 9 + length;
    }
    return frames;
  }

  /** The DATA payload the server sent on `streamId`, concatenated. */
  data(streamId: number): Buffer {
    return Buffer.concat(this.frames().filter((f) => f.type === FRAME.DATA && f.streamId === streamId).map((f) => f.payload));
  }

  /** Whether the server ended `streamId` (END_STREAM or RST_STREAM). */
  ended(streamId: number): boolean {
    return this.frames().some((f) => f.streamId === streamId && (f.type === FRAME.RST_STREAM || ((f.type === FRAME.DATA || f.type === FRAME.HEADERS) && (f.flags & FLAG.END_STREAM) !== 0)));
  }

  /** The GOAWAY's error code, if the server sent one. */
  goawayCode(): number | undefined {
    const goaway = this.frames().find((f) => f.type === FRAME.GOAWAY);
    return goaway === undefined ? undefined : goaway.payload.readUInt32BE(4);
  }

  /** The RST_STREAM codes the server sent, on every stream or on `streamId` only. */
  resetCodes(streamId?: number): number[] {
    return this.frames()
      .filter((f) => f.type === FRAME.RST_STREAM && (streamId === undefined || f.streamId === streamId))
      .map((f) => f.payload.readUInt32BE(0));
  }

  close(): void {
    this.socket.destroy();
  }
}
