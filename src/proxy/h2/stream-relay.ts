import http2 from 'node:http2';
import type { IncomingHttpHeaders, OutgoingHttpHeaders, ServerHttp2Stream, ClientHttp2Stream } from 'node:http2';
import type { LimitCounters } from '../../metrics/limit-counters.js';
import { modelOf, RequestBodySniffer, type SnifferLimits } from '../request-body-sniffer.js';
import { RequestMonitor, type MonitorDependencies } from '../request-monitor.js';
import { UnobservedRequest } from '../unobserved-request.js';
import { upstreamErrorBody } from '../upstream-error.js';
import type { IdleSweep, IdleWatched } from '../idle-sweep.js';
import { grpcRequestModel, grpcRequestNamesModel } from '../../taps/grpc/request-model.js';
import { endToEndFields, fieldObject, flatFields, upstreamRequestHeaders } from './h2-headers.js';
import type { UpstreamSessions } from './upstream-sessions.js';
import type { Http1Leg, Http1Upstream } from './http1-upstream.js';
import { MIN_CHUNKS_CHECKED } from '../relay-limits.js';

/** The upstream side of a relayed stream: an HTTP/2 stream (h2c upstream) or an HTTP/1.1 exchange presented as one. */
type UpstreamStream = ClientHttp2Stream | Http1Leg;

const { NGHTTP2_NO_ERROR, NGHTTP2_CANCEL, NGHTTP2_INTERNAL_ERROR, NGHTTP2_REFUSED_STREAM, NGHTTP2_FLAG_END_STREAM } = http2.constants;

/** A gRPC message's prefix: the compressed flag and the message's length (4 bytes, big-endian). */
const GRPC_PREFIX_BYTES = 5;
/** Room first made for a gRPC request's first message (never more than its length); grown as it arrives (a Triton request is a few hundred bytes). */
const GRPC_HEAD_FIRST_BYTES = 512;

/**
 * Resets `stream`. node:http2's close(code) first ends the stream's writable side (an empty DATA
 * frame with END_STREAM) and only then sends RST_STREAM: a response cut mid-body would reach the
 * client as complete, and a request cut mid-upload would reach the upstream as a whole one. While
 * the writable side is open, destroy() resets without ending (INTERNAL_ERROR, the one code it sends).
 */
function reset(stream: ServerHttp2Stream | UpstreamStream, code: number, why: string): void {
  if (stream.destroyed) return;
  if (stream.writableEnded) stream.close(code);
  else stream.destroy(new Error(why));
}

/** What every HTTP/2 stream of one proxy listener shares: built once. */
export interface StreamRelayContext {
  readonly upstream: UpstreamSessions | Http1Upstream;
  /** The upstream speaks HTTP/2 (`upstream_protocol: h2c`); gRPC cannot be carried over HTTP/1.1. */
  readonly upstreamHttp2: boolean;
  /** host:port, named in every failure reported to the client and in the log line. */
  readonly upstreamAddress: string;
  readonly idleSweep: IdleSweep;
  /** Times the client's silence on a request body the upstream waits for (limits.request_body_idle_timeout). */
  readonly requestBodyIdleSweep: IdleSweep;
  readonly requestBodyIdleTimeoutMs: number;
  /** Times a client that takes none of its response while the upstream is paused for it (limits.response_send_timeout). */
  readonly responseSendSweep: IdleSweep;
  readonly responseSendTimeoutMs: number;
  readonly observe: boolean;
  readonly monitor: MonitorDependencies;
  readonly sniffing: SnifferLimits;
  /** Request-body bytes held to send a request again when the upstream proves it never processed it (upstream_retry_body_limit). */
  readonly retryBodyLimitBytes: number;
  /** limits.min_request_chunk_bytes: a request body in many DATA frames must average at least this. */
  readonly minRequestChunkBytes: number;
  readonly counters: LimitCounters;
}

/** The session a stream belongs to hears of its end, and of a client reset before its answer was complete. */
export interface StreamOwner {
  streamEnded(relay: StreamRelay, resetEarly: boolean): void;
}

