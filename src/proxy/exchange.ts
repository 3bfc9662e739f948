import type net from 'node:net';
import { endToEndHeaders, withHost } from './hop-by-hop.js';
import { ChunkedBody, ChunkedBodyError } from './http1/chunked-body.js';
import { incomingHeaders } from './http1/incoming-headers.js';
import { BODY_READ_METHODS, fieldAsksToContinue } from './unread-body.js';
import type { RequestBodyFraming } from './http1/request-rules.js';
import { bodyFraming, ResponseHeadError, type BodyFraming, type ResponseHead } from './http1/response-head.js';
import { CHUNK_END, chunkSizeLine, LAST_CHUNK, requestHead, responseHead, simpleResponse } from './http1/wire.js';
import type { LimitCounters } from '../metrics/limit-counters.js';
import type { RelayLimits } from './relay-limits.js';
import { modelOf, RequestBodySniffer, type SnifferLimits } from './request-body-sniffer.js';
import { RequestMonitor, type MonitorDependencies } from './request-monitor.js';
import { UnobservedRequest } from './unobserved-request.js';
import { upstreamErrorBody } from './upstream-error.js';
import type { IdleSweep, IdleWatched } from './idle-sweep.js';
import type { Http2Listener } from './h2/h2-listener.js';
import type { UpstreamConnection, UpstreamOwner, UpstreamPool } from './upstream-pool.js';
import type { RequestInjection, UpstreamRequestBody, UsageChunkStripper, UsageInjector } from './usage-injection.js';

/**
 * A read's chunk data goes to the monitor (and, re-framed, to the client) piece by piece up to this
 * many pieces, so the usual few events per read stay whole events for the taps; more are gathered.
 */
const MAX_PIECES_APART = 8;

/** Methods RFC 9110 section 9.2.2 defines as idempotent: a request with one may be sent again. */
const IDEMPOTENT_METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'OPTIONS', 'TRACE', 'PUT', 'DELETE']);

/** The request carries `Expect: 100-continue` in any of its Expect fields (unread-body.ts). */
function asksToContinue(rawHeaders: readonly string[]): boolean {
  for (let i = 0; i < rawHeaders.length; i += 2) {
    if ((rawHeaders[i] as string).toLowerCase() === 'expect' && fieldAsksToContinue(rawHeaders[i + 1] as string)) return true;
  }
  return false;
}

/** What every exchange of one proxy listener shares: built once. */
export interface ExchangeContext {
  readonly pool: UpstreamPool;
  /** host:port, named in every failure the proxy reports (client error body, request log line). */
  readonly upstreamAddress: string;
  readonly upstreamIdleTimeoutMs: number;
  /**
   * Request bytes (head, framing and body) held so that a request whose reused upstream connection
   * failed before any response byte can be sent again on a fresh one; a request that has sent more
   * is not retried. 0: no retries.
   */
  readonly upstreamRetryBodyLimitBytes: number;
  /** Cuts exchanges whose upstream has been silent for upstreamIdleTimeoutMs. */
  readonly idleSweep: IdleSweep;
  readonly observe: boolean;
  readonly monitor: MonitorDependencies;
  readonly usageInjection: UsageInjector | undefined;
  /** Idle time after which a client's keep-alive connection is closed. */
  readonly clientKeepAliveMs: number;
  /** `Connection: keep-alive` and `Keep-Alive: timeout=N` lines, for responses that keep the connection. */
  readonly keepAliveHeaders: string;
  readonly limits: RelayLimits;
  /** tokentap_limit_exceeded_total: touched only when a limit trips. */
  readonly counters: LimitCounters;
  /** The model sniffers' cap and the held-bytes budget they share with inject_usage. */
  readonly sniffing: SnifferLimits;
  /** Where connections that open with the HTTP/2 preface are served. */
  readonly http2: Http2Listener;
}

/** One parsed client request head, as request-rules.ts accepted it. */
export interface RequestHead {
  readonly method: string;
  /**
   * The target that goes upstream: origin-form (path and query; an absolute-form target reduced to
   * it) or `*`. The monitor logs, routes and matches its path only.
   */
  readonly url: string;
  readonly rawHeaders: string[];
  /** HTTP/1.1 or later: chunked framing and interim (1xx) responses may be sent to this client. */
  readonly http11: boolean;
  /** The client may send another request on this connection after this one. */
  readonly keepAlive: boolean;
  readonly bodyFraming: RequestBodyFraming;
  /** The Content-Length the parser validated, for bodyFraming 'length'. */
  readonly contentLength: number;
  /** Host to send in place of the client's (absolute-form target, or none sent): request-rules.ts. */
  readonly host: string | undefined;
}

/** What an exchange needs of the client connection it answers on. */
export interface ExchangeClient {
  readonly socket: net.Socket;
  /** The response ended (or failed); `keepAlive` says whether the connection can carry the next request. */
  exchangeFinished(keepAlive: boolean): void;
  /**
   * The connection closes once this response ends (the listener is draining, or a limit closed
   * it), whatever the request asked: its head says `Connection: close`.
   */
  readonly closesAfterResponse: boolean;
  /** Stop or restart reading the client (the upstream is not taking the request body fast enough). */
  pauseReading(): void;
  resumeReading(): void;
}

