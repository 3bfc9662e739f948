import net, { type AddressInfo } from 'node:net';

/** One request as a raw upstream read it off the wire. */
export interface RawRequest {
  readonly method: string;
  readonly target: string;
  readonly version: string;
  /** [name, value] pairs as sent, case and order kept. */
  readonly headers: ReadonlyArray<readonly [string, string]>;
  /** The body's data (chunked framing removed). */
  readonly body: Buffer;
  /** The body's bytes as framed on the wire. */
  readonly wireBody: Buffer;
  /** Which upstream connection carried it (1 for the first accepted). */
  readonly connection: number;
}

/**
 * An upstream that answers with bytes the test writes itself: for framing the node:http server
 * would never produce (no length, chunk extensions, trailers, malformed chunks, interim responses).
 * It reads requests strictly enough for the tests (Content-Length or chunked bodies, keep-alive).
 */
export async function startRawUpstream(respond: (request: RawRequest, socket: net.Socket) => void) {
  const seen: RawRequest[] = [];
  const sockets = new Set<net.Socket>();
  let connections = 0;
  const server = net.createServer((socket) => {
    const connection = ++connections;
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
    let pending = Buffer.alloc(0);
    let continued = false;
    socket.on('data', (data: Buffer) => {
      pending = Buffer.concat([pending, data]);
      for (;;) {
        const parsed = readRequest(pending, connection);
        if (parsed === undefined) {
          // As servers do: a client that expects 100-continue is told to go on once its head is in.
          const headEnd = pending.indexOf('\r\n\r\n');
          if (!continued && headEnd !== -1 && /\r\nexpect: *100-continue\r\n/i.test(pending.subarray(0, headEnd + 2).toString('latin1'))) {
            continued = true;
            socket.write('HTTP/1.1 100 Continue\r\n\r\n');
          }
          return;
        }
        continued = false;
        pending = pending.subarray(parsed.bytes);
        seen.push(parsed.request);
        respond(parsed.request, socket);
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    connections: () => connections,
    /** The upstream's side of each open connection. */
    openSockets: () => [...sockets],
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

function readRequest(buffer: Buffer, connection: number): { request: RawRequest; bytes: number } | undefined {
  const headEnd = buffer.indexOf('\r\n\r\n');
  if (headEnd === -1) return undefined;
  const [requestLine, ...lines] = buffer.subarray(0, headEnd).toString('latin1').split('\r\n');
  const [method, target, version] = requestLine!.split(' ') as [string, string, string];
  const headers = lines.map((line) => {
    const colon = line.indexOf(':');
    return [line.slice(0, colon), line.slice(colon + 1).trim()] as const;
  });
  const header = (name: string) => headers.find(([n]) => n.toLowerCase() === name)?.[1];
  let offset = headEnd + 4;
  const bodyStart = offset;
  const parts: Buffer[] = [];
  if (header('transfer-encoding')?.toLowerCase() === 'chunked') {
    for (;;) {
      const lineEnd = buffer.indexOf('\r\n', offset);
      if (lineEnd === -1) return undefined;
      const size = parseInt(buffer.subarray(offset, lineEnd).toString('latin1'), 16);
      if (buffer.length < lineEnd + 2 + size + 2) return undefined;
      if (size === 0) {
        offset = lineEnd + 4;
        break;
      }
      parts.push(buffer.subarray(lineEnd + 2, lineEnd + 2 + size));
      offset = lineEnd + 2 + size + 2;
    }
  } else {
    const length = Number(header('content-length') ?? 0);
    if (buffer.length < offset + length) return undefined;
    parts.push(buffer.subarray(offset, offset + length));
    offset += length;
  }
  const request = { method, target, version, headers, body: Buffer.concat(parts), wireBody: Buffer.from(buffer.subarray(bodyStart, offset)), connection };
  return { request, bytes: offset };
}

/** A client that writes raw bytes and reads what comes back. */
export class RawClient {
  private readonly socket: net.Socket;
  private received = Buffer.alloc(0);
  private closed = false;
  private waiters: Array<() => void> = [];

  private constructor(socket: net.Socket) {
    this.socket = socket;
    socket.on('data', (data: Buffer) => {
      this.received = Buffer.concat([this.received, data]);
      this.wake();
    });
    socket.on('close', () => {
      this.closed = true;
      this.wake();
    });
    socket.on('error', () => {});
  }

  static async connect(url: string): Promise<RawClient> {
    const { hostname, port } = new URL(url);
    const socket = net.connect({ host: hostname, port: Number(port) });
    await new Promise<void>((resolve, reject) => {
      socket.once('connect', resolve);
      socket.once('error', reject);
    });
    return new RawClient(socket);
  }

  write(data: string | Buffer): void {
    this.socket.write(data);
  }

  /** Waits until `done` holds for what has been received (or the connection closed), up to `timeoutMs`. */
  async read(done: (received: string) => boolean, timeoutMs = 5_000): Promise<string> {
    const deadline = performance.now() + timeoutMs;
    while (!done(this.text()) && !this.closed) {
      if (performance.now() > deadline) throw new Error(`timed out; received so far: ${JSON.stringify(this.text())}`);
      await new Promise<void>((resolve) => {
        this.waiters.push(resolve);
        setTimeout(resolve, 50);
      });
    }
    return this.text();
  }

  /** Everything until the server closes the connection. */
  async readToClose(timeoutMs = 5_000): Promise<string> {
    return this.read(() => false, timeoutMs).catch(() => {
      throw new Error(`the connection stayed open; received: ${JSON.stringify(this.text())}`);
    });
  }

  get isClosed(): boolean {
    return this.closed;
  }

  text(): string {
    return this.received.toString('latin1');
  }

  close(): void {
    this.socket.destroy();
  }

  private wake(): void {
    for (const waiter of this.waiters.splice(0)) waiter();
  }
}

/** Counts complete HTTP/1.1 responses of the form the tests expect (head, then framed body), in order. */
export function responseHeads(text: string): string[] {
  return [...text.matchAll(/HTTP\/1\.1 \d{3}[^\r]*\r\n/g)].map((m) => m[0].trim());
}