/**
 * One client HTTP/2 stream relayed to one upstream HTTP/2 stream (h2c), both framed by Node's codec.
 * Each upstream DATA read is written to the client stream as it arrives, then handed to the
 * monitor, its time taken at the read (arrived()), as the HTTP/1.1 exchange does.
 *
 * Flow control is per stream: when the client stream's buffer is full (a client that does not open
 * its window), the upstream stream is paused, so nghttp2 stops sending it WINDOW_UPDATE and the
 * upstream stops after one window; other streams on both sessions go on (RFC 9113 section 5.2).
 * The request body is relayed the same way in the other direction.
 *
 * A request is sent again only when the upstream proves it never processed it: its stream was
 * refused (REFUSED_STREAM, RFC 9113 section 8.7) and no GOAWAY says it may have been processed, or
 * it is above a GOAWAY's last-stream-id whatever the code (section 6.8), or it could not be opened
 * on a session already going away; never after a response byte, and only while the body sent so
 * far is held (upstream_retry_body_limit).
 */
export class StreamRelay implements IdleWatched {
  upstreamActivity = 0;
  requestActivity = 0;
  private readonly context: StreamRelayContext;
  private readonly client: ServerHttp2Stream;
  private readonly owner: StreamOwner;
  private readonly monitor: RequestMonitor | UnobservedRequest;
  private readonly sniffer: RequestBodySniffer | undefined;
  private readonly upstreamHeaders: OutgoingHttpHeaders;
  private readonly trailersAsked: boolean;
  private readonly grpc: boolean;
  /** Watches the client's request body for limits.request_body_idle_timeout while the upstream waits for it. */
  private bodyWatch: IdleWatched | undefined;
  private upstream: UpstreamStream | undefined;
  private replay: Buffer[] | undefined = [];
  private replayBytes = 0;
  private retried = false;
  private requestEnded = false;
  private responseStarted = false;
  private upstreamPaused = false;
  /** The client stream drained while the upstream was paused for it: its progress, for limits.response_send_timeout. */
  private clientDrains = 0;
  private sendWatch: IdleWatched | undefined;
  private upstreamTrailers: IncomingHttpHeaders | undefined;
  private upstreamError: string | undefined;
  /**
   * A gRPC call whose request names its model (Triton): its first message, read until it is whole.
   * Its 5-byte prefix first (`grpcPrefix`, which says how long the message is), then the message's
   * bytes copied into one buffer grown as they come, never past that length, each byte of it
   * charged to the sniffing budget and cap. Copied, not held by reference: a client sending
   * one-byte DATA frames would otherwise make every byte an object to hold.
   */
  private grpcPrefix: Buffer | undefined;
  private grpcPrefixBytes = 0;
  private grpcHead: Buffer | undefined;
  private grpcHeadBytes = 0;
  /** The first message's length with its prefix, once the prefix has come; 0 before. */
  private grpcHeadWanted = 0;
  /** DATA frames and bytes of the request body in the current second, for limits.min_request_chunk_bytes. */
  private windowStartMs = 0;
  private windowFrames = 0;
  private windowBytes = 0;
  private readonly path: string;
  /** Nothing more is relayed: the response ended, or the stream failed. */
  private settled = false;