const enum Phase {
  /** Queued behind an earlier request on the same connection (pipelining). */
  Waiting,
  /** Sent (or sending) upstream; no response head yet. */
  AwaitingHead,
  Body,
  /** The response ended or failed: nothing more goes to the client. */
  Done,
}

/** How the response body reaches the client. */
const enum Output {
  None,
  /** The upstream's body bytes, framing included, unchanged. */
  Verbatim,
  /** The body's data framed as chunks by tokentap (usage chunk stripped). */
  Chunked,
  /** The body's data, unframed, until the connection closes (HTTP/1.0 clients). */
  Raw,
}

/**
 * One request and its response, relayed between a client connection and a pooled upstream
 * connection. The response body is forwarded as the upstream's bytes, unchanged and as they arrive
 * (one write per upstream read), while its framing is followed to hand the tap the data and to know
 * where the response ends; the request is observed by a RequestMonitor beside it.
 *
 * Forward first, observe second: each upstream read is written to the client before the monitor
 * sees it, so the client's byte is never behind the tap's work. Every monitor call catches its own
 * failures: nothing here depends on observation succeeding.
 */
export class Exchange implements UpstreamOwner, IdleWatched {
  upstreamActivity = 0;
  requestActivity = 0;
  private readonly context: ExchangeContext;
  private readonly client: ExchangeClient;
  private readonly request: RequestHead;
  private readonly monitor: RequestMonitor | UnobservedRequest;
  private readonly sniffer: RequestBodySniffer | undefined;
  private readonly injection: RequestInjection | undefined;
  private phase = Phase.Waiting;
  private upstream: UpstreamConnection | undefined;
  private upstreamHeaders: string[] = [];
  /** Request body parts that arrived before start() (pipelined), sent when it starts. */
  private early: Buffer[] | undefined;
  /** Bytes in `early`: the connection stops reading while its queued requests hold too many. */
  earlyBytes = 0;
  /** Interim (1xx) responses relayed so far, and their bytes: capped by limits.interim_responses and interim_response_bytes. */
  private interimResponses = 0;
  private interimBytes = 0;
  private requestEnded = false;
  private requestHeadSent = false;
  /** The usage injection sent a rewritten body under its own Content-Length: no chunk framing. */
  private bodyLengthSet = false;
  /** Where the usage injection sends the held request: made only for requests it applies to. */
  private readonly requestBodySink: UpstreamRequestBody | undefined;
  // Response state.
  private framing: BodyFraming = 'none';
  private output = Output.None;
  private remaining = 0;
  private chunked: ChunkedBody | undefined;
  private stripper: UsageChunkStripper | undefined;
  private responseHeadSent = false;
  /** A request-body write to the upstream reported backpressure, and the upstream has not drained since. */
  private bodyBlockedByUpstream = false;
  /** The client sent `Expect: 100-continue` and waits for the upstream's word before its body. */
  private readonly expectsContinue: boolean;
  /** The upstream answered with `100 Continue` before its final answer. */
  private upstreamContinued = false;
  private upstreamReusable = false;
  private clientKeepAlive = false;
  private upstreamPaused = false;
  /** The monitor's data: every piece when observing, or when tokentap frames the data itself. */
  private dataWanted = false;
  /** The response's last write carries the delivered callback. */
  private deliveryTracked = false;
  /** What was written upstream, byte for byte, while it may still be sent again (see retry()); undefined once it cannot. */
  private replay: Array<Buffer | string> | undefined;
  private replayBytes = 0;
  /** The connection had carried a response before this request: the server may have closed it unseen. */
  private reusedConnection = false;
  private retried = false;
  /**
   * Writes of the request to the upstream connection: issued, and taken by the kernel (their
   * callbacks, which run in order, before the connection's 'close', and without an error only for
   * bytes the kernel took). `requestWrites` is set once the last one is issued.
   */
  private requestWritesIssued = 0;
  private requestWritesTaken = 0;
  private requestWrites = -1;
  private readonly requestWriteDone = (error?: Error | null): void => {
    if (!error) this.requestWritesTaken++;
  };
  /** performance.now() when a Content-Length response's head came without its body; 0 otherwise. */
  private headAloneAtMs = 0;
  /** The monitor saw the protocol's terminal event; the client write that carried it has been issued. */
  private terminalNoted = false;
  /** ... and handed to the client's socket: a client that leaves now got its answer. */
  private terminalDelivered = false;

  constructor(context: ExchangeContext, client: ExchangeClient, request: RequestHead) {
    this.context = context;
    this.client = client;
    this.request = request;
    this.expectsContinue = request.bodyFraming !== 'none' && asksToContinue(request.rawHeaders);
    const needsHeaders = context.observe || context.usageInjection !== undefined;
    const headers = needsHeaders ? incomingHeaders(request.rawHeaders) : undefined;
    if (context.observe) {
      const monitor = new RequestMonitor(context.monitor, request.method, request.url, headers!);
      this.monitor = monitor;
      this.sniffer = new RequestBodySniffer(headers!['content-type'], monitor.protocol, context.sniffing);
    } else {
      this.monitor = new UnobservedRequest();
    }
    // Undefined for every request unless inject_usage is on and this one is an OpenAI JSON POST.
    this.injection = context.usageInjection?.forRequest(request.method, request.url, headers?.['content-type']);
    this.requestBodySink =
      this.injection === undefined
        ? undefined
        : { head: (contentLength) => this.sendRequestHead(contentLength), write: (chunk) => this.writeRequestBody(chunk), end: () => this.endRequestBody() };
  }

