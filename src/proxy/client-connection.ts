import type net from 'node:net';
import { Exchange, type ExchangeClient, type ExchangeContext } from './exchange.js';
import { HTTPParser, isParseError, METHODS, parserResource, STOP_AFTER_HEAD, type NativeHttpParser, type ParseError } from './http1/node-http-parser.js';
import { checkRequestHead, targetPath } from './http1/request-rules.js';
import { simpleResponse } from './http1/wire.js';
import { recordRefusal } from './refused-request.js';

/** Idle time after which a keep-alive client connection is closed by default: node:http's keepAliveTimeout. */
export const KEEP_ALIVE_TIMEOUT_MS = 5_000;

/**
 * One client connection: parses its requests with Node's parser and relays each as an Exchange, one
 * at a time. A request pipelined behind another waits (and the connection stops being read) until
 * the one before it has answered, so responses go out in order.
 */
export class ClientConnection implements ExchangeClient {
  readonly socket: net.Socket;
  private readonly context: ExchangeContext;
  private readonly parser: NativeHttpParser = new HTTPParser();
  private readonly forget: (connection: ClientConnection) => void;
  /** The exchange being answered, and those pipelined behind it. */
  private current: Exchange | undefined;
  private readonly queue: Exchange[] = [];
  /** The exchange whose request body the parser is reading. */
  private receiving: Exchange | undefined;
  /** performance.now() when the head being read began, for the headers timeout; -1 between heads. */
  headStartedMs = -1;
  /**
   * performance.now() since when nothing has been in flight, for the keep-alive timeout; -1 while
   * a request is. Both are checked by the listener's sweep (proxy-server.ts): a socket timer would
   * be re-armed twice per request.
   */
  idleSinceMs: number;
  /** Headers and URL parts Node's parser hands over early for long heads. */
  private flushedHeaders: string[] = [];
  private flushedUrl = '';
  /** No more requests are read: the connection ends when the current exchange does. */
  private closing = false;
  private readingPausedByUpstream = false;
  /** tokentap's own error answer, sent when the exchange in flight has ended. */
  private refusal: string | undefined;

  constructor(context: ExchangeContext, socket: net.Socket, forget: (connection: ClientConnection) => void) {
    this.context = context;
    this.socket = socket;
    this.forget = forget;
    const parser = this.parser;
    parser.initialize(HTTPParser.REQUEST, parserResource(), 0, HTTPParser.kLenientNone);
    parser[HTTPParser.kOnMessageBegin] = () => {
      this.headStartedMs = performance.now();
      this.idleSinceMs = -1;
    };
    parser[HTTPParser.kOnHeaders] = (headers: string[], url: string) => {
      for (const value of headers) this.flushedHeaders.push(value);
      this.flushedUrl += url;
    };
    parser[HTTPParser.kOnHeadersComplete] = this.headComplete.bind(this);
    parser[HTTPParser.kOnBody] = (chunk: Buffer) => this.receiving?.requestBody(chunk);
    parser[HTTPParser.kOnMessageComplete] = () => {
      // Node's parser hands a chunked body's trailer fields (and the URL buffer) to kOnHeaders just
      // before this: they are not forwarded, and must not become the next request's head (they
      // did: `Authorization` in a trailer reached the next request, issue 13's suite).
      this.flushedHeaders = [];
      this.flushedUrl = '';
      const exchange = this.receiving;
      this.receiving = undefined;
      exchange?.requestEnd();
    };
    socket.on('data', (data: Buffer) => {
      // Refused: nothing after the refused bytes is parsed, let alone forwarded.
      if (this.refusal !== undefined) return;
      let result;
      try {
        result = parser.execute(data);
      } catch (error) {
        // A bug in the relay's own code, thrown from a parser callback: this connection ends,
        // the sidecar and every other stream go on.
        context.monitor.logger.error({ err: error }, 'proxy failed on a client connection; the connection is closed');
        socket.destroy();
        return;
      }
      if (isParseError(result)) this.malformed(result);
    });
    // The client's FIN: with a response in flight it has left (as node:http treats it); idle, it is done.
    socket.on('end', () => {
      if (this.current === undefined && this.receiving === undefined) this.end();
      else socket.destroy();
    });
    socket.on('error', () => {
      // Followed by 'close', which ends what is in flight.
    });
    socket.on('close', () => {
      this.forget(this);
      parser.close();
      this.current?.clientClosed();
      for (const queued of this.queue.splice(0)) queued.clientClosed();
      this.current = undefined;
    });
    socket.on('drain', () => this.current?.clientDrain());
    this.idleSinceMs = performance.now();
  }

  /** Between requests: nothing in flight and no request head begun. */
  get idle(): boolean {
    return this.current === undefined && this.receiving === undefined && this.headStartedMs === -1;
  }