  constructor(context: StreamRelayContext, client: ServerHttp2Stream, headers: IncomingHttpHeaders, rawHeaders: string[], owner: StreamOwner) {
    this.context = context;
    this.client = client;
    this.owner = owner;
    const method = headers[':method'] ?? '';
    const path = headers[':path'] ?? '';
    const contentType = headers['content-type'];
    const grpc = contentType !== undefined && /^application\/grpc/i.test(contentType);
    if (context.observe) {
      const monitor = new RequestMonitor(context.monitor, method, path, headers);
      this.monitor = monitor;
      // gRPC bodies are protobuf: their model is read by the gRPC taps, not the JSON sniffer.
      this.sniffer = grpc ? undefined : new RequestBodySniffer(contentType, monitor.protocol, context.sniffing);
    } else {
      this.monitor = new UnobservedRequest();
    }
    this.path = path;
    this.grpc = grpc;
    if (grpc && context.observe && grpcRequestNamesModel(path.split('?')[0] as string)) this.grpcPrefix = Buffer.alloc(GRPC_PREFIX_BYTES);
    const fields = endToEndFields(rawHeaders);
    this.trailersAsked = grpc || /^\s*trailers\s*$/i.test(String(headers.te ?? ''));
    this.monitor.trace(fields);
    this.upstreamHeaders = upstreamRequestHeaders(headers, fields);
    client.on('data', (chunk: Buffer) => this.requestBody(chunk));
    // A stream the client reset (RST_STREAM) also emits 'end', after 'aborted' (Node 20 and 24): not
    // the end of its body, which ending the upstream request would complete with the part sent
    // (test/security/review-h2-aborted-body.test.ts). Its 'close' follows and ends the relay.
    client.on('end', () => {
      if (!client.aborted) this.requestEnd(grpc);
    });
    client.on('drain', () => {
      if (this.upstreamPaused) {
        this.upstreamPaused = false;
        this.clientDrains++;
        this.upstream?.resume();
      }
    });
    client.on('error', () => {
      // Followed by 'close', which ends the relay.
    });
    client.on('close', () => this.clientClosed());
    if (method === 'CONNECT') {
      this.answer(501, 'upstream_error', 'CONNECT is not proxied over HTTP/2');
      return;
    }
    // RFC 9113 section 8.3.1: `:path` holds the target's path and query, no fragment (as HTTP/1.1's
    // request-rules.ts refuses it).
    if (path.includes('#')) {
      this.answer(400, 'client_error', 'the :path carries a fragment (#...), which clients do not send');
      return;
    }
    if (grpc && !context.upstreamHttp2) {
      this.grpcUnavailable();
      return;
    }
    context.idleSweep.watch(this);
    this.watchResponseSend();
    if (!client.endAfterHeaders) this.watchRequestBody();
    this.open();
  }

  /**
   * The upstream's silence is the client's doing: the request body has not ended and no answer has
   * begun (a request is answered after its body). A gRPC call's request side may stay open for the
   * whole call (Triton's ModelStreamInfer), so there only until its first byte: after it, the
   * upstream is working. Not while reading is stopped because the upstream takes no more of the
   * body (its window is closed): that silence is the upstream's. Not timed as the upstream's
   * silence (upstream_idle_timeout) but as the client's (request_body_idle_timeout), as the
   * HTTP/1.1 relay times a body that stops arriving.
   */
  private get waitingForRequestBody(): boolean {
    return !this.requestEnded && !this.responseStarted && (!this.grpc || this.requestActivity === 0) && !this.client.isPaused();
  }

  /**
   * For upstream_idle_timeout: the upstream's silence is the client's doing while its request body
   * is awaited (above), and while the upstream is paused because the client takes none of its
   * response (a client that never opened its window was cut as the upstream's `timeout`, which burns
   * the SLO); limits.response_send_timeout times that client instead (watchResponseSend).
   */
  get waitingForClient(): boolean {
    return this.upstreamPaused || this.waitingForRequestBody;
  }

  private watchResponseSend(): void {
    const relay = this;
    this.sendWatch = {
      upstreamActivity: 0,
      get requestActivity() {
        return relay.clientDrains;
      },
      // Timed only while the upstream is paused for the client.
      get waitingForClient() {
        return !relay.upstreamPaused;
      },
      upstreamTimeout: () => this.responseSendTimeout(),
    };
    this.context.responseSendSweep.watch(this.sendWatch);
  }

  /** The client took none of its response for limits.response_send_timeout: as good as gone, its stream is cut. */
  private responseSendTimeout(): void {
    if (this.settled) return;
    this.context.counters.tripped('response_send_timeout');
    const detail = `the client took no response bytes for ${this.context.responseSendTimeoutMs} ms (limits.response_send_timeout)`;
    this.finish();
    this.monitor.fail('client_cancelled', undefined, detail);
    if (this.upstream !== undefined) reset(this.upstream, NGHTTP2_CANCEL, detail);
    reset(this.client, NGHTTP2_INTERNAL_ERROR, detail);
  }

