import net, { type AddressInfo } from 'node:net';
import { createRequire } from 'node:module';

/** One message as a parser split it off a connection's bytes. */
export interface SplitMessage {
  readonly method: string;
  readonly target: string;
  /** [name, value] as the parser read them. */
  readonly headers: ReadonlyArray<readonly [string, string]>;
  /** The body's data, latin1 (chunk framing removed). */
  readonly body: string;
}

export interface Split {
  readonly messages: SplitMessage[];
  /** The parser's error code, if the bytes stopped being HTTP. */
  readonly error: string | undefined;
}

interface Parser {
  initialize(type: number, resource: object, maxHeaderSize: number, lenient: number): void;
  execute(data: Buffer): number | Error;
  close(): void;
  [callback: number]: unknown;
}
const { HTTPParser, methods } = createRequire(import.meta.url)('_http_common') as {
  HTTPParser: { new (): Parser; REQUEST: number; kOnHeaders: number; kOnHeadersComplete: number; kOnBody: number; kOnMessageComplete: number; kLenientNone: number; kLenientAll: number };
  methods: string[];
};

/**
 * A request parser over a stream of bytes: Node's llhttp strict (as tokentap parses), or with
 * every lenient flag on (kLenientAll: CL beside TE, bare LF, spaces after chunk sizes, data after
 * close...), standing in for the laxest server behind a proxy. Smuggling lives exactly where two
 * parsers split the same bytes differently, so each suite case checks that both agree.
 */
export class RequestSplitter {
  readonly messages: SplitMessage[] = [];
  error: string | undefined;
  private readonly parser: Parser = new HTTPParser();
  private body: Buffer[] = [];
  private head: Omit<SplitMessage, 'body'> | undefined;
  private pending: string[] = [];
  private pendingUrl = '';
  onMessage: ((message: SplitMessage) => void) | undefined;

  constructor(lenient: boolean) {
    const parser = this.parser;
    parser.initialize(HTTPParser.REQUEST, {}, 0, lenient ? HTTPParser.kLenientAll : HTTPParser.kLenientNone);
    parser[HTTPParser.kOnHeaders] = (headers: string[], url: string) => {
      this.pending.push(...headers);
      this.pendingUrl += url;
    };
    parser[HTTPParser.kOnHeadersComplete] = (_major: number, _minor: number, headers: string[] | undefined, method: number, url: string | undefined) => {
      const flat = this.pending.concat(headers ?? []);
      const pairs: Array<[string, string]> = [];
      for (let i = 0; i < flat.length; i += 2) pairs.push([flat[i] as string, flat[i + 1] as string]);
      this.head = { method: methods[method] as string, target: this.pendingUrl + (url ?? ''), headers: pairs };
      this.pending = [];
      this.pendingUrl = '';
      return 0;
    };
    parser[HTTPParser.kOnBody] = (chunk: Buffer) => this.body.push(Buffer.from(chunk));
    parser[HTTPParser.kOnMessageComplete] = () => {
      const message = { ...(this.head as Omit<SplitMessage, 'body'>), body: Buffer.concat(this.body).toString('latin1') };
      this.body = [];
      this.messages.push(message);
      this.onMessage?.(message);
    };
  }

  feed(data: Buffer): void {
    if (this.error !== undefined) return;
    const result = this.parser.execute(data);
    if (result instanceof Error) this.error = (result as Error & { code: string }).code;
  }

  static split(wire: Buffer, lenient: boolean): Split {
    const splitter = new RequestSplitter(lenient);
    splitter.feed(wire);
    splitter.parser.close();
    return { messages: splitter.messages, error: splitter.error };
  }
}

export interface CapturedConnection {
  readonly id: number;
  /** Every byte the upstream read on it, in order. */
  bytes: Buffer;
  readonly socket: net.Socket;
  closed: boolean;
}

/**
 * An upstream that records every byte of every connection (a raw TCP capture) and answers each
 * request its strict parser reads with `answer` (by default a JSON echo of what it was asked,
 * Authorization included, so a request crossing clients shows in the wrong client's answer).
 */
export async function startCaptureUpstream(answer?: (message: SplitMessage, socket: net.Socket) => boolean) {
  const connections: CapturedConnection[] = [];
  const server = net.createServer((socket) => {
    const connection: CapturedConnection = { id: connections.length + 1, bytes: Buffer.alloc(0), socket, closed: false };
    connections.push(connection);
    const splitter = new RequestSplitter(false);
    splitter.onMessage = (message) => {
      if (answer?.(message, socket) === true) return;
      socket.write(echo(message));
    };
    socket.on('data', (data: Buffer) => {
      connection.bytes = Buffer.concat([connection.bytes, data]);
      splitter.feed(data);
    });
    socket.on('close', () => (connection.closed = true));
    socket.on('error', () => {});
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  let mark = new Map<CapturedConnection, number>();
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    connections,
    /** Starts a new observation: since() returns only what arrives after this. */
    mark() {
      mark = new Map(connections.map((c) => [c, c.bytes.length]));
    },
    /** The bytes received since mark(), all connections' concatenated in connection order. */
    since(): string {
      return connections.map((c) => c.bytes.subarray(mark.get(c) ?? 0).toString('latin1')).join('');
    },
    /** The connections that received bytes since mark(). */
    touched(): CapturedConnection[] {
      return connections.filter((c) => c.bytes.length > (mark.get(c) ?? 0));
    },
    async close() {
      for (const c of connections) c.socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/** The default answer: what the upstream was asked, as JSON, under a Content-Length. */
export function echo(message: SplitMessage): string {
  const authorization = message.headers.find(([n]) => n.toLowerCase() === 'authorization')?.[1] ?? null;
  const body = JSON.stringify({ method: message.method, target: message.target, authorization, body: message.body });
  return `HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
}
