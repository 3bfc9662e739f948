import http2 from 'node:http2';
import type { ServerHttp2Session } from 'node:http2';
import type { LimitCounters } from '../../metrics/limit-counters.js';
import type { StreamOwner, StreamRelay } from './stream-relay.js';

const { NGHTTP2_ENHANCE_YOUR_CALM } = http2.constants;

/** Where a session tells its connection it has gone idle (no stream open) or busy, for the keep-alive sweep. */
export interface IdleClock {
  idleSinceMs: number;
}

/**
 * One client's HTTP/2 session on the proxy listener: its streams in flight, its keep-alive idle
 * time, and the bound on streams it resets before their answer is complete (rapid reset,
 * CVE-2023-44487: each reset stream still cost an upstream stream, so a client that opens and
 * resets in a loop makes the engine start work it never finishes; nghttp2's own bound is 1,000 at
 * once then 33 a second, and not in every Node release).
 */
export class Http2ClientSession implements StreamOwner {
  readonly session: ServerHttp2Session;
  private readonly relays = new Set<StreamRelay>();
  private readonly idleClock: IdleClock;
  private readonly counters: LimitCounters;
  private readonly maxResetsPerSecond: number;
  private resetsWindowStartMs = 0;
  private resets = 0;
  private closing = false;

  constructor(session: ServerHttp2Session, idleClock: IdleClock, counters: LimitCounters, maxResetsPerSecond: number) {
    this.session = session;
    this.idleClock = idleClock;
    this.counters = counters;
    this.maxResetsPerSecond = maxResetsPerSecond;
    idleClock.idleSinceMs = performance.now();
  }

  /** No stream open. */
  get idle(): boolean {
    return this.relays.size === 0;
  }

  started(relay: StreamRelay): void {
    this.relays.add(relay);
    this.idleClock.idleSinceMs = -1;
  }

  streamEnded(relay: StreamRelay, resetEarly: boolean): void {
    if (!this.relays.delete(relay)) return;
    if (this.relays.size === 0) this.idleClock.idleSinceMs = performance.now();
    if (resetEarly && !this.session.destroyed) this.countReset();
  }

  /** Cuts every stream (each recorded) and the session: the connection is being cut. Returns how many streams were cut. */
  cut(): number {
    const cut = this.relays.size;
    for (const relay of [...this.relays]) relay.cut();
    this.session.destroy();
    return cut;
  }

  /** GOAWAY: no new stream is taken, those open finish, then the connection closes. */
  closeWhenIdle(): void {
    if (!this.session.closed && !this.session.destroyed) this.session.close();
  }

  private countReset(): void {
    const now = performance.now();
    if (now - this.resetsWindowStartMs >= 1_000) {
      this.resetsWindowStartMs = now;
      this.resets = 0;
    }
    if (++this.resets <= this.maxResetsPerSecond || this.closing) return;
    this.closing = true;
    this.counters.tripped('h2_client_resets_per_second');
    // GOAWAY(ENHANCE_YOUR_CALM), then the connection closes; its other streams are cut with it.
    // (destroy()'s own code argument reached the client as NO_ERROR on Node 20 and 24.) Deferred
    // out of the stream's close event, inside node:http2's handling of the frames.
    setImmediate(() => {
      for (const relay of [...this.relays]) relay.cut();
      if (this.session.destroyed) return;
      this.session.goaway(NGHTTP2_ENHANCE_YOUR_CALM);
      this.session.destroy();
    });
  }
}
