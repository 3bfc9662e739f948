import type net from 'node:net';
import { Exchange, type ExchangeClient, type ExchangeContext } from './exchange.js';
import { HTTPParser, isParseError, METHODS, parserResource, STOP_AFTER_HEAD, type NativeHttpParser, type ParseError } from './http1/node-http-parser.js';
import { checkRequestHead, targetPath } from './http1/request-rules.js';
import { hasTransferEncoding, offersOnlyH2c, withoutH2cOffer } from './http1/upgrade-offer.js';
import { simpleResponse } from './http1/wire.js';
import { recordRefusal } from './refused-request.js';
import { UNUSED_BEFORE_DISPLACED_MS } from './connection-shares.js';
import type { Http2ClientSession } from './h2/client-session.js';
import { detectProtocol } from './h2/preface.js';
import { MIN_CHUNKS_CHECKED } from './relay-limits.js';

/** Idle time after which a keep-alive client connection is closed by default: node:http's keepAliveTimeout. */
export const KEEP_ALIVE_TIMEOUT_MS = 5_000;

/**
 * Request-body bytes that pipelined requests may hold on one connection while they wait their turn;
 * beyond it, or while the listener's held-bytes budget is spent (they count against it), the
 * connection stops being read until the queue moves (TCP backpressure on the client).
 * Below it the connection is read while requests wait, so a client that leaves is noticed at once.
 */
export const MAX_QUEUED_BODY_BYTES = 1 << 20;

/**
 * After a FIN that follows a complete request, the second interim response that tells a client
 * that half-closed from one that left: a host answers a segment to a closed socket with a reset, so
 * the write after it fails. A round trip in a pod or a cluster is well under this.
 */
export const HALF_CLOSE_PROBE_MS = 100;
const PROBE = 'HTTP/1.1 100 Continue\r\n\r\n';


