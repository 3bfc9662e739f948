import net from 'node:net';
import { ResponseHeadReader } from './http1/response-head.js';

/** What an exchange hears from the upstream connection it holds. */
export interface UpstreamOwner {
  upstreamData(buffer: Buffer): void;
  /** The upstream sent FIN. */
  upstreamEnd(): void;
  /** The connection closed; `error` when a socket error (refused, reset) closed it. */
  upstreamClosed(error: NodeJS.ErrnoException | undefined): void;
  /** The request bytes written earlier have left, after a write reported backpressure. */
  upstreamDrain(): void;
}

/**
 * How long a pooled connection may sit idle before tokentap closes it, and how often that is
 * checked: closed 3-4 s after its last response, below the 5 s keep-alive timeout of uvicorn (vLLM,
 * TGI's router) and Node servers, so tokentap, not the upstream, closes idle connections, and a
 * request is rarely sent on one the upstream is closing at that moment. One check for the pool,
 * not a socket timer armed and cleared per request.
 */
const POOL_IDLE_MS = 3_000;
const POOL_CHECK_MS = 1_000;

/**
 * Every upstream socket reads into this one buffer (net's `onread`): each read reaches the exchange
 * as a call, not through the socket's Readable stream (push, 'data' event, read-more tick), which
 * the profile showed at about a tenth of the proxy's CPU. Reads are delivered one at a time and the
 * exchange copies what it keeps before returning, so one buffer serves all connections.
 */
const READ_BUFFER = Buffer.allocUnsafe(64 * 1024);

/**
 * One connection to the upstream. Its socket listeners are set once, for its whole life, and pass
 * each event to the exchange that holds it (or close it, when an idle connection hears anything):
 * no listener is added or removed per request.
 */
export class UpstreamConnection {
  readonly socket: net.Socket;
  /** Reads each response's head; begun again per response. */
  readonly head = new ResponseHeadReader();
  owner: UpstreamOwner | undefined;
  /** performance.now() when it went back to the pool. */
  idleSinceMs = 0;
  /** Responses completed on it: above 0 it is a reused connection, which the server may have closed unseen. */
  responses = 0;
  private error: NodeJS.ErrnoException | undefined;

  constructor(pool: UpstreamPool, options: net.NetConnectOpts) {
    const socket = net.connect({ ...options, onread: { buffer: READ_BUFFER, callback: (bytes: number, buffer: Uint8Array) => this.read(bytes, buffer) } });
    this.socket = socket;
    socket.on('end', () => {
      if (this.owner === undefined) {
        // The server closed a kept-alive connection between requests: it is never handed out again.
        pool.closedWhileIdle(this);
        socket.destroy();
      } else {
        this.owner.upstreamEnd();
      }
    });
    socket.on('error', (error: NodeJS.ErrnoException) => {
      this.error = error;
    });
    socket.on('close', () => {
      pool.forget(this);
      this.head.close();
      const owner = this.owner;
      this.owner = undefined;
      owner?.upstreamClosed(this.error);
    });
    socket.on('drain', () => this.owner?.upstreamDrain());
  }

  /**
   * One read, in the shared buffer: copied out (the copy is what is forwarded and observed; the
   * buffer is overwritten by the next read). Returning false stops reading (the socket is closing).
   */
  private read(bytes: number, buffer: Uint8Array): boolean {
    const owner = this.owner;
    if (owner === undefined) {
      // Nothing is owed on an idle connection: bytes there mean it is out of step, and it is never
      // handed out again (the readable-while-idle check of undici and Go's net/http).
      this.socket.destroy();
      return false;
    }
    const data = Buffer.allocUnsafe(bytes);
    (buffer as Buffer).copy(data, 0, 0, bytes);
    try {
      owner.upstreamData(data);
    } catch (error) {
      // A bug in the relay's own code: this exchange ends as a broken upstream connection, the
      // sidecar and every other stream go on.
      this.socket.destroy(error as Error);
      return false;
    }
    return true;
  }

  /** Ends the holder's use without telling it: the socket is closed and its events go nowhere. */
  discard(): void {
    this.owner = undefined;
    this.socket.destroy();
  }
}

/**
 * A connection the server closed within this time of its response is taken for a server that closes
 * after every response (llama-server closes 0.3 ms after its last chunk, without `Connection:
 * close`: fixtures/streams/llamacpp/chat-close-after-stream.wire.jsonl), not for a keep-alive
 * timeout, which is seconds (uvicorn 5 s, Node 5 s, llama-server's announced `timeout=5`).
 */