  /** The response head has gone to the client: nothing but the response may be written now. */
  get responseStarted(): boolean {
    return this.responseHeadSent;
  }

  /** An HTTP/1.1 client, to which an interim (1xx) response may be sent. */
  get interimAllowed(): boolean {
    return this.request.http11;
  }

  /** Connects (or takes a pooled connection) and sends the request head and what body has come. */
  start(): void {
    this.phase = Phase.AwaitingHead;
    this.upstream = this.context.pool.acquire(this);
    this.reusedConnection = this.upstream.responses > 0;
    if (this.reusedConnection && this.context.upstreamRetryBodyLimitBytes > 0) this.replay = [];
    this.context.idleSweep.watch(this);
    this.upstream.head.begin();
    this.upstreamHeaders = endToEndHeaders(this.request.rawHeaders);
    this.monitor.trace(this.upstreamHeaders);
    if (this.injection === undefined) {
      this.sendRequestHead(undefined);
    } else {
      this.upstreamHeaders = this.injection.requestHeaders(this.upstreamHeaders);
      // The upstream is not asked to continue (the body is rewritten first), so tokentap answers,
      // to the expectation as the relay reads it (asksToContinue), in any Expect field.
      if (this.request.http11 && this.expectsContinue) this.client.socket.write('HTTP/1.1 100 Continue\r\n\r\n');
    }
    const early = this.early;
    this.early = undefined;
    this.context.sniffing.budget.give(this.earlyBytes);
    this.earlyBytes = 0;
    if (early !== undefined) for (const chunk of early) this.forwardRequestBody(chunk);
    if (this.requestEnded) this.finishRequestBody();
  }

  // From the client connection's parser.

  requestBody(chunk: Buffer): void {
    // The upstream's silence is timed from the client's last body byte too: an upload still
    // arriving (held by inject_usage, or queued) is not cut by upstream_idle_timeout.
    this.requestActivity++;
    this.sniffer?.push(chunk);
    if (this.phase === Phase.Waiting) {
      (this.early ??= []).push(chunk);
      this.earlyBytes += chunk.length;
      this.context.sniffing.budget.add(chunk.length);
    } else {
      this.forwardRequestBody(chunk);
    }
  }

  requestEnd(): void {
    this.requestEnded = true;
    const body = this.sniffer?.parsed();
    this.monitor.requestBody(modelOf(body), body);
    if (this.phase !== Phase.Waiting) this.finishRequestBody();
  }

  /**
   * The request's body could not be parsed (client-connection.ts): the exchange ends now, counted
   * `client_error`. The upstream connection holds half a request, so it is destroyed, never
   * pooled; the client gets the connection's 400 after this (or, if the upstream had already
   * answered, a broken stream: a clean end would pass for a complete answer).
   */
  requestMalformed(status: number, problem: string): void {
    if (this.phase === Phase.Done) return;
    const started = this.phase !== Phase.Waiting;
    this.settle();
    this.monitor.fail('client_error', status, problem);
    this.upstream?.discard();
    this.upstream = undefined;
    if (!started) return;
    if (this.responseHeadSent) this.client.socket.destroy();
    else this.client.exchangeFinished(false);
  }

  /** The client connection closed (or sent FIN) while this exchange was open. */
  clientClosed(): void {
    if (this.phase === Phase.Done && this.monitor.finished) return;
    if (!this.monitor.finished) {
      if (this.terminalDelivered) {
        // The client left after the terminal event reached it (GuideLLM closes on `[DONE]`, before
        // uvicorn's separate chunked terminator: fixtures/streams/vllm/): it got its answer.
        if (this.phase !== Phase.Done) this.monitor.bodyEnd();
        this.monitor.delivered();
      } else {
        // The client went away before the last byte: stop the upstream at once so the GPU stops too.
        this.monitor.fail('client_cancelled');
      }
    }
    this.settle();
    this.upstream?.discard();
    this.upstream = undefined;
  }

  /**
   * Queued behind the response after which the drain closes the connection: never forwarded (the
   * client may send it elsewhere), recorded as the shutdown's, not as the client's cancellation.
   */
  declinedByDrain(): void {
    if (this.phase === Phase.Done) return;
    this.settle();
    this.monitor.fail('shutdown');
  }

  /**
   * The request body broke a limit (it stopped arriving for limits.request_body_idle_timeout: 408;
   * its chunks were too small, limits.min_request_chunk_bytes: 400): the request is the client's
   * fault (outcome `client_error`, which burns no SLO). Answered with `status` when nothing was
   * answered yet, else the response is cut; the upstream connection, holding a partial request, is
   * closed. The connection closes after it (the rest of the body would be read as a request).
   */
  requestBodyRefused(status: 400 | 408, detail: string): void {
    if (this.phase === Phase.Done) return;
    const headSent = this.responseHeadSent;
    const queued = this.phase === Phase.Waiting;
    this.settle();
    this.monitor.fail('client_error', headSent ? undefined : status, detail);
    this.upstream?.discard();
    this.upstream = undefined;
    // Queued behind another request: the connection answers once the one in flight has.
    if (queued) return;
    const socket = this.client.socket;
    if (headSent) {
      socket.destroy();
      return;
    }
    if (!socket.destroyed) socket.write(simpleResponse(status, status === 408 ? 'Request Timeout' : 'Bad Request', 'text/plain; charset=utf-8', `tokentap: ${detail}\n`, true));
    this.client.exchangeFinished(false);
  }

