import { readFileSync } from 'node:fs';

/**
 * Every resource the relay holds for a client, bounded (issue 13; docs/limits.md has the table of
 * limits, defaults, what trips each one and what the client gets). Configured under `limits:`.
 */
export interface RelayLimits {
  /**
   * Client connections open at once; at the limit a new connection takes the place of one without
   * a request of the peer holding the most (connection-shares.ts), else it is closed as soon as it
   * is accepted.
   */
  readonly maxConnections: number;
  /** Client connections open at once from one peer address; maxConnections by default (no share held back). */
  readonly maxConnectionsPerClient: number;
  /** Time a request head may take to arrive. */
  readonly requestHeadTimeoutMs: number;
  /** Silence from the client in the middle of a request body before the request is cut (408). */
  readonly requestBodyIdleTimeoutMs: number;
  /**
   * Time a client may take no byte of its response while tokentap holds bytes for it (the upstream
   * paused for it) before the response is cut: the upstream's silence meanwhile is not the upstream's.
   */
  readonly responseSendTimeoutMs: number;
  /** Bytes of one JSON request body held to read its `model`. */
  readonly sniffedBodyBytes: number;
  /** Bytes of one request body held by `inject_usage` to rewrite it. */
  readonly rewrittenBodyBytes: number;
  /** Bytes of request bodies held across all requests at once. */
  readonly heldBodyBytes: number;
  /** Requests queued on one connection behind the one being answered. */
  readonly pipelinedRequests: number;
  /** Past 1,024 chunks, the average chunk size a chunked request body must keep (else 400). */
  readonly minRequestChunkBytes: number;
  /** Interim (1xx) responses relayed per request. */
  readonly interimResponses: number;
  /** Bytes of interim response heads relayed per request. */
  readonly interimResponseBytes: number;
  /** Bytes of log lines waiting for stdout before further lines are dropped. */
  readonly logBufferBytes: number;
  /** HTTP/2: streams one client session may have open at once (SETTINGS_MAX_CONCURRENT_STREAMS). */
  readonly h2MaxConcurrentStreams: number;
  /** HTTP/2: bytes of one request's header list, HPACK-decoded (SETTINGS_MAX_HEADER_LIST_SIZE). */
  readonly h2MaxHeaderListBytes: number;
  /** HTTP/2: each stream's flow-control window, both ways (SETTINGS_INITIAL_WINDOW_SIZE): what one stream can hold when its reader stops. */
  readonly h2StreamWindowBytes: number;
  /** HTTP/2: streams a client may reset before their answer is complete, per session and second (rapid reset). */
  readonly h2ClientResetsPerSecond: number;
}

/**
 * File descriptors kept free of client connections: the admin listener and its scrapes and probes,
 * the log and OTLP exports, DCGM, the readiness probe, Node's own (epoll, signals, the thread pool's
 * pipes: about 20 at start-up). A connection that is refused at the limit also takes one for a moment.
 */
export const RESERVED_FDS = 128;

/** Used when the file-descriptor limit cannot be read (not Linux): the usual soft limit, 1,024. */
const FALLBACK_FD_LIMIT = 1024;

/**
 * The default connection limit's ceiling, whatever the descriptors allow (containers often run
 * with ulimit -n 1,048,576): the inference server in the same pod serves far fewer streams at once
 * (vLLM's default max_num_seqs is 256), and each open connection costs memory.
 */
export const MAX_DEFAULT_CONNECTIONS = 4096;

/**
 * Each client connection with a request in flight holds two descriptors (its socket and the
 * upstream's), so the default is half of what the soft `ulimit -n` leaves above RESERVED_FDS, at
 * least 16 and at most MAX_DEFAULT_CONNECTIONS: 448 at 1,024, 64 at 256, 4,096 at 1,048,576.
 */
export function defaultMaxConnections(fdLimit = processFdLimit()): number {
  return Math.min(MAX_DEFAULT_CONNECTIONS, Math.max(16, Math.floor((fdLimit - RESERVED_FDS) / 2)));
}

/** The soft limit on open files (RLIMIT_NOFILE), from /proc/self/limits; FALLBACK_FD_LIMIT when unreadable. */
export function processFdLimit(): number {
  let text: string;
  try {
    text = readFileSync('/proc/self/limits', 'latin1');
  } catch {
    return FALLBACK_FD_LIMIT;
  }
  const soft = /^Max open files\s+(\d+|unlimited)/m.exec(text)?.[1];
  if (soft === undefined) return FALLBACK_FD_LIMIT;
  return soft === 'unlimited' ? Number.MAX_SAFE_INTEGER : Number(soft);
}

export const LIMIT_DEFAULTS = {
  /** node:http's headersTimeout. */
  requestHeadTimeoutMs: 60_000,
  /** nginx's client_body_timeout: the time between two reads of a body, not for the whole body. */
  requestBodyIdleTimeoutMs: 60_000,
  /** nginx's send_timeout: the time between two successful writes to the client, not for the whole response. */
  responseSendTimeoutMs: 60_000,
  /** Chat requests are far smaller; a larger body is forwarded with its model unknown. */
  sniffedBodyBytes: 1 << 20,
  rewrittenBodyBytes: 8 << 20,
  /**
   * 64 MiB: 300 half-sent bodies once held 310 MiB (issue 13); with this they hold at most 64 MiB
   * beside a 512 MiB container limit, and 64 full-size sniffed bodies fit at once.
   */
  heldBodyBytes: 64 << 20,
  /** Inference clients do not pipeline; 16 leaves room for those that do. */
  pipelinedRequests: 16,
  /**
   * Each chunk costs a parser callback (about 0.8 µs): 6 MB in 1-byte chunks cost 4.7 s of CPU and
   * stalled other streams. Clients chunk by buffer (KiBs) or by line; 64 bytes leaves room for both.
   */
  minRequestChunkBytes: 64,
  /** A server sends one 100 Continue and at most a few 103 Early Hints. */
  interimResponses: 8,
  interimResponseBytes: 64 << 10,
  /** About 40,000 request lines (400 bytes each): a minute of 600 requests a second. */
  logBufferBytes: 16 << 20,
  /** nginx's http2_max_concurrent_streams; vLLM's default max_num_seqs (256) streams fit in two sessions. */
  h2MaxConcurrentStreams: 128,
  /** nginx's large_client_header_buffers (4 x 8k); Envoy's max_request_headers_kb is 60 KiB. */
  h2MaxHeaderListBytes: 32 << 10,
  /** RFC 9113's initial window (65,535 bytes), as nginx's; Envoy's default is 256 MiB. */
  h2StreamWindowBytes: 65_535,
  /** Far above a router cancelling streams; far below a reset loop (thousands a second). */
  h2ClientResetsPerSecond: 100,
} as const;

/** Chunks (HTTP/1.1) or DATA frames (HTTP/2) of a request body before their average size is checked against minRequestChunkBytes: a small body may come in a few tiny ones. */
export const MIN_CHUNKS_CHECKED = 1024;

export function defaultLimits(): RelayLimits {
  const maxConnections = defaultMaxConnections();
  return { maxConnections, maxConnectionsPerClient: maxConnections, ...LIMIT_DEFAULTS };
}