  private headComplete(
    major: number,
    minor: number,
    headers: string[] | undefined,
    method: number,
    url: string | undefined,
    _status: unknown,
    _statusMessage: unknown,
    upgrade: boolean,
    keepAlive: boolean,
  ): number {
    this.headStartedMs = -1;
    let rawHeaders = headers ?? [];
    let target = url ?? '';
    if (this.flushedHeaders.length > 0 || this.flushedUrl !== '') {
      rawHeaders = this.flushedHeaders.concat(rawHeaders);
      target = this.flushedUrl + target;
      this.flushedHeaders = [];
      this.flushedUrl = '';
    }
    // Pipelined behind a refused request: never read, never forwarded.
    if (this.refusal !== undefined) return STOP_AFTER_HEAD;
    const methodName = METHODS[method] as string;
    if (upgrade) {
      // WebSocket and CONNECT tunnels are not inference traffic: refused, not half-relayed.
      this.refuseRequest(methodName, target, 501, 'protocol upgrades and CONNECT are not proxied');
      return STOP_AFTER_HEAD;
    }
    const checked = checkRequestHead(major, minor, methodName, target, rawHeaders);
    if (!checked.ok) {
      this.refuseRequest(methodName, target, checked.status, checked.reason);
      return STOP_AFTER_HEAD;
    }
    const exchange = new Exchange(this.context, this, {
      method: methodName,
      url: checked.target,
      rawHeaders,
      http11: minor >= 1,
      keepAlive,
      bodyFraming: checked.framing,
      contentLength: checked.contentLength,
      host: checked.host ?? (checked.hostMissing ? this.context.upstreamAddress : undefined),
    });
    this.receiving = exchange;
    if (this.current === undefined) {
      this.current = exchange;
      exchange.start();
    } else {
      // Pipelined: answered after the one before it; reading stops until then.
      this.queue.push(exchange);
      this.socket.pause();
    }
    return 0;
  }

  // ExchangeClient

  exchangeFinished(keepAlive: boolean): void {
    this.current = undefined;
    // Requests read before a refused one are still answered, in order; then the refusal goes out.
    if (this.refusal !== undefined && keepAlive && this.queue.length > 0) {
      this.current = this.queue.shift();
      this.current?.start();
      return;
    }
    if (!keepAlive || this.closing) {
      this.closing = true;
      for (const queued of this.queue.splice(0)) queued.clientClosed();
      this.end(this.refusal);
      return;
    }
    const next = this.queue.shift();
    if (next !== undefined) {
      this.current = next;
      if (this.queue.length === 0) this.socket.resume();
      next.start();
    } else if (this.readingPausedByUpstream) {
      this.resumeReading();
    } else if (this.idle) {
      this.idleSinceMs = performance.now();
    }
  }

  pauseReading(): void {
    this.readingPausedByUpstream = true;
    this.socket.pause();
  }

  resumeReading(): void {
    if (!this.readingPausedByUpstream) return;
    this.readingPausedByUpstream = false;
    if (this.queue.length === 0) this.socket.resume();
  }

  /** Ends the connection once what is in flight has been answered (the listener is draining). */
  closeWhenIdle(): void {
    if (this.idle) this.socket.destroy();
    else this.closing = true;
  }

  /**
   * Sends what is left (`last`, if any), then closes: the connection is half-open (the listener
   * allows it, to answer a client that sent FIN), so it is destroyed once the bytes are out rather
   * than left waiting for the client's FIN, as node:http does.
   */
  private end(last?: string): void {
    const socket = this.socket;
    if (socket.destroyed) return;
    const destroy = () => socket.destroy();
    if (last === undefined) socket.end(destroy);
    else socket.end(last, destroy);
  }

  /** The head took longer than the headers timeout to arrive. */
  headersTimedOut(): void {
    this.refuse(408, 'Request Timeout', 'tokentap: the request head did not arrive in time');
  }

  /**
   * A parse error in a head or a body. Fail fast and close: the 400 goes out now (after the
   * responses to requests read before it), the request is counted `client_error`, and an exchange
   * whose body broke is ended, its upstream connection (holding half a request) destroyed; nothing
   * after the error is parsed. Before this, a broken body waited for upstream_idle_timeout and was
   * counted `timeout` (issue 13).
   */
  private malformed(error: ParseError): void {
    const tooLarge = error.code === 'HPE_HEADER_OVERFLOW';
    const problem = `malformed request (${error.code}: ${error.reason ?? error.message})`;
    const status = tooLarge ? 431 : 400;
    const broken = this.receiving;
    this.receiving = undefined;
    this.refuse(status, tooLarge ? 'Request Header Fields Too Large' : 'Bad Request', `tokentap: ${problem}`);
    if (broken === undefined) {
      recordRefusal(this.context, 'UNKNOWN', '', status, problem);
      return;
    }
    const queued = this.queue.indexOf(broken);
    if (queued !== -1) this.queue.splice(queued, 1);
    // For the exchange in flight this ends it; the refusal follows through exchangeFinished.
    broken.requestMalformed(status, problem);
  }

  /** A head the relay will not forward (request-rules.ts): answered, counted `client_error`, logged by its path only. */
  private refuseRequest(method: string, target: string, status: 400 | 501 | 505, reason: string): void {
    const statusMessage = status === 400 ? 'Bad Request' : status === 501 ? 'Not Implemented' : 'HTTP Version Not Supported';
    this.refuse(status, statusMessage, `tokentap: ${reason}`);
    recordRefusal(this.context, method, targetPath(target), status, reason);
  }

  /**
   * Answers tokentap's own error and closes: at once when nothing is in flight, else after the
   * exchange in flight (its response must not be cut by an answer to a later request).
   */
  private refuse(status: number, statusMessage: string, message: string): void {
    if (this.closing && this.refusal !== undefined) return;
    this.closing = true;
    this.socket.pause();
    this.headStartedMs = -1;
    this.refusal = simpleResponse(status, statusMessage, 'text/plain; charset=utf-8', `${message}\n`, true);
    if (this.current === undefined) this.end(this.refusal);
  }
}