  clientDrain(): void {
    if (!this.upstreamPaused) return;
    this.upstreamPaused = false;
    this.upstream?.socket.resume();
  }

  // UpstreamOwner

  /** Only while this exchange holds the connection: at Done it has been released or discarded. */
  upstreamData(buffer: Buffer): void {
    this.upstreamActivity++;
    // The read's arrival time, taken before anything of it is written to the client: TTFT ends when
    // the token reached the proxy, not when it was handed on.
    this.monitor.arrived();
    if (this.phase === Phase.Body) this.responseBody(buffer, 0);
    else this.responseHead(buffer);
  }

  upstreamEnd(): void {
    // A body delimited by the connection's close ends here; any other end is reported on close.
    if (this.phase === Phase.Body && this.framing === 'close') this.responseEnded(false);
  }

  upstreamClosed(error: NodeJS.ErrnoException | undefined): void {
    this.upstream = undefined;
    if (this.phase === Phase.Done) return;
    // No descriptor left for the upstream connection: the process is past its ulimit -n (limits.max_connections too high).
    if (error?.code === 'EMFILE' || error?.code === 'ENFILE') this.context.counters.tripped('fds');
    let notSentAgain = '';
    if (this.lostOnReusedConnection()) {
      // The server closed (or reset) a kept connection before answering: it may close after responses.
      this.context.pool.closedAfterResponse();
      if (this.retryable()) {
        this.retry();
        return;
      }
      const reason = this.replay === undefined ? 'retry_body_limit' : 'request_sent';
      this.context.counters.notRetried(reason);
      notSentAgain = reason === 'request_sent' ? '; the request was not sent again: the upstream had all of it and may have processed it' : '; the request was not sent again: more than upstream_retry_body_limit bytes had been sent';
    }
    const cause = error === undefined ? '' : ` (${error.code ?? error.message})`;
    if (this.responseHeadSent) {
      // The upstream connection broke mid-body: the client must see a broken stream too, never a
      // clean end it would take for a complete answer.
      const detail = error === undefined ? 'closed the connection mid-body' : `connection broke mid-body${cause}`;
      this.failMidBody('upstream_error', `upstream ${this.context.upstreamAddress} ${detail}`);
    } else {
      const detail = error === undefined ? 'closed the connection before answering' : `connection failed${cause}`;
      this.failBeforeHead('upstream_error', 502, `upstream ${this.context.upstreamAddress} ${detail}${notSentAgain}`);
    }
  }

  /**
   * For the idle sweep: the request body is still arriving, the upstream takes what comes, and
   * nothing has been answered. The upstream's silence is then the client's doing (the server waits
   * for the rest of the body), which limits.request_body_idle_timeout cuts with a 408 counted
   * `client_error`; cutting it as the upstream's timeout would blame the server (a 504 `timeout`
   * burns the SLO: any client could page on-call). Not while the client waits on
   * `Expect: 100-continue` for the upstream's first word.
   */
  get waitingForClient(): boolean {
    return this.readingStoppedForClient || (!this.requestEnded && !this.responseHeadSent && !this.bodyBlockedByUpstream && !(this.expectsContinue && this.upstreamActivity === 0));
  }

  /**
   * tokentap stopped reading the upstream because the client is not taking the response: the
   * upstream's silence is then tokentap's doing, not the upstream's (a client that stopped reading
   * was cut as the upstream's `timeout` after upstream_idle_timeout, which burns the SLO: any client
   * could page on-call). limits.response_send_timeout times the client instead (client-connection.ts).
   */
  get readingStoppedForClient(): boolean {
    return this.upstreamPaused && this.phase !== Phase.Done;
  }

  /**
   * The client took no byte of the response for limits.response_send_timeout while tokentap held
   * bytes for it: it has stopped reading, as good as gone (outcome `client_cancelled`). Its stream is
   * cut and the upstream connection closed, so the server stops generating for nobody.
   */
  responseSendTimedOut(detail: string): void {
    if (this.phase === Phase.Done) return;
    this.settle();
    this.monitor.fail('client_cancelled', undefined, detail);
    this.upstream?.discard();
    this.upstream = undefined;
    this.client.socket.destroy();
  }

  upstreamTimeout(): void {
    if (this.phase === Phase.Done) return;
    const detail = `upstream ${this.context.upstreamAddress} sent nothing for ${this.context.upstreamIdleTimeoutMs} ms (upstream_idle_timeout)`;
    this.upstream?.discard();
    this.upstream = undefined;
    if (this.responseHeadSent) this.failMidBody('timeout', detail);
    else this.failBeforeHead('timeout', 504, detail);
  }

  upstreamDrain(): void {
    this.bodyBlockedByUpstream = false;
    this.client.resumeReading();
  }

  // Retry on a fresh connection.