const CLOSED_AFTER_RESPONSE_MS = 1_000;
/**
 * Until one of its connections has sat idle this long after a response without the server closing
 * it, an upstream's connections are not handed out again: a request written on a connection the
 * server is closing at that moment cannot be sent again safely (a POST the server may have read is
 * never retried: exchange.ts), so the pool first watches what the server does. llama-server's close
 * comes 0.3 ms after its last chunk; 100 ms leaves room for a loaded machine. Meanwhile requests
 * take fresh connections.
 */
const REUSE_PROBATION_MS = 100;
/** While not pooling, connections are kept again after this long, to notice a server that changed (restarted, reconfigured). */
const POOLING_RETRY_MS = 30_000;
/**
 * The delayed-ACK stall: a server that writes a response's head and body in two send() calls with
 * Nagle's algorithm on (llama-server) has the body held until the head is acknowledged, and on a
 * reused connection Linux delays that ACK (pingpong mode) by its 40 ms minimum (TCP_DELACK_MIN).
 * A Content-Length body that was ready with its head (a server knows the length only once the body
 * is made) and arrives whole this long after it is taken for that stall.
 */
const DELAYED_BODY_MS = 30;
/** This many stalled responses in a row on reused connections and the pool stops reusing this upstream's connections. */
const DELAYED_REUSES_TO_STOP = 3;

/** Why a connection whose response ended cleanly was closed rather than kept: the `reason` label. */
export type NotReusedReason = 'upstream_closes_after_response' | 'upstream_delays_body_on_reuse';

/**
 * Keep-alive connections to the upstream, unbounded: every concurrent stream gets its own connection
 * at once (a bounded pool would queue stream N+1 behind N, inflating its TTFT). The most recently
 * used idle connection is taken first, so the idle ones age out.
 *
 * Reuse is treated as robust clients (undici, Go's net/http, Envoy) treat it: a connection the
 * server closed (FIN, or bytes nobody asked for) is never handed out. What the server does with
 * kept connections is learnt before they are reused (REUSE_PROBATION_MS), and learnt again after
 * each sign: an upstream that closes its connections right after each response (llama-server) has
 * them closed by tokentap after each response instead of pooled, so no request is sent into the
 * server's close; an upstream whose responses stall on reused connections (head and body in two
 * writes with Nagle on: llama-server's non-streamed answers) is given a fresh connection per
 * request, which carries the body at once. docs/measurement.md has the rules and figures.
 */
export class UpstreamPool {
  private readonly idle: UpstreamConnection[] = [];
  private readonly host: string;
  private readonly port: number;
  private closed = false;
  private idleCheck: NodeJS.Timeout | undefined;
  /** A connection has outlived REUSE_PROBATION_MS idle: the server keeps its connections. */
  private keepsConnections = false;
  /** performance.now() until which released connections are closed, not pooled; 0 while pooling. */
  private notPoolingUntilMs = 0;
  private notPoolingReason: NotReusedReason = 'upstream_closes_after_response';
  /** Consecutive stalled responses on reused connections (DELAYED_BODY_MS). */
  private delayedReuses = 0;

  constructor(host: string, port: number) {
    this.host = host;
    this.port = port;
  }

  acquire(owner: UpstreamOwner): UpstreamConnection {
    let connection: UpstreamConnection | undefined;
    if (this.keepsConnections || this.outlivedProbation()) {
      connection = this.idle.pop();
      // One destroyed (or half-closed by the server) a moment ago whose 'close' has not yet removed it.
      while (connection !== undefined && (connection.socket.destroyed || connection.socket.readableEnded)) connection = this.idle.pop();
    }
    connection ??= this.connect();
    connection.owner = owner;
    return connection;
  }

  /** A new connection, never a pooled one: for the retry of a request whose reused connection failed. */
  acquireFresh(owner: UpstreamOwner): UpstreamConnection {
    const connection = this.connect();
    connection.owner = owner;
    return connection;
  }

  private connect(): UpstreamConnection {
    return new UpstreamConnection(this, { host: this.host, port: this.port, noDelay: true });
  }

