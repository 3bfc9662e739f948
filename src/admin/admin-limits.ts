import http from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest, FastifyServerFactory, FastifyServerOptions } from 'fastify';
import type { LimitCounters } from '../metrics/limit-counters.js';
import { allowedAdminHost, refusedHostMessage } from './admin-host.js';

/**
 * The admin listener's own limits (docs/limits.md, "The admin listener"). It shares the event loop
 * and the file descriptors with the relay, and whoever can reach its port is not to be trusted
 * more than a proxy client: a hostile review measured, before these limits, 1,100 silent admin
 * connections taking every descriptor (the proxy's clients and /healthz reset), 450 unanswered
 * request bodies holding 450 MiB, and 24 connections pipelining 1,500 `GET /metrics` each
 * stalling every relayed stream for 24 s, then the heap out of memory.
 *
 * Prometheus, kubelet and a browser need none of what is refused: a scrape or a probe is a GET
 * without a body, one at a time per connection, and a handful of connections at once.
 */
export const ADMIN_LIMITS = Object.freeze({
  /** Connections open at once; past it the oldest not being answered is closed, else the newcomer (capConnections). */
  maxConnections: 64,
  /** The whole request, head and (refused) body, within this; else 408 and the connection closed. */
  requestTimeoutMs: 10_000,
  /**
   * A connection on which nothing was read or written for this long while an answer was being
   * sent (the client reads none of it) is closed.
   */
  sendIdleTimeoutMs: 10_000,
  /** Requests read on one connection and not yet answered (HTTP/1.1 pipelining): past it the connection is closed. */
  maxPendingPerConnection: 4,
  /** Once the listener is closing, connections still open after this are closed, whatever they are doing. */
  closeGraceMs: 2_000,
});

/**
 * The Fastify options that carry ADMIN_LIMITS. The server is Node's own, made here: its request and
 * head timeouts are checked every second rather than Node's default 30 (a head trickled in would
 * otherwise hold its connection up to 40 s), and its keep-alive idle timeout is Node's 5 s (a
 * scraper reconnects per scrape at worst) rather than Fastify's 72 s. With a server factory,
 * Fastify listens on one address: a host name (`localhost`) binds the first it resolves to.
 */
export const ADMIN_SERVER_OPTIONS = Object.freeze({
  serverFactory: ((handler) =>
    http.createServer(
      { requestTimeout: ADMIN_LIMITS.requestTimeoutMs, headersTimeout: ADMIN_LIMITS.requestTimeoutMs, connectionsCheckingInterval: 1_000 },
      handler,
    )) as FastifyServerFactory,
  // A body is refused before it is read (guardAdminRequests); none is ever parsed. Fastify takes
  // no 0 here; 1 byte is what a parser would ever read.
  bodyLimit: 1,
  // A path parameter over 100 characters (414) or a path that is no valid percent-encoding (400)
  // is answered before any hook runs: Fastify's own answer quoted the path and had neither
  // nosniff nor no-store.
  frameworkErrors: ((error: FastifyError, _request: FastifyRequest, reply: FastifyReply) =>
    reply
      .code(error.statusCode ?? 400)
      .header('x-content-type-options', 'nosniff')
      .header('cache-control', 'no-store')
      .send({ error: error.code === 'FST_ERR_MAX_PARAM_LENGTH' ? 'a path segment over 100 characters: no admin route takes one' : 'the path is not valid percent-encoding' })) as FastifyServerOptions['frameworkErrors'],
});

/**
 * Applies what the server options cannot: the connection cap, the refusal of methods other than
 * GET and HEAD, of request bodies, of what a page of another site asks, and of a `Host` outside
 * `allowedHosts` (admin-host.ts), the pipelining cap, the send timeout, and the grace at close.
 * Each trip is counted in
 * tokentap_limit_exceeded_total (`admin_connections`, `admin_request_refused`,
 * `admin_pipelined_requests`, `admin_send_timeout`).
 */