  /**
   * The request's reused connection closed before any response byte (the server closed the
   * kept-alive connection as the request crossed it, or closed it for its own reasons), the client
   * still waits, and the request has not been sent again already. Once a response byte has arrived,
   * never a retry: it may have been forwarded.
   */
  private lostOnReusedConnection(): boolean {
    return this.reusedConnection && !this.retried && this.phase === Phase.AwaitingHead && this.upstreamActivity === 0 && !this.client.socket.destroyed;
  }

  /**
   * Such a request is sent again on a fresh connection only when doing so cannot run it twice
   * (RFC 9110 section 9.2.2: a proxy "MUST NOT automatically retry non-idempotent requests"), and
   * every byte written is still held:
   * - an idempotent method (GET, HEAD, OPTIONS, TRACE, PUT, DELETE), which RFC 9110 lets a client
   *   repeat: running it twice has the effect of running it once;
   * - any other method (POST) only while part of the request had not yet been taken by the kernel
   *   (the client was still sending its body, or a write failed): the upstream never had the whole
   *   request, so it cannot have acted on it. A close or a reset after the last byte proves nothing:
   *   a server that read the request and worked on it closes just the same (a POST was generated
   *   twice that way: issue 23), so it gets a 502, as from nginx, which never resends a POST.
   */
  private retryable(): boolean {
    return this.replay !== undefined && (IDEMPOTENT_METHODS.has(this.request.method) || !this.requestSent);
  }

  /** Every byte of the request has been taken by the kernel: the upstream may have read it all and acted on it. */
  private get requestSent(): boolean {
    return this.requestWrites !== -1 && this.requestWritesTaken === this.requestWrites;
  }

  private retry(): void {
    this.retried = true;
    this.monitor.retried();
    const upstream = this.context.pool.acquireFresh(this);
    this.upstream = upstream;
    upstream.head.begin();
    const replay = this.replay as Array<Buffer | string>;
    // A fresh connection is never retried again: nothing more needs holding.
    this.replay = undefined;
    let writable = true;
    for (const piece of replay) writable = typeof piece === 'string' ? upstream.socket.write(piece, 'latin1') : upstream.socket.write(piece);
    // The failed connection's 'drain' will never come: the client is read again unless this one is full.
    this.bodyBlockedByUpstream = !writable;
    if (writable) this.client.resumeReading();
    else this.client.pauseReading();
  }

  /** Keeps a copy of what goes upstream for retry(), until it exceeds the limit. */
  private hold(piece: Buffer | string): void {
    const replay = this.replay;
    if (replay === undefined) return;
    this.replayBytes += piece.length;
    if (this.replayBytes > this.context.upstreamRetryBodyLimitBytes) this.replay = undefined;
    else replay.push(piece);
  }

  // Request: client to upstream.

  /** Writes the request head: with `contentLength`, for a body tokentap rewrote; else the client's framing. */
  private sendRequestHead(contentLength: number | undefined): void {
    if (this.requestHeadSent || this.upstream === undefined) return;
    this.requestHeadSent = true;
    const request = this.request;
    let headers = this.upstreamHeaders;
    // The framing is tokentap's, from what its parser decided (RFC 9112 section 6): the client's
    // Content-Length and Transfer-Encoding never pass through (hop-by-hop.ts drops them), so the
    // upstream cannot read a different length than tokentap did, and never gets both.
    let framing = '';
    if (contentLength !== undefined) {
      this.bodyLengthSet = true;
      framing = `Content-Length: ${contentLength}\r\n`;
    } else if (request.bodyFraming === 'chunked') {
      framing = 'Transfer-Encoding: chunked\r\n';
    } else if (request.bodyFraming === 'length') {
      framing = `Content-Length: ${request.contentLength}\r\n`;
    }
    if (request.host !== undefined) headers = withHost(headers, request.host);
    const head = requestHead(request.method, request.url, headers, framing);
    this.hold(head);
    this.requestWritesIssued++;
    this.upstream.socket.write(head, 'latin1', this.requestWriteDone);
  }

  private forwardRequestBody(chunk: Buffer): void {
    if (this.injection !== undefined && this.injection.hold(chunk, this.requestBodySink as UpstreamRequestBody)) return;
    this.writeRequestBody(chunk);
  }

  private writeRequestBody(chunk: Buffer): void {
    const socket = this.upstream?.socket;
    if (socket === undefined || chunk.length === 0) return;
    let writable: boolean;
    if (this.request.bodyFraming === 'chunked' && !this.bodyLengthSet) {
      const sizeLine = chunkSizeLine(chunk.length);
      if (this.replay !== undefined) {
        this.hold(sizeLine);
        this.hold(chunk);
        this.hold(CHUNK_END);
      }
      socket.cork();
      socket.write(sizeLine);
      socket.write(chunk);
      this.requestWritesIssued++;
      writable = socket.write(CHUNK_END, this.requestWriteDone);
      socket.uncork();
    } else {
      this.hold(chunk);
      this.requestWritesIssued++;
      writable = socket.write(chunk, this.requestWriteDone);
    }
    if (!writable) {
      this.bodyBlockedByUpstream = true;
      this.client.pauseReading();
    }
  }

  private finishRequestBody(): void {
    if (this.injection !== undefined) this.injection.send(this.requestBodySink as UpstreamRequestBody);
    else this.endRequestBody();
  }

