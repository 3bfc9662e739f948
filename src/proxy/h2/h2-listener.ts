import http2 from 'node:http2';
import type net from 'node:net';
import type { IncomingHttpHeaders, ServerHttp2Session, ServerHttp2Stream } from 'node:http2';
import type { LimitCounters, LimitName } from '../../metrics/limit-counters.js';
import type { RelayLimits } from '../relay-limits.js';
import { Http2ClientSession, type IdleClock } from './client-session.js';
import { StreamRelay, type StreamRelayContext } from './stream-relay.js';

const { NGHTTP2_REFUSED_STREAM } = http2.constants;

/**
 * Bounds that node:http2 (nghttp2) enforces with fixed values tokentap does not expose: its
 * defaults, named here so docs/limits.md and the tests cite one place.
 */
export const FIXED_H2_BOUNDS = {
  /** Header fields in one request (Node's maxHeaderListPairs default); past it the stream is reset ENHANCE_YOUR_CALM. */
  maxHeaderListPairs: 128,
  /** Settings entries in one SETTINGS frame (Node's maxSettings default). */
  maxSettings: 32,
  /** PINGs sent and not yet acknowledged (Node's maxOutstandingPings default). */
  maxOutstandingPings: 10,
  /** Streams refused (past max concurrent streams) before the session is closed (Node's maxSessionRejectedStreams). */
  maxSessionRejectedStreams: 100,
  /** Invalid frames before the session is closed (Node's maxSessionInvalidFrames). */
  maxSessionInvalidFrames: 1000,
} as const;

/**
 * The HTTP/2 side of the proxy listener: a node:http2 server that never listens; the HTTP/1.1
 * listener hands it each connection that opened with the HTTP/2 preface (preface.ts). The codec,
 * HPACK and flow control are Node's (nghttp2), with the session limits below; each stream is a
 * StreamRelay.
 */
export class Http2Listener {
  private readonly server: http2.Http2Server;
  private readonly context: StreamRelayContext;
  private readonly limits: RelayLimits;
  private readonly counters: LimitCounters;
  private readonly sessions = new WeakMap<ServerHttp2Session, Http2ClientSession>();

  constructor(context: StreamRelayContext, limits: RelayLimits, counters: LimitCounters) {
    this.context = context;
    this.limits = limits;
    this.counters = counters;
    this.server = http2.createServer({
      settings: {
        maxConcurrentStreams: limits.h2MaxConcurrentStreams,
        maxHeaderListSize: limits.h2MaxHeaderListBytes,
        initialWindowSize: limits.h2StreamWindowBytes,
      },
      maxHeaderListPairs: FIXED_H2_BOUNDS.maxHeaderListPairs,
      maxSettings: FIXED_H2_BOUNDS.maxSettings,
      maxOutstandingPings: FIXED_H2_BOUNDS.maxOutstandingPings,
      maxSessionRejectedStreams: FIXED_H2_BOUNDS.maxSessionRejectedStreams,
      maxSessionInvalidFrames: FIXED_H2_BOUNDS.maxSessionInvalidFrames,
    });
    this.server.on('stream', (stream: ServerHttp2Stream, headers: IncomingHttpHeaders, _flags: number, rawHeaders: string[]) => {
      const owner = this.sessions.get(stream.session as ServerHttp2Session);
      stream.on('error', () => {});
      if (owner === undefined) {
        stream.close(NGHTTP2_REFUSED_STREAM);
        return;
      }
      // nghttp2 refuses streams past SETTINGS_MAX_CONCURRENT_STREAMS itself (REFUSED_STREAM), even
      // before the client acknowledged the SETTINGS (measured), but applies SETTINGS_MAX_HEADER_LIST_SIZE
      // only after (RFC 9113 section 6.5.3), which an attacker need never send: checked here, once per stream.
      if (headerListBytes(rawHeaders) > this.limits.h2MaxHeaderListBytes) {
        this.counters.tripped('h2_max_header_list_bytes');
        if (!stream.destroyed) stream.respond({ ':status': 431 }, { endStream: true });
        return;
      }
      owner.started(new StreamRelay(this.context, stream, headers, rawHeaders, owner));
    });
  }

  /** Serves `socket` as HTTP/2 from `held` (the bytes already read, preface first). */
  adopt(socket: net.Socket, held: Buffer, idleClock: IdleClock): Http2ClientSession {
    socket.unshift(held);
    // The listener allows half-open connections for HTTP/1.1 (a client may send FIN after its
    // request, RFC 9112 section 9.6); HTTP/2 has no such state: a client's FIN ends its session,
    // and with it every stream (cancelled upstream). Left on, node:http2 never noticed the FIN and
    // a dropped client's streams ran to their end upstream (measured: all 50 chunks written).
    socket.allowHalfOpen = false;
    let adopted: ServerHttp2Session | undefined;
    const take = (session: ServerHttp2Session): void => {
      adopted = session;
    };
    // The server makes the session synchronously, in its 'connection' listener.
    this.server.once('session', take);
    this.server.emit('connection', socket);
    this.server.off('session', take);
    const session = adopted as ServerHttp2Session;
    const owner = new Http2ClientSession(session, idleClock, this.counters, this.limits.h2ClientResetsPerSecond);
    this.sessions.set(session, owner);
    session.on('error', (error: Error & { code?: string }) => {
      const limit = limitOf(error);
      if (limit !== undefined) this.counters.tripped(limit);
    });
    return owner;
  }
}

/** A header list's size as SETTINGS_MAX_HEADER_LIST_SIZE counts it (RFC 9113 section 6.5.2): each field's name and value octets plus 32. */
function headerListBytes(rawHeaders: readonly string[]): number {
  let bytes = 0;
  for (const field of rawHeaders) bytes += Buffer.byteLength(field, 'latin1');
  return bytes + 16 * rawHeaders.length;
}

/**
 * The limit a session error says was broken: nghttp2 ends a session with these when a peer floods
 * it (RFC 9113 section 10.5); other errors are protocol errors, not limits.
 */
function limitOf(error: Error & { code?: string }): LimitName | undefined {
  if (error.code === 'ERR_HTTP2_TOO_MANY_INVALID_FRAMES') return 'h2_invalid_frames';
  if (/CONTINUATION/.test(error.message)) return 'h2_continuation_frames';
  if (/Flooding was detected/.test(error.message)) return 'h2_flood';
  return undefined;
}