  private watchRequestBody(): void {
    const relay = this;
    this.bodyWatch = {
      upstreamActivity: 0,
      get requestActivity() {
        return relay.requestActivity;
      },
      // Not the client's silence: the upstream is working, or takes no more of the body.
      get waitingForClient() {
        return !relay.waitingForRequestBody;
      },
      upstreamTimeout: () => this.requestBodyTimeout(),
    };
    this.context.requestBodyIdleSweep.watch(this.bodyWatch);
  }

  /** No byte of the request body came for limits.request_body_idle_timeout while the upstream waited for it. */
  private requestBodyTimeout(): void {
    if (this.settled) return;
    this.context.counters.tripped('request_body_idle_timeout');
    this.answer(408, 'client_error', `the client sent no request body bytes for ${this.context.requestBodyIdleTimeoutMs} ms (limits.request_body_idle_timeout)`);
  }

  /** Cut from outside (the connection was cut, or the process is shutting down): recorded, the upstream stream cancelled. */
  cut(): void {
    if (!this.settled) this.clientClosed();
  }

  upstreamTimeout(): void {
    if (this.settled) return;
    const detail = `upstream ${this.context.upstreamAddress} sent nothing for upstream_idle_timeout`;
    if (this.upstream !== undefined) reset(this.upstream, NGHTTP2_CANCEL, detail);
    if (!this.responseStarted) this.answer(504, 'timeout', detail);
    else this.failMidBody('timeout', detail);
  }

  private open(): void {
    let upstream: UpstreamStream;
    try {
      upstream = this.context.upstream.request(this.upstreamHeaders, { endStream: this.client.endAfterHeaders });
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      // The session was going away before the stream was opened: nothing of it was sent.
      if (code === 'ERR_HTTP2_GOAWAY_SESSION' || code === 'ERR_HTTP2_INVALID_SESSION') this.unprocessed((error as Error).message);
      // Anything else the upstream's client refuses in the request (node:http throws on what HTTP/1.1
      // cannot carry; nghttp2 already drops fields with control characters, so none is known to
      // pass): refused as the client's, never thrown out of the 'stream' event (it would end the process).
      else this.answer(400, 'client_error', `the request cannot be forwarded (${(error as Error).message})`);
      return;
    }
    this.upstream = upstream;
    upstream.on('response', (headers: IncomingHttpHeaders, flags: number) => this.response(headers, flags));
    upstream.on('data', (chunk: Buffer) => this.responseBody(chunk));
    upstream.on('trailers', (trailers: IncomingHttpHeaders) => {
      this.upstreamTrailers = trailers;
      this.monitor.trailers(trailers);
    });
    upstream.on('end', () => this.responseEnd(upstream));
    upstream.on('drain', () => this.client.resume());
    upstream.on('error', (error: Error) => {
      this.upstreamError = error.message;
    });
    upstream.on('close', () => this.upstreamClosed(upstream));
    const replay = this.replay;
    if (this.retried && replay !== undefined) for (const chunk of replay) upstream.write(chunk);
    if (this.requestEnded && !this.client.endAfterHeaders) upstream.end();
  }

  private requestBody(chunk: Buffer): void {
    this.requestActivity++;
    if (this.cutForTinyFrames(chunk.length)) return;
    this.sniffer?.push(chunk);
    if (this.grpcPrefix !== undefined) this.holdGrpcHead(chunk);
    if (this.replay !== undefined) {
      this.replayBytes += chunk.length;
      if (this.replayBytes > this.context.retryBodyLimitBytes) this.replay = undefined;
      else this.replay.push(chunk);
    }
    const upstream = this.upstream;
    if (upstream !== undefined && !upstream.destroyed && !upstream.write(chunk)) this.client.pause();
  }

