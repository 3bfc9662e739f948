import http2 from 'node:http2';

/**
 * The upstream's HTTP/2 (h2c, prior knowledge) sessions: one at a time, shared by every client
 * stream (HTTP/2 multiplexes; one session is what a gRPC channel keeps per server too). A session
 * that received GOAWAY, closed or failed takes no new stream: the next request opens a fresh one,
 * while the streams already on the old session finish there (RFC 9113 section 6.8).
 */
export class UpstreamSessions {
  private readonly authority: string;
  private readonly settings: http2.Settings;
  private current: http2.ClientHttp2Session | undefined;
  private readonly all = new Set<http2.ClientHttp2Session>();
  /** The last-stream-id of the GOAWAY each session received: the streams up to it may have been processed. */
  private readonly goawayLastStreamId = new WeakMap<http2.ClientHttp2Session, number>();
  /** Each stream's session, kept: node:http2 forgets it (`stream.session`) once the stream is closed. */
  private readonly sessionOf = new WeakMap<object, http2.ClientHttp2Session>();
  /** Streams whose END_STREAM arrived: their readable side ended while they were still open. */
  private readonly endStreamReceived = new WeakSet<object>();

  /**
   * `initialWindowSize` bounds what the upstream may send on one stream before tokentap has passed
   * it on: a stream whose client does not read stops being read from the upstream, so at most one
   * window of it is held (section 6.9).
   */
  constructor(authority: string, initialWindowSize: number) {
    this.authority = authority;
    this.settings = { enablePush: false, initialWindowSize };
  }

  /** The session to open a stream on: the current one, or a fresh connection if it cannot take one. */
  session(): http2.ClientHttp2Session {
    const current = this.current;
    if (current !== undefined && !current.closed && !current.destroyed) return current;
    const session = http2.connect(this.authority, { settings: this.settings, peerMaxConcurrentStreams: 100 });
    this.current = session;
    this.all.add(session);
    const retire = (): void => {
      if (this.current === session) this.current = undefined;
    };
    // GOAWAY: the upstream takes no new stream here (streams above its last-stream-id are closed,
    // and the relay sends them again: provablyUnprocessed); the others finish.
    session.on('goaway', (_code: number, lastStreamId: number) => {
      this.goawayLastStreamId.set(session, lastStreamId);
      retire();
      session.close();
    });
    // The failure reaches each stream as its own error; the session itself is only retired.
    session.on('error', retire);
    session.on('close', () => {
      retire();
      this.all.delete(session);
    });
    // An idle upstream session does not keep the process alive (the drain waits for streams only).
    session.unref();
    return session;
  }

  /** A stream on the current session (or a fresh one); throws when that session is already going away. */
  request(headers: http2.OutgoingHttpHeaders, options: { endStream: boolean }): http2.ClientHttp2Stream {
    const session = this.session();
    const stream = session.request(headers, options);
    this.sessionOf.set(stream, session);
    // node:http2 ends a stream's readable side ('end', rstCode 0) alike for END_STREAM and for a
    // RST_STREAM(NO_ERROR) or a lost connection before it: only the moment of its end-of-data
    // push tells them apart. END_STREAM pushes it while the stream is open; a close pushes it
    // after marking the stream closed (lib/internal/http2/core.js onStreamClose; measured the same
    // on Node 20.20.2 and 24.21.0, read flowing or paused; test/security/h2-upstream-faults.test.ts
    // pins a reset with NO_ERROR before and after END_STREAM).
    const push = stream.push;
    stream.push = (chunk: unknown, encoding?: BufferEncoding): boolean => {
      if (chunk === null && !stream.closed) this.endStreamReceived.add(stream);
      return push.call(stream, chunk, encoding);
    };
    return stream;
  }

  /** The upstream ended `stream` with END_STREAM: its answer is whole (not cut by a reset or a lost connection). */
  endedWhole(stream: object): boolean {
    return this.endStreamReceived.has(stream);
  }

  /**
   * The upstream provably did not process `stream`: its session received a GOAWAY whose
   * last-stream-id is below the stream's id, or the stream was never sent (no id). RFC 9113
   * section 6.8: whatever the GOAWAY's error code, the streams above it were not processed.
   */
  provablyUnprocessed(stream: object): boolean {
    const session = this.sessionOf.get(stream);
    const lastStreamId = session === undefined ? undefined : this.goawayLastStreamId.get(session);
    if (lastStreamId === undefined) return false;
    const id = (stream as http2.ClientHttp2Stream).id;
    return id === undefined || id > lastStreamId;
  }

  /**
   * The upstream may have processed `stream`: its session received a GOAWAY whose last-stream-id
   * is at or above the stream's id (RFC 9113 section 6.8). node:http2 then closes such a stream
   * with the GOAWAY's own error code, which may be REFUSED_STREAM, so that code alone does not
   * prove the stream unprocessed. A stream above the last-stream-id, or never given an id, was not.
   */
  mayHaveProcessed(stream: object): boolean {
    const session = this.sessionOf.get(stream);
    const lastStreamId = session === undefined ? undefined : this.goawayLastStreamId.get(session);
    const id = (stream as http2.ClientHttp2Stream).id;
    return lastStreamId !== undefined && id !== undefined && id <= lastStreamId;
  }

  /** Every session closed, streams in flight cut: the listener is closing. */
  close(): void {
    for (const session of this.all) session.destroy();
    this.all.clear();
    this.current = undefined;
  }
}
