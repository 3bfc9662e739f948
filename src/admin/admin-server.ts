import http from 'node:http';
import Fastify, { type FastifyInstance } from 'fastify';
import type { DrainState } from '../lifecycle/drain-state.js';
import type { FinalScrape } from '../lifecycle/final-scrape.js';
import type { LimitCounters } from '../metrics/limit-counters.js';
import type { Telemetry } from '../metrics/telemetry.js';
import { registerUpstreamReady } from '../metrics/upstream-ready.js';
import { PROTOBUF_CONTENT_TYPE } from '../metrics/protobuf-exposition.js';
import { ADMIN_SERVER_OPTIONS, guardAdminRequests, scrapeSpacingMs, sharedWhileComputing } from './admin-limits.js';
import { wantsProtobuf } from './exposition-format.js';
import type { ProfileStore } from '../profile/profile-store.js';
import { registerProfileRoutes } from './profile-routes.js';
import { registerStatusRoutes } from './status-routes.js';
import type { StatusSource } from './status-source.js';

export interface AdminOptions {
  readonly telemetry: Telemetry;
  readonly upstream: URL;
  readonly upstreamHealthPath: string;
  /** Fails readiness from the first shutdown signal; absent, readiness follows the upstream only. */
  readonly drain?: DrainState;
  /** The status page and /status.json (status-routes.ts); absent, neither route exists. */
  readonly status?: StatusSource;
  /**
   * The workload-shape record (profile-routes.ts) and the counters its refusals go to; absent,
   * /profile does not exist.
   */
  readonly profiles?: { readonly store: ProfileStore; readonly limitCounters: LimitCounters };
  /** Where the admin listener's own limits count their trips (admin-limits.ts). */
  readonly limitCounters?: LimitCounters;
  /** Host names besides the private ones the listener answers to (`admin_allowed_hosts`, admin-host.ts). */
  readonly allowedHosts?: readonly string[];
  /** Told of each exposition sent, for the shutdown's wait for a last scrape (lifecycle/final-scrape.ts). */
  readonly finalScrape?: FinalScrape;
}

/** How long /readyz waits for the upstream's health answer; kubelet's default probe timeout is 1 s. */
const READINESS_TIMEOUT_MS = 800;

/**
 * How long one upstream health answer serves /readyz: a flood of /readyz calls sends at most one
 * request a second to the upstream (calls during a probe share it). kubelet probes every 10 s by
 * default, so readiness is never staler than it would be anyway.
 */
export const READINESS_CACHE_MS = 1_000;

/**
 * The admin listener: /metrics, /healthz, /readyz. A separate port from the proxy's, so nothing on
 * the user-traffic port ever reaches these; bounded by admin-limits.ts.
 */