  private requestEnd(grpc: boolean): void {
    this.requestEnded = true;
    if (this.bodyWatch !== undefined) this.context.requestBodyIdleSweep.unwatch(this.bodyWatch);
    if (!grpc) {
      const body = this.sniffer?.parsed();
      this.monitor.requestBody(modelOf(body), body);
    } else {
      this.grpcModel();
      // A stream that ended with no whole message (an empty one) has sent all it will.
      this.monitor.requestComplete();
    }
    const upstream = this.upstream;
    if (upstream !== undefined && !upstream.destroyed && !this.client.endAfterHeaders) upstream.end();
  }

  /**
   * As on HTTP/1.1 (client-connection.ts), each DATA frame costs a callback and an upstream write
   * whatever it carries: more than MIN_CHUNKS_CHECKED frames within one second averaging under
   * limits.min_request_chunk_bytes cut the stream (true). Per second, not over the whole body: a
   * gRPC call may stream small messages for as long as it lasts, at a pace no flood keeps to.
   */
  private cutForTinyFrames(bytes: number): boolean {
    const nowMs = performance.now();
    if (nowMs - this.windowStartMs >= 1000) {
      this.windowStartMs = nowMs;
      this.windowFrames = 0;
      this.windowBytes = 0;
    }
    this.windowFrames++;
    this.windowBytes += bytes;
    if (this.settled || this.windowFrames <= MIN_CHUNKS_CHECKED || this.windowFrames * this.context.minRequestChunkBytes <= this.windowBytes) return false;
    this.context.counters.tripped('min_request_chunk_bytes');
    const detail = `the request body came in ${this.windowFrames} DATA frames within a second averaging ${(this.windowBytes / this.windowFrames).toFixed(1)} bytes, under ${this.context.minRequestChunkBytes} (limits.min_request_chunk_bytes)`;
    if (!this.responseStarted) {
      this.answer(400, 'client_error', detail);
      return true;
    }
    this.finish();
    this.monitor.fail('client_error', undefined, detail);
    if (this.upstream !== undefined) reset(this.upstream, NGHTTP2_CANCEL, detail);
    reset(this.client, NGHTTP2_INTERNAL_ERROR, detail);
    return true;
  }

  /**
   * The first message of a gRPC request body whose method names its model, held (against the
   * sniffed body cap and the held-bytes budget, as a JSON body is) until it is whole: a Triton
   * stream's request side may stay open for the whole call. Nothing past that message is held.
   */
  private holdGrpcHead(chunk: Buffer): void {
    let from = 0;
    if (this.grpcHeadWanted === 0) {
      const prefix = this.grpcPrefix as Buffer;
      from = chunk.copy(prefix, this.grpcPrefixBytes, 0, Math.min(chunk.length, GRPC_PREFIX_BYTES - this.grpcPrefixBytes));
      this.grpcPrefixBytes += from;
      if (this.grpcPrefixBytes < GRPC_PREFIX_BYTES) return;
      this.grpcHeadWanted = GRPC_PREFIX_BYTES + prefix.readUInt32BE(1);
      if (this.grpcHeadWanted > this.context.sniffing.maxBytes) {
        // Never whole within the cap: nothing is held for it.
        this.context.counters.tripped('sniffed_body_bytes');
        this.grpcModel();
        return;
      }
    }
    const take = Math.min(chunk.length - from, this.grpcHeadWanted - GRPC_PREFIX_BYTES - this.grpcHeadBytes);
    const held = this.grpcHeadBytes + take;
    let head = this.grpcHead;
    if (take > 0 && (head === undefined || held > head.length)) {
      // Grown by doubling up to the message's length, so that a message arriving a byte at a time
      // is copied O(n) times in all; what is allocated is what is charged.
      const size = Math.min(this.grpcHeadWanted - GRPC_PREFIX_BYTES, Math.max(held, 2 * (head?.length ?? 0), GRPC_HEAD_FIRST_BYTES));
      if (!this.context.sniffing.budget.take(size - (head?.length ?? 0))) {
        this.context.counters.tripped('held_body_bytes');
        this.grpcModel();
        return;
      }
      const grown = Buffer.alloc(size);
      head?.copy(grown, 0, 0, this.grpcHeadBytes);
      head = grown;
      this.grpcHead = grown;
    }
    if (head !== undefined) chunk.copy(head, this.grpcHeadBytes, from, from + take);
    this.grpcHeadBytes = held;
    if (GRPC_PREFIX_BYTES + held === this.grpcHeadWanted) this.grpcModel();
  }