  private endRequestBody(): void {
    const socket = this.upstream?.socket;
    if (socket === undefined) return;
    if (this.request.bodyFraming === 'chunked' && !this.bodyLengthSet) {
      this.hold(LAST_CHUNK);
      this.requestWritesIssued++;
      socket.write(LAST_CHUNK, this.requestWriteDone);
    }
    this.requestWrites = this.requestWritesIssued;
  }

  // Response: upstream to client.

  private responseHead(buffer: Buffer): void {
    // A response has begun: the request is never sent again.
    this.replay = undefined;
    const upstream = this.upstream as UpstreamConnection;
    let read;
    try {
      read = upstream.head.feed(buffer);
    } catch (error) {
      this.unforwardable((error as ResponseHeadError).message);
      return;
    }
    if (read === undefined) return;
    const { head, headBytes } = read;
    const rest = headBytes < buffer.length ? buffer.subarray(headBytes) : undefined;
    // RFC 9110 section 15: status codes are 100-599, and llhttp reads any three digits. Relayed,
    // 600-999 reached clients that cannot know what it means (the HTTP/2 path answers 502 too).
    if (head.status < 100 || head.status > 599) {
      this.unforwardable(`status ${head.status} is outside 100-599`);
      return;
    }
    if (head.status < 200) {
      if (head.status === 101) {
        this.unforwardable('101 Switching Protocols to a request that did not ask to upgrade');
        return;
      }
      // An interim response (100 Continue, 103 Early Hints): passed on to HTTP/1.1 clients, then
      // the final head is read. Counted and capped: an upstream sending them without end to a client
      // that does not read grew the process by 1-3 GB in 8 s (issue 13).
      this.interimResponses++;
      this.interimBytes += headBytes;
      if (head.status === 100) this.upstreamContinued = true;
      const limits = this.context.limits;
      if (this.interimResponses > limits.interimResponses || this.interimBytes > limits.interimResponseBytes) {
        const count = this.interimResponses > limits.interimResponses;
        this.context.counters.tripped(count ? 'interim_responses' : 'interim_response_bytes');
        this.unforwardable(count ? `more than ${limits.interimResponses} interim responses (limits.interim_responses)` : `more than ${limits.interimResponseBytes} bytes of interim responses (limits.interim_response_bytes)`);
        return;
      }
      // Through writeClient: a client that does not drain pauses the upstream, as for the body.
      // (endToEndHeaders drops a Content-Length: an interim response has no body, RFC 9110 section 15.2.)
      if (this.request.http11) this.writeClient(responseHead(head.status, head.statusMessage, endToEndHeaders(head.rawHeaders), ''), 'latin1');
      upstream.head.begin();
      if (rest !== undefined) this.responseHead(rest);
      return;
    }
    if (head.framingProblem !== undefined && bodyFraming(head, this.request.method) !== 'none') {
      this.unforwardable(head.framingProblem);
      return;
    }
    this.startResponse(head);
    if (rest === undefined && this.framing === 'length' && this.remaining > 0) this.headAloneAtMs = performance.now();
    if (this.framing === 'none') this.responseEnded(rest !== undefined);
    else if (rest !== undefined) this.responseBody(rest, 0);
  }

  private startResponse(head: ResponseHead): void {
    const request = this.request;
    this.monitor.response(head.status, head.contentType, undefined, head.contentEncoding);
    this.stripper = this.injection?.responseStripper(head.status, head.contentType, head.contentEncoding);
    const framing = bodyFraming(head, request.method);
    this.framing = framing;
    // A HEAD, 204 or 304 answer has no body (RFC 9110 sections 9.3.2, 15.3.5, 15.4.5), but one
    // whose head announces a body (a length above 0, or chunked) may come from a server that sends
    // that body anyway, after the head: on a reused connection those bytes would be read as the
    // next request's response. Such a connection is closed, not pooled.
    const bodyAnnounced = framing === 'none' && (head.transferEncoded || head.contentLength > 0);
    this.upstreamReusable = head.keepAlive && framing !== 'close' && !bodyAnnounced && !this.bodyMayBeUnread();
    let headers = endToEndHeaders(head.rawHeaders);
    let extra = '';
    let closeDelimited = framing === 'close';
    // The head tokentap writes carries exactly the framing its own decision implies (RFC 9112
    // section 6): endToEndHeaders dropped the upstream's Content-Length and Transfer-Encoding.
    if (framing === 'none') {
      this.output = Output.None;
      // HEAD and 304 answers describe the representation's length (RFC 9110 sections 8.6, 15.4.5);
      // a 204 or a zero-length body has none to describe.
      if (head.contentLength >= 0 && head.status !== 204 && (request.method === 'HEAD' || head.status === 304 || head.contentLength === 0)) extra = `Content-Length: ${head.contentLength}\r\n`;
    } else if (this.stripper === undefined && (framing !== 'chunked' || request.http11)) {
      this.output = Output.Verbatim;
      // The bytes are forwarded framed as they came, and that framing was checked at head time.
      if (framing === 'chunked') extra = 'Transfer-Encoding: chunked\r\n';
      else if (framing === 'length') extra = `Content-Length: ${head.contentLength}\r\n`;
    } else {
      if (this.stripper !== undefined) headers = this.stripper.responseHeaders(headers);
      if (request.http11) {
        this.output = Output.Chunked;
        extra = 'Transfer-Encoding: chunked\r\n';
      } else {
        this.output = Output.Raw;
        closeDelimited = true;
      }
    }
    if (framing === 'chunked') this.chunked = new ChunkedBody();
    else if (framing === 'length') this.remaining = head.contentLength;
    this.dataWanted = this.context.observe || this.output === Output.Chunked || this.output === Output.Raw;
    // An answer that comes before the whole request body (an upload refused early, a final status
    // to `Expect: 100-continue`) ends a connection the rest of the body would otherwise be read on
    // as the next request: announced here (RFC 9110 section 10.1.1: a server that answers before
    // reading the whole request SHOULD say whether it closes), not kept-alive and then closed.
    this.clientKeepAlive = request.keepAlive && !closeDelimited && this.requestEnded && !this.client.closesAfterResponse;
    // As node:http does: clients that read the hint (undici, fetch) stop reusing the connection
    // before tokentap closes it, instead of sending a request into the close. Likewise on a
    // connection the drain closes after this response (RFC 9112 section 9.6: the response before
    // the close says so, and no later request on it is processed), so a client sends its next
    // request, and retries any it pipelined, on another connection.
    if (!this.clientKeepAlive) extra += 'Connection: close\r\n';
    else extra += this.context.keepAliveHeaders;
    this.phase = Phase.Body;
    this.responseHeadSent = true;
    // The head goes out when the upstream's does, not with the first body byte.
    this.writeClient(responseHead(head.status, head.statusMessage, headers, extra), 'latin1', framing === 'none' ? this.deliveredCallback() : undefined);
  }

