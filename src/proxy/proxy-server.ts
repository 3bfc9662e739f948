import net from 'node:net';
import { ClientConnection, KEEP_ALIVE_TIMEOUT_MS } from './client-connection.js';
import { ConnectionShares } from './connection-shares.js';
import { LimitCounters } from '../metrics/limit-counters.js';
import type { ExchangeContext } from './exchange.js';
import { HeldBytesBudget } from './held-bytes.js';
import { defaultLimits, type RelayLimits } from './relay-limits.js';
import { IdleSweep } from './idle-sweep.js';
import type { MonitorDependencies } from './request-monitor.js';
import { UpstreamPool } from './upstream-pool.js';
import { Http2Listener } from './h2/h2-listener.js';
import { UpstreamSessions } from './h2/upstream-sessions.js';
import { Http1Upstream } from './h2/http1-upstream.js';
import type { UsageInjector } from './usage-injection.js';

export interface ProxyOptions {
  readonly upstream: URL;
  /** Silence from the upstream (before headers or between chunks) after which the request is cut as `timeout`. */
  readonly upstreamIdleTimeoutMs: number;
  readonly monitor: MonitorDependencies;
  /** False forwards without any observation (no RequestMonitor, no body sniffing): TOKENTAP_OBSERVE=off, for the benchmark. */
  readonly observe?: boolean;
  /** `inject_usage: true`: asks OpenAI streams for usage and hides the extra chunk (usage-injection.ts). */
  readonly usageInjection?: UsageInjector | undefined;
  /** Idle time after which a client's keep-alive connection is closed; default KEEP_ALIVE_TIMEOUT_MS. */
  readonly clientKeepAliveMs?: number;
  /** Time a request head may take to arrive; default limits.requestHeadTimeoutMs. */
  readonly headersTimeoutMs?: number;
  /** What the relay may hold (`limits:`); defaultLimits() when absent. */
  readonly limits?: RelayLimits;
  /** tokentap_limit_exceeded_total; a private set when absent. */
  readonly counters?: LimitCounters;
  /** The held-bytes budget, shared with the usage injector; one of limits.heldBodyBytes when absent. */
  readonly heldBytes?: HeldBytesBudget;
  /** Request bytes held for a retry on a fresh upstream connection (exchange.ts); default RETRY_BODY_LIMIT_BYTES. */
  readonly upstreamRetryBodyLimitBytes?: number;
  /** `upstream_protocol`: `h2c` forwards HTTP/2 clients' streams over h2c; `http1` (default) as HTTP/1.1 requests. */
  readonly upstreamProtocol?: 'http1' | 'h2c';
}

/** `upstream_retry_body_limit`'s default: 64 KiB holds any chat request but a long-context one. */
export const RETRY_BODY_LIMIT_BYTES = 64 * 1024;

/** At most one warning a minute when accept() fails for want of file descriptors: the counter has the rate. */
const FD_WARNING_EVERY_MS = 60_000;

/** Likewise for connections refused per client or closed to share max_connections between clients. */
const SHARE_WARNING_EVERY_MS = 60_000;

/** How long a request head may take to arrive: node:http's headersTimeout default (limits.request_head_timeout's). */
export const HEADERS_TIMEOUT_MS = 60_000;

/**
 * The proxy listener: an HTTP/1.1 relay on plain TCP sockets. Requests are parsed with Node's own
 * parser and forwarded; each response body is forwarded as the upstream's bytes, as they arrive,
 * while a RequestMonitor observes the same bytes beside the stream (exchange.ts).
 *
 * Not node:http, and not fastify + @fastify/http-proxy (the product design's first choice): DESIGN.md
 * section 9 measured that path at 70 ms of CPU per 1,000 streamed tokens without any tap, against
 * 20-24 ms for nginx, and node:http alone still cost 2.3-3.1 times nginx here: two stream objects
 * and a re-framing per body chunk on each side. Side by side on the same load, this relay takes
 * 0.63 times node:http's CPU per token without observation and 0.77 times with it (README,
 * Benchmark); here each upstream read is one write to the client.
 *
 * The interface is node:http's Server where the sidecar needs it (listen, close, closeIdleConnections,
 * closeAllConnections, getConnections), so the drain treats it the same way.
 */
export class ProxyServer extends net.Server {
  private readonly clients = new Set<ClientConnection>();
  private readonly pool: UpstreamPool;
  private readonly h2Upstream: UpstreamSessions | Http1Upstream;
  private readonly timersCheck: NodeJS.Timeout;
  private readonly headersTimeoutMs: number;
  private readonly clientKeepAliveMs: number;
  private readonly requestBodyIdleTimeoutMs: number;
  private readonly connectionLimit: number;
  private lastFdWarningMs = -Infinity;
  private lastShareWarningMs = -Infinity;