  /** Hands the monitor the model the first message names (undefined if it is not whole), once, and lets go of the bytes. */
  private grpcModel(): void {
    const prefix = this.grpcPrefix;
    if (prefix === undefined) return;
    const head = this.grpcHead;
    const message = head === undefined ? prefix.subarray(0, this.grpcPrefixBytes) : Buffer.concat([prefix, head.subarray(0, this.grpcHeadBytes)]);
    this.monitor.requestBody(grpcRequestModel(this.path.split('?')[0] as string, message));
    this.releaseGrpcHead();
  }

  /** Lets go of the gRPC head held, giving its bytes back to the budget. */
  private releaseGrpcHead(): void {
    if (this.grpcHead !== undefined) this.context.sniffing.budget.give(this.grpcHead.length);
    this.grpcPrefix = undefined;
    this.grpcHead = undefined;
    this.grpcPrefixBytes = 0;
    this.grpcHeadBytes = 0;
  }

  private response(headers: IncomingHttpHeaders, flags: number): void {
    if (this.settled || this.client.destroyed) return;
    // A response has begun: the request is never sent again.
    this.replay = undefined;
    const status = Number(headers[':status']);
    // node:http2 emits 'response' for a final answer only, but neither it nor node:http (an HTTP/1.1
    // upstream) bounds the number: 700 or 101 would be thrown by respond() below.
    if (!Number.isInteger(status) || status < 200 || status > 599) {
      this.answer(502, 'upstream_error', `upstream ${this.context.upstreamAddress} answered with status ${String(headers[':status']).slice(0, 16)}, not a final HTTP status (200-599)`);
      return;
    }
    const contentType = headers['content-type'];
    const fields = endToEndFields(flatFields(headers));
    const outgoing = fieldObject(fields, { ':status': status });
    const endStream = (flags & NGHTTP2_FLAG_END_STREAM) !== 0;
    const waitForTrailers = !endStream && (this.trailersAsked || (contentType !== undefined && /^application\/grpc/i.test(contentType)) || headers.trailer !== undefined);
    try {
      this.client.respond(outgoing, endStream ? { endStream: true } : { waitForTrailers });
    } catch (error) {
      // A head HTTP/2 cannot carry (node:http2 refuses a single-value field sent twice, such as two
      // Content-Type lines from an HTTP/1.1 upstream): nothing was sent, so the client gets the 502.
      this.answer(502, 'upstream_error', `upstream ${this.context.upstreamAddress} sent a response head that cannot be relayed over HTTP/2 (${(error as Error).message})`);
      return;
    }
    this.responseStarted = true;
    const grpcEncoding = headers['grpc-encoding'];
    const contentEncoding = headers['content-encoding'];
    this.monitor.response(status, contentType, typeof grpcEncoding === 'string' ? grpcEncoding : undefined, typeof contentEncoding === 'string' ? contentEncoding : undefined);
    if (endStream) {
      // No body: a bodiless answer, or gRPC's trailers-only response, whose status is in these fields.
      this.monitor.trailers(headers);
      this.finish();
      this.monitor.bodyEnd();
      this.monitor.delivered();
      return;
    }
    if (waitForTrailers) this.client.once('wantTrailers', () => this.sendTrailers());
  }