export function guardAdminRequests(app: FastifyInstance, counters: LimitCounters | undefined, allowedHosts: readonly string[] = []): void {
  const server = app.server;
  capConnections(server, counters);
  // Node stops checking the request timeouts once its server is closing, so a head left half-sent
  // (or a scrape waiting out its pause) held close(), and the sidecar's shutdown, open for good
  // (measured: 12 s and counting, before and after these limits). A final scrape has the grace.
  app.addHook('preClose', (done) => {
    setTimeout(() => server.closeAllConnections(), ADMIN_LIMITS.closeGraceMs).unref();
    done();
  });

  const pending = new WeakMap<Socket, number>();
  app.addHook('onRequest', async (request, reply) => {
    const socket = request.raw.socket;
    const count = (pending.get(socket) ?? 0) + 1;
    pending.set(socket, count);
    if (count > ADMIN_LIMITS.maxPendingPerConnection) {
      if (count === ADMIN_LIMITS.maxPendingPerConnection + 1) counters?.tripped('admin_pipelined_requests');
      // The answers already owed are dropped with the connection: a client that pipelines this deep
      // is not a scraper.
      socket.destroy();
      return reply.hijack();
    }
    const headers = request.headers;
    const hasBody = headers['transfer-encoding'] !== undefined || (headers['content-length'] !== undefined && headers['content-length'] !== '0');
    if ((request.method !== 'GET' && request.method !== 'HEAD') || hasBody) {
      counters?.tripped('admin_request_refused');
      // The body is never read: the connection closes after this answer.
      return reply
        .code(hasBody ? 413 : 405)
        .header('connection', 'close')
        .header('allow', 'GET, HEAD')
        .send({ error: hasBody ? 'the admin port takes no request body' : `${request.method} is not served here: GET or HEAD` });
    }
    // Node keeps the first of several Host lines and drops the rest, which a Host check would then
    // not see; RFC 9112 section 3.2 has the server refuse such a request, 400.
    if (request.raw.rawHeaders.filter((name, i) => i % 2 === 0 && name.toLowerCase() === 'host').length > 1) {
      counters?.tripped('admin_request_refused');
      return reply.code(400).header('connection', 'close').send({ error: 'more than one Host header: send one' });
    }
    if (fromAnotherSite(headers)) {
      counters?.tripped('admin_request_refused');
      return reply.code(403).send({ error: 'a request a page of another site made: open the status page itself (docs/security.md#the-admin-listener-and-browsers)' });
    }
    const host = headers.host;
    if (!allowedAdminHost(host, allowedHosts)) {
      counters?.tripped('admin_request_refused');
      // 421: this server will not answer for that name (RFC 9110 section 15.5.20).
      return reply.code(421).send({ error: refusedHostMessage(host as string) });
    }
    return undefined;
  });
  app.addHook('onResponse', async (request) => {
    const socket = request.raw.socket;
    const count = pending.get(socket);
    if (count !== undefined) pending.set(socket, count - 1);
  });
}

/**
 * A request a page of another site had the browser send (Fetch Metadata, `Sec-Fetch-Site`), other
 * than following a link to a page: a no-cors `fetch` or an image reads nothing back, but it runs
 * the route: a page in an SRE's browser while a port-forward is open had /profile, /metrics and
 * /readyz answered (Chromium, a hostile review), spending /profile's time share, ending a
 * shutdown's wait for a final scrape early, probing the upstream. Browsers send Fetch Metadata to
 * `localhost` and loopback addresses (potentially trustworthy origins); Prometheus, kubelet and
 * curl send none, and the status page's own fetches are `same-origin`.
 */
function fromAnotherSite(headers: http.IncomingHttpHeaders): boolean {
  const site = headers['sec-fetch-site'];
  if (site !== 'cross-site' && site !== 'same-site') return false;
  return headers['sec-fetch-mode'] !== 'navigate' || headers['sec-fetch-dest'] !== 'document';
}