/**
 * One client connection: parses its requests with Node's parser and relays each as an Exchange, one
 * at a time. A request pipelined behind another waits until the one before it has answered, so
 * responses go out in order; the connection is still read meanwhile (to notice the client leave),
 * up to limits.pipelined_requests queued requests and MAX_QUEUED_BODY_BYTES of their bodies.
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
  /** Closing because the listener drains: the requests queued behind the current one are the drain's to decline. */
  private draining = false;
  private readingPausedByUpstream = false;
  /** tokentap's own error answer, sent when the exchange in flight has ended. */
  private refusal: string | undefined;
  /**
   * While closing, the queued requests are still answered before the connection closes (the client
   * half-closed after complete requests, or pipelined past the limit); otherwise they are cancelled.
   */
  private answerQueue = false;
  /** Past the pipelining limit: what the client sends after it is read (to notice its close) and dropped. */
  private discarding = false;
  /** Reading stopped because the queued requests hold MAX_QUEUED_BODY_BYTES of body. */
  private pausedForQueue = false;
  private wasCut = false;
  /** Request heads read on this connection. */
  private headsRead = 0;
  /**
   * An h2c offer was declined on the request being read: llhttp stops after that message (it
   * expects another protocol to follow), so once it has (pausedAfterUpgrade) the rest of the read
   * is parsed on as HTTP/1.1.
   */
  private upgradeDeclined = false;
  private pausedAfterUpgrade = false;
  /** Request body pieces of the current socket read, forwarded as one buffer after it (see flushBody). */
  private readonly bodyPieces: Buffer[] = [];
  private bodyPieceBytes = 0;
  /**
   * Bumped per socket read that carried request body bytes; with bodyCheckedActivity and
   * bodyActiveSinceMs the listener's sweep times limits.request_body_idle_timeout without a clock call per read.
   */
  bodyActivity = 0;
  /** Pieces and bytes of the body being read, for limits.min_request_chunk_bytes. */
  private bodyChunks = 0;
  private bodyBytes = 0;
  bodyCheckedActivity = 0;
  bodyActiveSinceMs = -1;
  /**
   * For limits.response_send_timeout, checked by the listener's sweep: performance.now() since when
   * the client has taken no byte while the upstream is paused for it (-1 otherwise), and the bytes
   * its socket had handed to the kernel then. A client that takes any byte is not stalled: as
   * nginx's send_timeout, the time between two writes, not for the whole response.
   */
  private sendStalledSinceMs = -1;
  private sendTakenBytes = 0;
  /** Set when the connection opened with the HTTP/2 preface: node:http2 serves it from then on (h2/). */
  private h2: Http2ClientSession | undefined;

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
    // Each chunk of a chunked body is its own call: 1-byte chunks cost a write (three, re-chunked)
    // each upstream, 2-4 s of CPU for 6 MB (issue 13). The pieces of one read go upstream as one buffer.
    parser[HTTPParser.kOnBody] = (chunk: Buffer) => {
      this.bodyPieces.push(chunk);
      this.bodyPieceBytes += chunk.length;
      this.bodyChunks++;
    };
    parser[HTTPParser.kOnMessageComplete] = () => {
      this.flushBody();
      // Node's parser hands a chunked body's trailer fields (and the URL buffer) to kOnHeaders just
      // before this: they are not forwarded, and must not become the next request's head (they
      // did: `Authorization` in a trailer reached the next request, issue 13's suite).
      this.flushedHeaders = [];
      this.flushedUrl = '';
      const exchange = this.receiving;
      this.receiving = undefined;
      this.bodyActiveSinceMs = -1;
      if (this.upgradeDeclined) {
        this.upgradeDeclined = false;
        this.pausedAfterUpgrade = true;
      }
      exchange?.requestEnd();
    };
    const http1 = (data: Buffer): void => {
      // Refused: nothing after the refused bytes is parsed, let alone forwarded. Still read, so a
      // client that leaves is noticed.
      if (this.discarding || this.refusal !== undefined) return;
      let result;
      try {
        result = parser.execute(data);
        this.flushBody();
        // After a declined upgrade llhttp stops at the end of that message: what follows in this
        // read (a pipelined request) is HTTP/1.1 and is parsed on, by a parser reset first: llhttp
        // keeps its upgrade state after that message, and Node reports no parse error while it
        // does (a security review's garbage and CL+TE heads pipelined after an offer got no 400,
        // and left the connection's parser dead).
        let parsed = 0;
        while (this.pausedAfterUpgrade && !isParseError(result)) {
          this.pausedAfterUpgrade = false;
          parser.initialize(HTTPParser.REQUEST, parserResource(), 0, HTTPParser.kLenientNone);
          parsed += result;
          if (parsed >= data.length || this.discarding || this.refusal !== undefined) break;
          result = parser.execute(data.subarray(parsed));
          this.flushBody();
        }
      } catch (error) {
        // A bug in the relay's own code, thrown from a parser callback: this connection ends,
        // the sidecar and every other stream go on.
        context.monitor.logger.error({ err: error }, 'proxy failed on a client connection; the connection is closed');
        socket.destroy();
        return;
      }
      if (isParseError(result)) this.malformed(result);
    };
    // The first bytes tell an HTTP/2 client (prior knowledge) from an HTTP/1.1 one, once per
    // connection; later reads go straight to the parser (preface.ts).
    detectProtocol(socket, http1, (held) => {
      this.h2 = context.http2.adopt(socket, held, this);
    });
    socket.on('end', () => {
      if (this.h2 === undefined) this.clientFinished();
    });
    socket.on('error', () => {
      // Followed by 'close', which ends what is in flight.
    });
    socket.on('close', () => this.cut());
    socket.on('drain', () => this.current?.clientDrain());
    this.idleSinceMs = performance.now();
  }

  /**
   * Ends what is in flight and queued (each recorded once, as the client's cancellation or, past the
   * drain deadline, as `shutdown`) and forgets the connection. At once and synchronously: also what
   * a second shutdown signal calls just before the process exits (ProxyServer.cutAll).
   */
  cut(): number {
    if (this.wasCut) return 0;
    this.wasCut = true;
    this.forget(this);
    this.parser.close();
    if (this.h2 !== undefined) return this.h2.cut();
    let cut = 0;
    const current = this.current;
    this.current = undefined;
    if (current !== undefined) {
      current.clientClosed();
      cut++;
    }
    for (const queued of this.queue.splice(0)) {
      queued.clientClosed();
      cut++;
    }
    this.socket.destroy();
    return cut;
  }

  /**
   * The client's FIN. Idle, it is done. Mid-request (a head or body unfinished) or mid-response, it
   * has left, as node:http and nginx take it: cut at once, so the upstream (and the GPU) stops.
   * After a complete request whose answer has not begun, it may only have half-closed (RFC 9112
   * 9.6: a client may close its side once it has sent all it will), which a FIN alone cannot tell
   * from leaving: an HTTP/1.1 client is sent `100 Continue` twice, HALF_CLOSE_PROBE_MS apart (RFC
   * 9110 15.2: a client must accept a 1xx it did not ask for). A host that closed answers the first
   * with a reset and the second write fails: cut, as above. A client that half-closed gets its
   * answers, then the connection closes. An HTTP/1.0 client cannot be sent a 1xx: cut.
   */
  private clientFinished(): void {
    const current = this.current;
    if (current === undefined && this.receiving === undefined && this.headStartedMs === -1) {
      this.end(this.refusal);
    } else if (current !== undefined && this.receiving === undefined && this.headStartedMs === -1 && !current.responseStarted && current.interimAllowed && !this.closing) {
      this.closing = true;
      this.answerQueue = true;
      const socket = this.socket;
      socket.write(PROBE);
      setTimeout(() => {
        if (!socket.destroyed && this.current !== undefined && !this.current.responseStarted) socket.write(PROBE);
      }, HALF_CLOSE_PROBE_MS).unref();
    } else {
      this.socket.destroy();
    }
  }

  /**
   * Has never carried a request (its first head may be arriving), owes its client nothing (no
   * refusal still being written), and has been so for UNUSED_BEFORE_DISPLACED_MS since it was
   * accepted or its head began: it may be closed to make room for another client's at
   * max_connections (connection-shares.ts), losing no request and no answer.
   */
  get unused(): boolean {
    if (this.headsRead !== 0 || this.h2 !== undefined || this.current !== undefined || this.socket.writableLength !== 0) return false;
    const since = this.headStartedMs === -1 ? this.idleSinceMs : this.headStartedMs;
    return performance.now() - since >= UNUSED_BEFORE_DISPLACED_MS;
  }

  /** Unused, and no byte of a request head has come. */
  get silent(): boolean {
    return this.headStartedMs === -1 && this.unused;
  }

  /** Between requests: nothing in flight and no request head begun. */
  get idle(): boolean {
    if (this.h2 !== undefined) return this.h2.idle;
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
    if (this.discarding || this.refusal !== undefined) return STOP_AFTER_HEAD;
    if (this.current !== undefined && this.queue.length >= this.context.limits.pipelinedRequests) {
      this.tooManyPipelined();
      return STOP_AFTER_HEAD;
    }
    this.headsRead++;
    const methodName = METHODS[method] as string;
    if (upgrade) {
      // An offer of h2c alone is declined: the request is answered in HTTP/1.1 (upgrade-offer.ts).
      // WebSocket and CONNECT tunnels are not inference traffic: refused, not half-relayed.
      if (methodName === 'CONNECT' || !offersOnlyH2c(rawHeaders)) {
        this.refuseRequest(methodName, target, 501, 'protocol upgrades and CONNECT are not proxied');
        return STOP_AFTER_HEAD;
      }
      // Node's parser reports no error inside the body of an upgrade request: a chunked body's
      // framing could not be checked (a malformed one waited for the body timeout instead of a 400).
      // A length-delimited body has no framing to check. curl --http2 -d sends Content-Length.
      if (hasTransferEncoding(rawHeaders)) {
        this.refuseRequest(methodName, target, 501, 'an h2c upgrade offer with a chunked body is not proxied: send the request without the offer');
        return STOP_AFTER_HEAD;
      }
      rawHeaders = withoutH2cOffer(rawHeaders);
      this.upgradeDeclined = true;
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
    if (checked.framing !== 'none') {
      this.bodyActiveSinceMs = performance.now();
      this.bodyCheckedActivity = this.bodyActivity;
      this.bodyChunks = 0;
      this.bodyBytes = 0;
    }
    if (this.current === undefined) {
      this.current = exchange;
      exchange.start();
    } else {
      // Pipelined: answered after the one before it. The connection is still read meanwhile.
      this.queue.push(exchange);
    }
    return 0;
  }

  /** The request body pieces of one socket read, to the exchange reading its body, as one buffer. */
  private flushBody(): void {
    const pieces = this.bodyPieces;
    if (pieces.length === 0) return;
    const chunk = pieces.length === 1 ? (pieces[0] as Buffer) : Buffer.concat(pieces, this.bodyPieceBytes);
    pieces.length = 0;
    this.bodyPieceBytes = 0;
    this.bodyActivity++;
    const exchange = this.receiving;
    if (exchange === undefined) return;
    this.bodyBytes += chunk.length;
    // Node's parser calls back once per chunk, before any coalescing can help: 6 MB of 1-byte
    // chunks still cost 4.7 s of CPU coalesced. Past MIN_CHUNKS_CHECKED chunks, a body whose chunks
    // average under the limit is cut; the data already read still goes upstream first.
    if (this.bodyChunks > MIN_CHUNKS_CHECKED && this.bodyChunks * this.context.limits.minRequestChunkBytes > this.bodyBytes) {
      this.context.counters.tripped('min_request_chunk_bytes');
      this.refuseBody(
        400,
        `the request body came in ${this.bodyChunks} chunks averaging ${(this.bodyBytes / this.bodyChunks).toFixed(1)} bytes, under ${this.context.limits.minRequestChunkBytes} (limits.min_request_chunk_bytes)`,
      );
      return;
    }
    exchange.requestBody(chunk);
    if (exchange !== this.current && !this.pausedForQueue && (this.queuedBodyBytes() > MAX_QUEUED_BODY_BYTES || this.context.sniffing.budget.spent)) {
      if (this.context.sniffing.budget.spent) this.context.counters.tripped('held_body_bytes');
      this.pausedForQueue = true;
      this.socket.pause();
    }
  }

  private queuedBodyBytes(): number {
    let bytes = 0;
    for (const queued of this.queue) bytes += queued.earlyBytes;
    return bytes;
  }

  /**
   * A request beyond limits.pipelined_requests: it and everything after it are not taken; the
   * queued ones are answered in order, then a 503 says why and the connection closes. Reading goes
   * on (and drops what comes), so a client that leaves is still noticed.
   */
  private tooManyPipelined(): void {
    this.context.counters.tripped('pipelined_requests');
    this.discarding = true;
    this.headStartedMs = -1;
    this.closing = true;
    this.answerQueue = true;
    this.refusal ??= simpleResponse(
      503,
      'Service Unavailable',
      'text/plain; charset=utf-8',
      `tokentap: more than ${this.context.limits.pipelinedRequests} requests pipelined behind the one in flight (limits.pipelined_requests)\n`,
      true,
    );
  }

  // ExchangeClient

  /** exchangeFinished ends the connection after this response, with no refusal to send after it. */
  get closesAfterResponse(): boolean {
    return this.endsAfterResponse && this.refusal === undefined;
  }

  /** Closing, and no queued request is to be answered first. */
  private get endsAfterResponse(): boolean {
    return this.closing && !(this.answerQueue && this.queue.length > 0);
  }

  exchangeFinished(keepAlive: boolean): void {
    this.current = undefined;
    // Requests read before a refused one are still answered, in order; then the refusal goes out.
    if (this.refusal !== undefined && keepAlive && this.queue.length > 0) {
      this.current = this.queue.shift();
      this.current?.start();
      return;
    }
    if (!keepAlive || this.endsAfterResponse) {
      this.closing = true;
      for (const queued of this.queue.splice(0)) {
        if (this.draining) queued.declinedByDrain();
        else queued.clientClosed();
      }
      this.end(this.refusal);
      return;
    }
    const next = this.queue.shift();
    if (next !== undefined) {
      this.current = next;
      next.start();
      if (this.pausedForQueue && this.queuedBodyBytes() <= MAX_QUEUED_BODY_BYTES && !this.context.sniffing.budget.spent) {
        this.pausedForQueue = false;
        if (!this.readingPausedByUpstream && this.refusal === undefined) this.socket.resume();
      }
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
    if (!this.pausedForQueue && this.refusal === undefined) this.socket.resume();
  }

  /** Reading is stopped by tokentap (backpressure), not by the client: the body idle timeout waits. */
  get readingStopped(): boolean {
    return this.readingPausedByUpstream || this.pausedForQueue;
  }

  /** The response's stall check (see sendStalledSinceMs): cuts it past limits.response_send_timeout. */
  checkResponseSend(now: number): void {
    const current = this.current;
    if (current === undefined || !current.readingStoppedForClient) {
      this.sendStalledSinceMs = -1;
      return;
    }
    // Written and no longer held: what the kernel has taken (bytesWritten counts the held bytes too).
    const taken = this.socket.bytesWritten - this.socket.writableLength;
    if (this.sendStalledSinceMs === -1 || taken > this.sendTakenBytes) {
      this.sendStalledSinceMs = now;
      this.sendTakenBytes = taken;
      return;
    }
    const timeoutMs = this.context.limits.responseSendTimeoutMs;
    if (now - this.sendStalledSinceMs <= timeoutMs) return;
    this.sendStalledSinceMs = -1;
    this.context.counters.tripped('response_send_timeout');
    current.responseSendTimedOut(`the client took no response bytes for ${timeoutMs} ms (limits.response_send_timeout)`);
  }

  /** Nothing of the request body came for limits.request_body_idle_timeout. */
  bodyTimedOut(): void {
    this.context.counters.tripped('request_body_idle_timeout');
    this.refuseBody(408, `the client sent no request body bytes for ${this.context.limits.requestBodyIdleTimeoutMs} ms (limits.request_body_idle_timeout)`);
  }

  /** The body being read broke a limit: its exchange answers (or, queued, the connection does after the one in flight). */
  private refuseBody(status: 400 | 408, detail: string): void {
    const exchange = this.receiving;
    if (exchange === undefined) return;
    this.receiving = undefined;
    this.bodyActiveSinceMs = -1;
    this.discarding = true;
    if (exchange === this.current) {
      this.closing = true;
      exchange.requestBodyRefused(status, detail);
      return;
    }
    exchange.requestBodyRefused(status, detail);
    this.queue.splice(this.queue.indexOf(exchange), 1);
    this.refuse(status, status === 408 ? 'Request Timeout' : 'Bad Request', `tokentap: ${detail}`);
  }

  /**
   * Ends the connection once what is in flight has been answered (the listener is draining). One
   * with no complete request (idle, or half a head) is closed at once: it must not hold the drain
   * until its head timeout.
   */
  /** Closes a connection found idle: an HTTP/2 session with GOAWAY (a stream opened meanwhile still finishes), else at once. */
  closeIdle(): void {
    if (this.h2 !== undefined) this.h2.closeWhenIdle();
    else this.socket.destroy();
  }

  closeWhenIdle(): void {
    if (this.h2 !== undefined) this.h2.closeWhenIdle();
    else if (this.current === undefined) this.socket.destroy();
    else {
      this.closing = true;
      this.draining = true;
    }
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
    this.context.counters.tripped('request_head_timeout');
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