  /** The body has gone to the client: the upstream's trailers follow, or an empty trailer section when it sent none (END_STREAM). */
  private sendTrailers(): void {
    const trailers = this.upstreamTrailers;
    try {
      this.client.sendTrailers(trailers === undefined ? {} : fieldObject(endToEndFields(flatFields(trailers))));
    } catch (error) {
      // Trailers HTTP/2 cannot carry: none is known to reach here (they come from an h2c upstream,
      // and node:http2 drops on receipt what it would refuse to send), but an exception out of this
      // event handler would end the process. The answer cannot be completed (a gRPC client would
      // read no status), so the client's stream is reset rather than ended as if whole.
      this.failMidBody('upstream_error', `upstream ${this.context.upstreamAddress} sent trailers that cannot be relayed over HTTP/2 (${(error as Error).message})`);
    }
  }

  /** One upstream read: its time taken, forwarded first, then observed. */
  private responseBody(chunk: Buffer): void {
    if (this.settled) return;
    this.upstreamActivity++;
    const monitor = this.monitor;
    monitor.arrived();
    if (!this.client.write(chunk) && !this.upstreamPaused) {
      this.upstreamPaused = true;
      this.upstream?.pause();
    }
    monitor.body(chunk);
  }

  private responseEnd(upstream: UpstreamStream): void {
    // A stream refused and replaced by its retry (unprocessed()) ends nothing.
    if (this.settled || upstream !== this.upstream) return;
    // node:http2 also ends a stream's readable side when the stream closes without END_STREAM (a
    // RST_STREAM, NO_ERROR included, a FIN, a GOAWAY and close): then the stream's 'close'
    // (upstreamClosed) answers 502 or breaks the client's stream. Only END_STREAM is a clean end.
    if (!this.responseStarted || !this.context.upstream.endedWhole(upstream)) {
      if (upstream.destroyed) this.upstreamClosed(upstream);
      return;
    }
    this.finish();
    this.monitor.bodyEnd();
    this.client.end(() => this.delivered());
  }

  /** The response's end left for the client, or the client stream closed after it: a client gone before the terminal event was cancelled. */
  private delivered(): void {
    const monitor = this.monitor;
    if (monitor.finished) return;
    if (this.client.rstCode === undefined || this.client.rstCode === NGHTTP2_NO_ERROR || monitor.terminalSeen) monitor.delivered();
    else monitor.fail('client_cancelled');
  }

  /** The upstream stream closed: after its end, nothing to do; before it, a failure or a refusal to retry. */
  private upstreamClosed(upstream: UpstreamStream): void {
    if (upstream !== this.upstream) return;
    if (this.settled) {
      this.requestUnwanted();
      return;
    }
    const code = upstream.rstCode ?? NGHTTP2_NO_ERROR;
    const why = this.upstreamError ?? `the stream or its connection closed without END_STREAM (HTTP/2 code ${code})`;
    const sessions = this.context.upstream;
    if (!this.responseStarted && (sessions.provablyUnprocessed(upstream) || (code === NGHTTP2_REFUSED_STREAM && !sessions.mayHaveProcessed(upstream)))) {
      this.unprocessed(why);
      return;
    }
    const detail = `upstream ${this.context.upstreamAddress} failed (${why})`;
    if (!this.responseStarted) this.answer(502, 'upstream_error', detail);
    else this.failMidBody('upstream_error', detail);
  }

  /**
   * The upstream closed its stream after the answer while the client was still sending its request
   * (a gRPC server answers trailers-only before reading a body it refuses, then resets its stream
   * NO_ERROR, as grpc-go does): the rest of the request has nowhere to go. The client's stream is
   * closed with NO_ERROR once its answer has gone out (RFC 9113 section 8.1), as the upstream
   * closed its own; left open, a client that never ends its request held the stream (and a slot of
   * its session) for good, with no timer on it, its bytes dropped unread.
   */
  private requestUnwanted(): void {
    const client = this.client;
    if (this.requestEnded || client.destroyed || !client.writableEnded) return;
    const close = (): void => {
      if (!client.destroyed) client.close(NGHTTP2_NO_ERROR);
    };
    if (client.writableFinished) close();
    else client.once('finish', close);
  }

