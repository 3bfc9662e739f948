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
  private error: NodeJS.ErrnoException | undefined;

  constructor(pool: UpstreamPool, options: net.NetConnectOpts) {
    const socket = net.connect({ ...options, onread: { buffer: READ_BUFFER, callback: (bytes: number, buffer: Uint8Array) => this.read(bytes, buffer) } });
    this.socket = socket;
    socket.on('end', () => {
      if (this.owner === undefined) socket.destroy();
      else this.owner.upstreamEnd();
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
      // Nothing is owed on an idle connection: bytes there mean it is out of step.
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
 * Keep-alive connections to the upstream, unbounded: every concurrent stream gets its own connection
 * at once (a bounded pool would queue stream N+1 behind N, inflating its TTFT). The most recently
 * used idle connection is taken first, so the idle ones age out.
 */
export class UpstreamPool {
  private readonly idle: UpstreamConnection[] = [];
  private readonly host: string;
  private readonly port: number;
  private closed = false;
  private idleCheck: NodeJS.Timeout | undefined;

  constructor(host: string, port: number) {
    this.host = host;
    this.port = port;
  }

  acquire(owner: UpstreamOwner): UpstreamConnection {
    let connection = this.idle.pop();
    // One destroyed a moment ago whose 'close' has not yet removed it.
    while (connection !== undefined && connection.socket.destroyed) connection = this.idle.pop();
    connection ??= new UpstreamConnection(this, { host: this.host, port: this.port, noDelay: true });
    connection.owner = owner;
    return connection;
  }

  /** Takes back a connection whose response ended cleanly and that may carry another request. */
  release(connection: UpstreamConnection): void {
    connection.owner = undefined;
    if (this.closed || connection.socket.destroyed) {
      connection.socket.destroy();
      return;
    }
    connection.idleSinceMs = performance.now();
    this.idle.push(connection);
    this.idleCheck ??= setInterval(() => this.closeStale(), POOL_CHECK_MS).unref();
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