  /**
   * The upstream may have left the request body unread, so its bytes may be read as the next
   * request on the connection: pooled, that request's answer would go to the next client on it, and
   * the next client's to the one after (an attacker's smuggled request answered to a victim, and
   * the victim's answer, its Authorization echoed, to the attacker:
   * test/security/review-relay-hostile.test.ts). Such a connection is closed, not pooled:
   * - a final answer to `Expect: 100-continue` with no 100 before it: RFC 9110 section 10.1.1 lets
   *   the server decline the body, and one that reads on as if none followed takes the body (sent by
   *   a client that did not wait) for a request (the Expect desync; inject_usage drops `Expect`);
   * - a body on a method whose body servers skip (BODY_READ_METHODS; the 0.CL desync).
   */
  private bodyMayBeUnread(): boolean {
    const request = this.request;
    const hasBody = request.bodyFraming === 'chunked' || (request.bodyFraming === 'length' && request.contentLength > 0);
    if (!hasBody) return false;
    if (!BODY_READ_METHODS.has(request.method)) return true;
    return this.expectsContinue && this.injection === undefined && !this.upstreamContinued;
  }

  /** Relays `buffer` from `start`: forwarded first, then its data handed to the monitor. */
  private responseBody(buffer: Buffer, start: number): void {
    let end = -1;
    let dataEnd = buffer.length;
    if (this.framing === 'chunked') {
      try {
        end = (this.chunked as ChunkedBody).feed(buffer, start);
      } catch (error) {
        this.failMidBody('upstream_error', `upstream ${this.context.upstreamAddress} sent a malformed chunked body (${(error as ChunkedBodyError).message})`);
        return;
      }
    } else if (this.framing === 'length') {
      const take = Math.min(this.remaining, buffer.length - start);
      this.remaining -= take;
      dataEnd = start + take;
      if (this.remaining === 0) end = dataEnd;
      if (this.headAloneAtMs !== 0) this.bodyAfterHead(end !== -1);
    }
    if (this.output === Output.Verbatim) {
      const stop = end === -1 ? buffer.length : end;
      const wire = start === 0 && stop === buffer.length ? buffer : buffer.subarray(start, stop);
      // The write that ends the response says when the last byte has been handed to the client.
      this.writeClient(wire, undefined, end === -1 ? undefined : this.deliveredCallback());
    }
    if (this.dataWanted) {
      if (this.framing === 'chunked') {
        const chunked = this.chunked as ChunkedBody;
        // The pieces are read before any call below can feed the reader again.
        const pieces = chunked.pieces;
        if (pieces > MAX_PIECES_APART) {
          // Tiny chunks (an upstream may send a body a byte per chunk, 10,000 in a read): one copy
          // and one call, rather than a call, a view and the taps' work per piece.
          this.responseData(chunked.gather(buffer));
        } else {
          for (let k = 0; k < pieces; k++) {
            const pieceStart = chunked.pieceStarts[k] as number;
            const pieceEnd = chunked.pieceEnds[k] as number;
            this.responseData(pieceStart === 0 && pieceEnd === buffer.length ? buffer : buffer.subarray(pieceStart, pieceEnd));
          }
        }
      } else {
        this.responseData(start === 0 && dataEnd === buffer.length ? buffer : buffer.subarray(start, dataEnd));
      }
    }
    if (end !== -1) this.responseEnded(end < buffer.length);
  }

  /**
   * The first body read of a Content-Length response whose head came alone: the pool learns from
   * the delay whether this upstream's bodies stall on reused connections (upstream-pool.ts).
   */
  private bodyAfterHead(whole: boolean): void {
    if (whole) this.context.pool.responseTiming(this.reusedConnection && !this.retried, performance.now() - this.headAloneAtMs);
    this.headAloneAtMs = 0;
  }