export function createAdminServer(options: AdminOptions): FastifyInstance {
  const app = Fastify({ logger: false, ...ADMIN_SERVER_OPTIONS });
  // Every answer, refusals and 404s included (this hook runs first): a browser must not read JSON
  // or exposition text carrying names from traffic or configuration as a page of its own.
  // Every figure is of the moment it is asked for: no cache, the browser's included, keeps one.
  app.addHook('onRequest', async (_request, reply) => {
    reply.header('x-content-type-options', 'nosniff').header('cache-control', 'no-store');
  });
  // Fastify's 404 quoted the target, query included; nothing here repeats what a client sent.
  app.setNotFoundHandler((request, reply) =>
    reply.code(404).send({ error: `no ${request.method} route of that path here: the admin listener serves /metrics, /healthz, /readyz and the status page at / (docs/status-page.md)` }),
  );
  guardAdminRequests(app, options.limitCounters, options.allowedHosts);
  let lastReady: boolean | undefined;
  const probe = cachedProbe(new URL(options.upstreamHealthPath, options.upstream), (answer) => (lastReady = answer.ready));
  registerUpstreamReady(options.telemetry.meter, () => lastReady);
  const telemetry = options.telemetry;
  // Each exposition with when its computation began: a scrape shared from an earlier computation
  // may predate the counts the shutdown waits to see read.
  const computed = <T>(scrape: () => Promise<T>) => async () => {
    const fromMs = performance.now();
    return { body: await scrape(), fromMs };
  };
  // Encoded once per computation: every connection sending it then shares the one Buffer, where a
  // string was encoded into each connection's write queue (16 clients reading none of a 32 MiB
  // exposition held 1.5 GiB until the send timeout closed them).
  const scrapeText = sharedWhileComputing(computed(async () => Buffer.from(await telemetry.scrape(), 'utf8')), scrapeSpacingMs);
  const scrapeProtobuf = sharedWhileComputing(computed(() => telemetry.scrapeProtobuf()), scrapeSpacingMs);
  const finalScrape = options.finalScrape;

  app.get('/metrics', async (request, reply) => {
    // The same families either way; protobuf also carries native histograms (exposition-format.ts).
    // The body depends on Accept, so a cache must key on it (RFC 9110 section 12.5.5).
    reply.header('vary', 'Accept');
    const protobuf = wantsProtobuf(request.headers.accept);
    if (protobuf) {
      const { body, fromMs } = await scrapeProtobuf();
      if (finalScrape !== undefined) reply.raw.once('finish', () => finalScrape.served(fromMs));
      return reply.header('content-type', PROTOBUF_CONTENT_TYPE).send(Buffer.from(body.buffer, body.byteOffset, body.byteLength));
    }
    const { body, fromMs } = await scrapeText();
    if (finalScrape !== undefined) reply.raw.once('finish', () => finalScrape.served(fromMs));
    return reply.header('content-type', 'text/plain; version=0.0.4; charset=utf-8').send(body);
  });

  // Liveness: the process serves; it says nothing about the upstream (restarting the sidecar
  // would not fix a slow model server).
  app.get('/healthz', async () => ({ status: 'ok' }));

  // Readiness: only while the upstream answers, so the Service stops sending traffic to a pod whose
  // inference server is down; and never once shutdown has begun, so the endpoint is removed while
  // in-flight streams drain. /metrics keeps answering until the process exits, for a last scrape
  // (waited for with final_scrape_wait).
  app.get('/readyz', async (_request, reply) => {
    const draining = options.drain?.reason;
    if (draining !== undefined) return reply.code(503).send({ status: 'draining', reason: draining });
    const answer = await probe();
    return reply.code(answer.ready ? 200 : 503).send({ status: answer.ready ? 'ready' : 'not ready', upstream: answer.detail });
  });

  if (options.status !== undefined) registerStatusRoutes(app, options.status);
  if (options.profiles !== undefined) registerProfileRoutes(app, options.profiles.store, options.profiles.limitCounters);

  return app;
}

interface ProbeAnswer {
  readonly ready: boolean;
  readonly detail: string;
}

/** probeUpstream, at most once per READINESS_CACHE_MS: the answer is kept from when it came, and handed to `onAnswer`. */
function cachedProbe(url: URL, onAnswer: (answer: ProbeAnswer) => void): () => Promise<ProbeAnswer> {
  let answer: Promise<ProbeAnswer> | undefined;
  let answeredAtMs = -Infinity;
  let probing = false;
  return () => {
    if (answer !== undefined && (probing || performance.now() - answeredAtMs < READINESS_CACHE_MS)) return answer;
    probing = true;
    answer = probeUpstream(url).then((result) => {
      probing = false;
      answeredAtMs = performance.now();
      onAnswer(result);
      return result;
    });
    return answer;
  };
}

/**
 * Ready when the upstream answers at all below 500 (Ollama has no /health and answers 404: it is up).
 * Connect and head together within READINESS_TIMEOUT_MS: a socket idle timeout fires only on
 * silence, so an upstream dripping its head a byte every 300 ms held the probe, and with it every
 * /readyz sharing it (cachedProbe), for good. The status is the answer: the connection closes once
 * it is read, where reading the body to its end kept a connection per probe taking whatever an
 * endless 200 sent.
 */
export function probeUpstream(url: URL): Promise<ProbeAnswer> {
  return new Promise((resolve) => {
    const deadline = setTimeout(() => request.destroy(new Error(`no answer within ${READINESS_TIMEOUT_MS} ms`)), READINESS_TIMEOUT_MS);
    const request = http.get(url, { agent: false }, (response) => {
      clearTimeout(deadline);
      response.destroy();
      const status = response.statusCode ?? 0;
      resolve({ ready: status < 500, detail: `HTTP ${status}` });
    });
    request.on('error', (error: NodeJS.ErrnoException) => {
      clearTimeout(deadline);
      resolve({ ready: false, detail: error.code ?? error.message });
    });
  });
}