  /** The oldest idle connection (first in the list) has sat REUSE_PROBATION_MS without the server closing it. */
  private outlivedProbation(): boolean {
    const oldest = this.idle[0];
    if (oldest === undefined || oldest.socket.destroyed || oldest.socket.readableEnded) return false;
    if (performance.now() - oldest.idleSinceMs < REUSE_PROBATION_MS) return false;
    this.keepsConnections = true;
    return true;
  }

  /**
   * Takes back a connection whose response ended cleanly and that may carry another request.
   * Returns why it was closed instead, when the pool has learnt not to keep this upstream's
   * connections; undefined when it was pooled (or the pool is closing).
   */
  release(connection: UpstreamConnection): NotReusedReason | undefined {
    connection.owner = undefined;
    connection.responses++;
    if (this.closed || connection.socket.destroyed || connection.socket.readableEnded) {
      connection.socket.destroy();
      return undefined;
    }
    if (this.notPoolingUntilMs !== 0) {
      if (performance.now() < this.notPoolingUntilMs) {
        connection.socket.destroy();
        return this.notPoolingReason;
      }
      // Time to look again: this connection is pooled, and handed out once it outlives the
      // probation (a server may answer some requests with a close: llama-server after a stream);
      // one more sign stops pooling again.
      this.notPoolingUntilMs = 0;
      this.keepsConnections = false;
      if (this.notPoolingReason === 'upstream_delays_body_on_reuse') this.delayedReuses = DELAYED_REUSES_TO_STOP - 1;
    }
    connection.idleSinceMs = performance.now();
    this.idle.push(connection);
    this.idleCheck ??= setInterval(() => this.closeStale(), POOL_CHECK_MS).unref();
    return undefined;
  }

  /** The server closed `connection` while it sat in the pool. */
  closedWhileIdle(connection: UpstreamConnection): void {
    if (performance.now() - connection.idleSinceMs < CLOSED_AFTER_RESPONSE_MS) this.closedAfterResponse();
  }

  /**
   * A sign that the upstream closes after every response: an idle connection closed right after its
   * response, or a request that failed on a reused connection before any answer. One is enough: a
   * request sent into such a close is lost (a POST is not sent again), so the pool stops keeping
   * connections and, after POOLING_RETRY_MS, watches one again before reusing any.
   */
  closedAfterResponse(): void {
    this.stopPooling('upstream_closes_after_response');
  }

  /**
   * A Content-Length response whose head came alone and whose body came whole in the next read,
   * `bodyDelayMs` after it (exchange.ts): on a reused connection, DELAYED_BODY_MS or more is the
   * delayed-ACK stall; less, a reuse that works. Responses that say nothing either way (head and
   * body in one read, a streamed or larger body) are not reported.
   */
  responseTiming(reused: boolean, bodyDelayMs: number): void {
    if (!reused) return;
    if (bodyDelayMs < DELAYED_BODY_MS) {
      this.delayedReuses = 0;
      return;
    }
    if (++this.delayedReuses >= DELAYED_REUSES_TO_STOP) this.stopPooling('upstream_delays_body_on_reuse');
  }

  private stopPooling(reason: NotReusedReason): void {
    this.notPoolingUntilMs = performance.now() + POOLING_RETRY_MS;
    this.notPoolingReason = reason;
    this.delayedReuses = 0;
    for (const connection of this.idle.splice(0)) connection.socket.destroy();
    this.stopIdleCheck();
  }

  /** Closes connections idle for POOL_IDLE_MS: the oldest are first in the list. */
  private closeStale(): void {
    const cutoff = performance.now() - POOL_IDLE_MS;
    while (this.idle.length > 0 && (this.idle[0] as UpstreamConnection).idleSinceMs < cutoff) (this.idle.shift() as UpstreamConnection).socket.destroy();
    if (this.idle.length === 0) this.stopIdleCheck();
  }

  private stopIdleCheck(): void {
    clearInterval(this.idleCheck);
    this.idleCheck = undefined;
  }

  /** The connection closed: it must not be handed out again. */
  forget(connection: UpstreamConnection): void {
    const index = this.idle.indexOf(connection);
    if (index !== -1) this.idle.splice(index, 1);
  }

  /** Closes the idle connections; connections in use close when their exchanges end. */
  close(): void {
    this.closed = true;
    this.stopIdleCheck();
    for (const connection of this.idle.splice(0)) connection.socket.destroy();
  }
}