  constructor(options: ProxyOptions) {
    super({ noDelay: true, allowHalfOpen: true });
    const { hostname, port } = options.upstream;
    const upstreamPort = port === '' ? 80 : Number(port);
    // An IPv6 literal comes bracketed in a URL; net.connect wants it bare.
    const host = hostname.startsWith('[') ? hostname.slice(1, -1) : hostname;
    this.pool = new UpstreamPool(host, upstreamPort);
    const limits = options.limits ?? defaultLimits();
    const counters = options.counters ?? new LimitCounters();
    this.connectionLimit = limits.maxConnections;
    this.requestBodyIdleTimeoutMs = limits.requestBodyIdleTimeoutMs;
    const sniffing = { maxBytes: limits.sniffedBodyBytes, budget: options.heldBytes ?? new HeldBytesBudget(limits.heldBodyBytes), counters };
    const idleSweep = new IdleSweep(options.upstreamIdleTimeoutMs);
    const upstreamAddress = `${hostname}:${upstreamPort}`;
    const upstreamHttp2 = options.upstreamProtocol === 'h2c';
    this.h2Upstream = upstreamHttp2 ? new UpstreamSessions(`http://${hostname}:${upstreamPort}`, limits.h2StreamWindowBytes) : new Http1Upstream(host, upstreamPort);
    const http2 = new Http2Listener(
      {
        upstream: this.h2Upstream,
        upstreamHttp2,
        upstreamAddress,
        idleSweep,
        requestBodyIdleSweep: new IdleSweep(limits.requestBodyIdleTimeoutMs),
        requestBodyIdleTimeoutMs: limits.requestBodyIdleTimeoutMs,
        responseSendSweep: new IdleSweep(limits.responseSendTimeoutMs),
        responseSendTimeoutMs: limits.responseSendTimeoutMs,
        observe: options.observe !== false,
        monitor: options.monitor,
        sniffing,
        retryBodyLimitBytes: options.upstreamRetryBodyLimitBytes ?? RETRY_BODY_LIMIT_BYTES,
        minRequestChunkBytes: limits.minRequestChunkBytes,
        counters,
      },
      limits,
      counters,
    );
    const context: ExchangeContext = {
      pool: this.pool,
      upstreamAddress,
      upstreamIdleTimeoutMs: options.upstreamIdleTimeoutMs,
      upstreamRetryBodyLimitBytes: options.upstreamRetryBodyLimitBytes ?? RETRY_BODY_LIMIT_BYTES,
      idleSweep,
      observe: options.observe !== false,
      monitor: options.monitor,
      usageInjection: options.usageInjection,
      clientKeepAliveMs: options.clientKeepAliveMs ?? KEEP_ALIVE_TIMEOUT_MS,
      // Whole seconds, rounded down: the connection is never closed before the time it announces.
      keepAliveHeaders: `Connection: keep-alive\r\nKeep-Alive: timeout=${Math.floor((options.clientKeepAliveMs ?? KEEP_ALIVE_TIMEOUT_MS) / 1000)}\r\n`,
      limits,
      counters,
      sniffing,
      http2,
    };
    const shares = new ConnectionShares<ClientConnection>(limits.maxConnections, limits.maxConnectionsPerClient);
    this.on('connection', (socket: net.Socket) => {
      // Undefined once the peer has already gone.
      const peer = socket.remoteAddress;
      const decision = peer === undefined ? undefined : shares.admit(peer);
      if (decision === undefined || !decision.admitted) {
        // Refused: closed as soon as it is accepted, before anything of it is read: nothing was
        // received, so the client may retry it anywhere; the streams open go on.
        if (decision !== undefined) {
          counters.tripped(decision.limit);
          if (decision.limit === 'connections_per_client') this.warnShares(options, { peer, max_connections_per_client: limits.maxConnectionsPerClient }, 'proxy refused a connection: this client holds limits.max_connections_per_client');
        }
        socket.on('error', () => {});
        socket.destroy();
        return;
      }
      if (decision.replaced !== undefined) {
        counters.tripped('connections_fair_share');
        this.warnShares(
          options,
          { peer, closed_peer: decision.replaced.peer, closed_peer_connections: decision.replaced.held, max_connections: limits.maxConnections },
          'proxy at limits.max_connections: closed an unused connection (no request in 1 s) of the client holding the most, to admit another client',
        );
      }
      const connection = new ClientConnection(context, socket, (done) => {
        this.clients.delete(done);
        shares.remove(peer as string, done);
      });
      this.clients.add(connection);
      shares.add(peer as string, connection);
    });
    // accept() failing for want of descriptors: libuv closes the waiting connections with a
    // descriptor it keeps in reserve and reports nothing (uv__emfile_trick); only when it has no
    // reserve does the error come here, where without a listener it would end the process.
    this.on('error', (error: NodeJS.ErrnoException) => {
      if (error.syscall !== 'accept') return;
      counters.tripped('fds');
      const now = performance.now();
      if (now - this.lastFdWarningMs < FD_WARNING_EVERY_MS) return;
      this.lastFdWarningMs = now;
      options.monitor.logger.warn(
        { err: error, open_connections: this.clients.size, max_connections: this.connectionLimit },
        'proxy could not accept a connection (out of file descriptors): lower limits.max_connections or raise ulimit -n',
      );
    });
    this.headersTimeoutMs = options.headersTimeoutMs ?? limits.requestHeadTimeoutMs;
    this.clientKeepAliveMs = context.clientKeepAliveMs;
    // node:http checks heads every 30 s; a quarter of the shorter timeout (at most 1 s) keeps each
    // cut close to its time.
    const checkEveryMs = Math.min(1_000, Math.max(10, Math.min(this.headersTimeoutMs, this.clientKeepAliveMs, this.requestBodyIdleTimeoutMs, limits.responseSendTimeoutMs) / 4));
    this.timersCheck = setInterval(() => this.checkTimers(), checkEveryMs).unref();
    this.on('close', () => {
      clearInterval(this.timersCheck);
      this.pool.close();
      this.h2Upstream.close();
    });
  }