/**
 * At most ADMIN_LIMITS.maxConnections connections. A connection past it closes the oldest one that
 * is not being answered (silent since it connected, halfway through a head, or idle between
 * requests), and only when every one is being answered, the newcomer. Node's own
 * `server.maxConnections` closed every newcomer: 64 connections sending nothing, each replaced as
 * its 10 s head timeout closed it, made every kubelet probe and Prometheus scrape of the pod fail
 * (a hostile review), and a liveness probe on /readyz then restarts the inference server. A probe
 * or a scrape sends its head at once, so it is answered before the newcomers after it close it.
 * An answer nothing of which moves for ADMIN_LIMITS.sendIdleTimeoutMs closes its connection.
 */
function capConnections(server: http.Server, counters: LimitCounters | undefined): void {
  // Insertion order is connection order: the first idle one found is the oldest.
  const open = new Map<Socket, { answering: number }>();
  server.on('connection', (socket: Socket) => {
    const state = { answering: 0 };
    open.set(socket, state);
    socket.once('close', () => open.delete(socket));
    if (open.size <= ADMIN_LIMITS.maxConnections) return;
    counters?.tripped('admin_connections');
    // Out of the map at once: its 'close' comes later, and a burst of newcomers must each close another.
    for (const [candidate, candidateState] of open) {
      if (candidate !== socket && candidateState.answering === 0) {
        open.delete(candidate);
        candidate.destroy();
        return;
      }
    }
    open.delete(socket);
    socket.destroy();
  });
  // Before Fastify's handler, which may answer at once.
  server.prependListener('request', (request: http.IncomingMessage, response: http.ServerResponse) => {
    const state = open.get(request.socket);
    if (state === undefined) return;
    state.answering++;
    response.once('close', () => state.answering--);
    // Node's http server has no send timeout of its own: a client that reads nothing held its
    // connection, and the answer's bytes in its write queue, for good (a 32 MiB exposition, 25 s
    // and counting). Reset by every byte read or written; past the answer the 5 s keep-alive
    // timeout takes over.
    response.setTimeout(ADMIN_LIMITS.sendIdleTimeoutMs, () => {
      counters?.tripped('admin_send_timeout');
      request.socket.destroy();
    });
  });
}

/**
 * `answer`, shared by every caller that asks while it is being computed: a burst of scrapes or
 * status-page loads (an HA pair of Prometheus, a pipelining client) costs one computation and holds
 * one copy of the answer. Nothing is served after it completes: the next call computes afresh, but
 * starts no sooner than `spacing(cost)` after the last computation ended (callers in between wait
 * and share it).
 */
export function sharedWhileComputing<T>(answer: () => Promise<T>, spacing: (costMs: number) => number = () => 0): () => Promise<T> {
  let running: Promise<T> | undefined;
  let nextAtMs = -Infinity;
  const compute = async (): Promise<T> => {
    const waitMs = nextAtMs - performance.now();
    if (waitMs > 0) await new Promise((resolve) => setTimeout(resolve, waitMs));
    const startedMs = performance.now();
    try {
      return await answer();
    } finally {
      const endedMs = performance.now();
      nextAtMs = endedMs + spacing(endedMs - startedMs);
    }
  };
  return () => {
    if (running !== undefined) return running;
    const started = compute();
    running = started;
    const clear = (): void => {
      if (running === started) running = undefined;
    };
    started.then(clear, clear);
    return started;
  };
}

/**
 * The pause after a /metrics answer before the next is computed: four times what it took, at most
 * MAX_SCRAPE_SPACING_MS. One client scraping in a loop then takes at most a fifth of the event loop
 * the relay runs on (the review measured, before, a 10.9 MB exposition of 0.5 s a scrape taking
 * the relay's p50 from 1.5 to 497 ms), and every answer is still fresh: a default exposition (a
 * few ms) waits a few more, a Prometheus scraping every 15 s never. The cap keeps an HA pair of
 * Prometheus scraping a large exposition at once within a scrape timeout.
 */
export function scrapeSpacingMs(costMs: number): number {
  return Math.min(costMs * 4, MAX_SCRAPE_SPACING_MS);
}

const MAX_SCRAPE_SPACING_MS = 2_000;