  /** One piece of the body's data: framed for the client unless forwarded verbatim, then observed. */
  private responseData(data: Buffer): void {
    if (this.output === Output.Chunked || this.output === Output.Raw) {
      const forwarded = this.stripper === undefined ? data : this.stripper.write(data);
      this.writeData(forwarded);
    }
    this.monitor.body(data);
    if (!this.terminalNoted && this.monitor.terminalSeen) this.noteTerminal();
  }

  /**
   * The terminal event has been read, and the bytes that carried it were written to the client
   * before the monitor saw them (forward first): an empty write after them says when they have
   * left for the client's socket.
   */
  private noteTerminal(): void {
    this.terminalNoted = true;
    this.client.socket.write('', 'latin1', (error) => {
      if (!error) this.terminalDelivered = true;
    });
  }

  private writeData(data: Buffer): void {
    if (data.length === 0) return;
    if (this.output === Output.Chunked) {
      const socket = this.client.socket;
      socket.cork();
      socket.write(chunkSizeLine(data.length));
      socket.write(data);
      this.writeClient(CHUNK_END, undefined);
      socket.uncork();
    } else {
      this.writeClient(data, undefined);
    }
  }

  private writeClient(data: Buffer | string, encoding: BufferEncoding | undefined, written?: (error?: Error | null) => void): void {
    const socket = this.client.socket;
    const writable = encoding === undefined ? socket.write(data, written) : socket.write(data, encoding, written);
    if (!writable && !this.upstreamPaused && this.upstream !== undefined) {
      this.upstreamPaused = true;
      this.upstream.socket.pause();
    }
  }

  /** The upstream's response ended cleanly; `trailingBytes` when the upstream sent bytes past its end. */
  private responseEnded(trailingBytes: boolean): void {
    this.settle();
    this.monitor.bodyEnd();
    if (this.output === Output.Chunked || this.output === Output.Raw) {
      const rest = this.stripper?.end();
      if (rest !== undefined) this.writeData(rest);
    }
    if (this.output === Output.Chunked) this.writeClient(LAST_CHUNK, 'latin1', this.deliveredCallback());
    // A body ended by the upstream's close (its last bytes already written), or no body at all.
    else if (!this.deliveryTracked) this.writeClient('', 'latin1', this.deliveredCallback());
    const upstream = this.upstream;
    this.upstream = undefined;
    if (upstream !== undefined) {
      if (this.upstreamPaused) upstream.socket.resume();
      // A connection whose request is still being sent, or that sent more than its response, is not reused.
      if (this.upstreamReusable && this.requestEnded && !trailingBytes) {
        const notReused = this.context.pool.release(upstream);
        if (notReused !== undefined) this.monitor.upstreamNotReused(notReused);
      } else {
        upstream.discard();
      }
    }
    this.client.exchangeFinished(this.clientKeepAlive && this.requestEnded);
  }

  /** For the response's last write: the monitor hears when it reached the client, or that it did not. */
  private deliveredCallback(): (error?: Error | null) => void {
    this.deliveryTracked = true;
    const monitor = this.monitor;
    return (error) => {
      // A client that left after the terminal event reached it got its answer (see clientClosed).
      if (error && !this.terminalDelivered) monitor.fail('client_cancelled');
      else monitor.delivered();
    };
  }

  /** Nothing more goes to the client: the idle sweep lets go of it. */
  private settle(): void {
    this.phase = Phase.Done;
    this.context.idleSweep.unwatch(this);
    // Nothing held for the request outlives it: its bytes go back to the held-bytes budget.
    this.sniffer?.release();
    this.injection?.discard();
    if (this.early !== undefined) {
      this.early = undefined;
      this.context.sniffing.budget.give(this.earlyBytes);
      this.earlyBytes = 0;
    }
  }

  // Failures.

  /** The upstream's head cannot be relayed: the client gets a 502 naming it. */
  private unforwardable(problem: string): void {
    this.upstream?.discard();
    this.upstream = undefined;
    this.failBeforeHead('upstream_error', 502, `upstream ${this.context.upstreamAddress} sent a response that cannot be forwarded (${problem})`);
  }

  /** Before the response head: the client gets tokentap's own error answer. */
  private failBeforeHead(outcome: 'upstream_error' | 'timeout', status: 502 | 504, detail: string): void {
    this.settle();
    this.monitor.fail(outcome, status, detail);
    this.upstream?.discard();
    this.upstream = undefined;
    // The rest of an unread request body would be taken for the next request: the connection closes.
    const keepAlive = this.request.keepAlive && this.requestEnded && !this.client.closesAfterResponse;
    const socket = this.client.socket;
    if (!socket.destroyed) socket.write(simpleResponse(status, status === 502 ? 'Bad Gateway' : 'Gateway Timeout', 'application/json', upstreamErrorBody(status, detail), !keepAlive));
    this.client.exchangeFinished(keepAlive);
  }

  /** After the response head: the client's stream is broken, never ended cleanly. */
  private failMidBody(outcome: 'upstream_error' | 'timeout', detail: string): void {
    this.settle();
    this.monitor.fail(outcome, undefined, detail);
    this.upstream?.discard();
    this.upstream = undefined;
    this.client.socket.destroy();
  }
}