  /** The upstream provably did not process the request: sent once more on a fresh stream if its body is held, else 502. */
  private unprocessed(why: string): void {
    if (!this.retried && this.replay !== undefined) {
      this.retried = true;
      this.monitor.retried();
      this.upstream = undefined;
      // On the next turn: a GOAWAY read with the refusal (the same socket read) retires its session
      // first, so the retry goes to a fresh connection rather than to the one going away.
      setImmediate(() => {
        if (!this.settled) this.open();
      });
      return;
    }
    if (!this.retried) this.context.counters.notRetried('retry_body_limit');
    this.answer(502, 'upstream_error', `upstream ${this.context.upstreamAddress} refused the stream (${why})`);
  }

  private clientClosed(): void {
    if (this.settled) {
      this.delivered();
      this.owner.streamEnded(this, false);
      return;
    }
    this.finish();
    // The client reset its stream or went away before the answer was complete: the upstream
    // stream is cancelled at once (RST_STREAM CANCEL, or INTERNAL_ERROR mid-upload: see reset()),
    // so the engine stops generating.
    if (this.upstream !== undefined) reset(this.upstream, NGHTTP2_CANCEL, 'the client left');
    if (this.monitor.terminalSeen) {
      this.monitor.bodyEnd();
      this.monitor.delivered();
    } else {
      this.monitor.fail('client_cancelled');
    }
    this.owner.streamEnded(this, true);
  }

  /**
   * gRPC needs HTTP/2 end to end (trailers carry its status): with an HTTP/1.1 upstream the call is
   * answered as gRPC servers answer one they cannot serve, a trailers-only response with
   * `grpc-status: 14` (UNAVAILABLE), which gRPC clients report with the message.
   */
  private grpcUnavailable(): void {
    const detail = 'the upstream is HTTP/1.1 (upstream_protocol: http1); gRPC needs upstream_protocol: h2c';
    this.finish();
    this.monitor.fail('upstream_error', 502, detail);
    if (this.client.destroyed) return;
    this.client.respond({ ':status': 200, 'content-type': 'application/grpc', 'grpc-status': '14', 'grpc-message': `tokentap: ${detail}` }, { endStream: true });
  }

  /** Before the response head: tokentap's own error answer (the HTTP/1.1 relay's JSON body). */
  private answer(status: 400 | 408 | 501 | 502 | 504, outcome: 'upstream_error' | 'timeout' | 'client_error', detail: string): void {
    this.finish();
    this.monitor.fail(outcome, status, detail);
    if (this.upstream !== undefined) reset(this.upstream, NGHTTP2_CANCEL, detail);
    const client = this.client;
    if (client.destroyed || client.headersSent) return;
    if (status === 400 || status === 408 || status === 501) {
      client.respond({ ':status': status, 'content-type': 'text/plain; charset=utf-8' });
      // The rest of the request is not wanted: RST_STREAM(NO_ERROR) after the complete answer (RFC
      // 9113 section 8.1), so the stream does not stay open (and its session busy) for a client that never ends it.
      client.end(`tokentap: ${detail}\n`, () => {
        if (!this.requestEnded) client.close(NGHTTP2_NO_ERROR);
      });
      return;
    }
    client.respond({ ':status': status, 'content-type': 'application/json' });
    client.end(upstreamErrorBody(status, detail));
  }

  /** After the response head: the client's stream is reset (INTERNAL_ERROR), never ended cleanly: a clean end would pass for a complete answer. */
  private failMidBody(outcome: 'upstream_error' | 'timeout', detail: string): void {
    this.finish();
    this.monitor.fail(outcome, undefined, detail);
    reset(this.client, NGHTTP2_INTERNAL_ERROR, detail);
  }

  private finish(): void {
    this.settled = true;
    this.context.idleSweep.unwatch(this);
    if (this.bodyWatch !== undefined) this.context.requestBodyIdleSweep.unwatch(this.bodyWatch);
    if (this.sendWatch !== undefined) this.context.responseSendSweep.unwatch(this.sendWatch);
    this.sniffer?.release();
    this.releaseGrpcHead();
    this.replay = undefined;
    if (this.upstreamPaused) {
      this.upstreamPaused = false;
      this.upstream?.resume();
    }
  }
}