  /** Stops accepting and ends idle keep-alive connections (as node:http's close() does since Node 19). */
  override close(callback?: (error?: Error) => void): this {
    super.close(callback);
    this.closeIdleConnections();
    return this;
  }

  /** Closes connections with nothing in flight; once the listener is closed, the others close after their current response. */
  closeIdleConnections(): void {
    if (!this.listening) {
      for (const connection of this.clients) connection.closeWhenIdle();
      return;
    }
    for (const connection of this.clients) if (connection.idle) connection.closeIdle();
  }

  /** Cuts every connection at once, streams included. */
  closeAllConnections(): void {
    for (const connection of this.clients) connection.socket.destroy();
  }

  /**
   * Cuts every request in flight or queued at once, synchronously, each recorded (as `shutdown` once
   * the drain is cutting): for a second shutdown signal, after which the process exits before any
   * socket event could record them. Returns how many requests were cut.
   */
  cutAll(): number {
    let cut = 0;
    for (const connection of [...this.clients]) cut += connection.cut();
    return cut;
  }

  private warnShares(options: ProxyOptions, fields: Record<string, unknown>, message: string): void {
    const now = performance.now();
    if (now - this.lastShareWarningMs < SHARE_WARNING_EVERY_MS) return;
    this.lastShareWarningMs = now;
    options.monitor.logger.warn({ ...fields, open_connections: this.clients.size }, message);
  }

  /** Head timeout, body idle timeout, keep-alive idle close and response send timeout for every client connection, in one pass. */
  private checkTimers(): void {
    const now = performance.now();
    for (const connection of this.clients) {
      if (connection.headStartedMs !== -1 && now - connection.headStartedMs > this.headersTimeoutMs) connection.headersTimedOut();
      else if (connection.bodyActiveSinceMs !== -1) this.checkBodyIdle(connection, now);
      else if (connection.idleSinceMs !== -1 && now - connection.idleSinceMs > this.clientKeepAliveMs && connection.idle) connection.closeIdle();
      connection.checkResponseSend(now);
    }
  }

  /** A body cut only for the client's own silence: time spent with reading stopped by tokentap does not count. */
  private checkBodyIdle(connection: ClientConnection, now: number): void {
    if (connection.bodyActivity !== connection.bodyCheckedActivity || connection.readingStopped) {
      connection.bodyCheckedActivity = connection.bodyActivity;
      connection.bodyActiveSinceMs = now;
    } else if (now - connection.bodyActiveSinceMs > this.requestBodyIdleTimeoutMs) {
      connection.bodyTimedOut();
    }
  }
}

export function createProxyServer(options: ProxyOptions): ProxyServer {
  return new ProxyServer(options);
}
