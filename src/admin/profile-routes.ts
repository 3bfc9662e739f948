import type { FastifyInstance, FastifyReply } from 'fastify';
import { parseDurationMs } from '../config/duration.js';
import type { LimitCounters } from '../metrics/limit-counters.js';
import { aiperfArguments, aiperfMixtureArguments } from '../profile/aiperf-export.js';
import { ExportRefused } from '../profile/export-format.js';
import { guidellmScenario } from '../profile/guidellm-export.js';
import { mooncakeJsonl, mooncakeRows } from '../profile/mooncake-export.js';
import { buildProfile } from '../profile/profile-builder.js';
import type { ProfileStore } from '../profile/profile-store.js';

export const PROFILE_FORMATS = ['json', 'guidellm', 'aiperf', 'mooncake'] as const;
export type ProfileFormat = (typeof PROFILE_FORMATS)[number];

/** Set on a Mooncake trace that left rows out to stay within MAX_TRACE_HASH_IDS: how many. */
export const OMITTED_ROWS_HEADER = 'tokentap-omitted-rows';

/** `window=` when absent. */
export const DEFAULT_PROFILE_WINDOW = '10m';
/** The longest `window=`: a day; the record holds less than that on any busy workload anyway. */
const MAX_WINDOW_MS = 24 * 3_600_000;

interface ProfileQuery {
  readonly format?: string;
  readonly window?: string;
}

/**
 * `GET /profile?format=json|aiperf&window=10m`: every recorded workload and the mix;
 * `GET /profile/<workload>?format=json|guidellm|aiperf|mooncake&window=10m`: one workload, as
 * its fitted profile or in a benchmark tool's format (docs/workload-profiles.md). Numbers only:
 * nothing here can carry prompt text, and the fingerprint's hashes leave as per-export ids.
 */
export function registerProfileRoutes(app: FastifyInstance, store: ProfileStore, counters: LimitCounters, budget = new ProfileWorkBudget()): void {
  app.get<{ Querystring: ProfileQuery }>('/profile', async (request, reply) => {
    const asked = parseQuery(request.query, reply, '/profile');
    if (asked === undefined) return reply;
    if (asked.format !== 'json' && asked.format !== 'aiperf') {
      return refuse(reply, 400, `format=${asked.format} exports one workload: ask /profile/<workload>?format=${asked.format} (workloads: ${store.workloads.join(', ')})`);
    }
    if (budget.waitMs() > 0) return busy(reply, budget, counters);
    return budget.run(() => {
      const set = store.profileSet(asked.windowMs);
      if (asked.format === 'json') return reply.header('cache-control', 'no-store').send(set);
      return exported(reply, 'text/plain; charset=utf-8', () => aiperfMixtureArguments(set, store.mergedArrivals(asked.windowMs)));
    });
  });

  app.get<{ Params: { workload: string }; Querystring: ProfileQuery }>('/profile/:workload', async (request, reply) => {
    const asked = parseQuery(request.query, reply, '/profile/<workload>');
    if (asked === undefined) return reply;
    if (budget.waitMs() > 0) return busy(reply, budget, counters);
    return budget.run(() => {
      const workload = request.params.workload;
      const held = store.shapes(workload, asked.windowMs);
      if (held === undefined) return refuse(reply, 404, `no workload-shape record for workload ${JSON.stringify(workload)}; recorded workloads: ${store.workloads.join(', ')} (a workload with profile: false keeps none)`);
      // The profile and the exports read the same requests over the same window.
      const profile = buildProfile(workload, held.shapes, held.window, store.blockTokens);
      switch (asked.format) {
        case 'json':
          return reply.header('cache-control', 'no-store').send(profile);
        case 'guidellm':
          return exported(reply, 'application/json; charset=utf-8', () => `${JSON.stringify(guidellmScenario(profile, held.shapes, store.blockTokens), null, 2)}\n`);
        case 'aiperf':
          return exported(reply, 'text/plain; charset=utf-8', () => aiperfArguments(profile));
        case 'mooncake':
          return exported(reply, 'application/x-ndjson', () => {
            const { rows, omitted } = mooncakeRows(held.shapes, store.blockTokens);
            if (rows.length === 0) throw new ExportRefused(`no request of workload ${JSON.stringify(workload)} in the window reported both its input and output tokens: an empty trace replays nothing`);
            // Said in a header, since a JSON Lines trace has no room for a note: tokentap profile prints it on stderr.
            if (omitted > 0) reply.header(OMITTED_ROWS_HEADER, String(omitted));
            return mooncakeJsonl(rows);
          });
      }
    });
  });
}

/**
 * The share of the process's time /profile may take. Fitting a profile and writing an export run on
 * the event loop that relays every stream: with a full record at the default caps (10,000 requests
 * of 16 blocks) one answer took 75 to 800 ms here (measured), and a client asking in a loop stalled
 * every relayed stream by that much, over and over (20 answers in 1.5 s of a 1.5 s loop).
 * The routes spend a credit of time, earned at a tenth of the time that passes and held up to
 * PROFILE_BURST_MS; while it is spent, they answer 429 with the wait. Small records cost a few ms
 * an answer, so people and the status page asking now and then are never held back.
 */
const PROFILE_TIME_SHARE = 0.1;
/** The most the routes may take at once, in ms: a few answers of a full record in a row. */
const PROFILE_BURST_MS = 500;

export class ProfileWorkBudget {
  private creditMs = PROFILE_BURST_MS;
  private readAtMs: number | undefined;
  private lastWorkMs = 0;
  private readonly nowMs: () => number;

  /** `nowMs`: a monotonic clock in milliseconds (tests pass their own). */
  constructor(nowMs: () => number = () => performance.now()) {
    this.nowMs = nowMs;
  }

  /** Milliseconds until the routes compute again; 0 when they may now. */
  waitMs(): number {
    this.earn();
    return this.creditMs > 0 ? 0 : -this.creditMs / PROFILE_TIME_SHARE;
  }

  /** How long the last answer took to compute, in milliseconds (said in the 429's message). */
  get lastMs(): number {
    return this.lastWorkMs;
  }

  /** Runs `work`, spending the time it takes. */
  run<T>(work: () => T): T {
    this.earn();
    const startMs = this.readAtMs as number;
    try {
      return work();
    } finally {
      this.earn();
      this.lastWorkMs = (this.readAtMs as number) - startMs;
      this.creditMs -= this.lastWorkMs;
    }
  }

  private earn(): void {
    const now = this.nowMs();
    if (this.readAtMs !== undefined) this.creditMs = Math.min(PROFILE_BURST_MS, this.creditMs + (now - this.readAtMs) * PROFILE_TIME_SHARE);
    this.readAtMs = now;
  }
}

/** The query parameters the routes take; any other is refused, so a misspelt `window` is not answered as the default one. */
const QUERY_PARAMETERS: ReadonlySet<string> = new Set(['format', 'window']);

function parseQuery(query: ProfileQuery, reply: FastifyReply, route: string): { format: ProfileFormat; windowMs: number } | undefined {
  const unknown = Object.keys(query).find((name) => !QUERY_PARAMETERS.has(name));
  if (unknown !== undefined) {
    refuse(reply, 400, `unknown query parameter ${JSON.stringify(unknown)}: ${route} takes format and window (docs/workload-profiles.md)`);
    return undefined;
  }
  const format = query.format ?? 'json';
  if (!(PROFILE_FORMATS as readonly string[]).includes(format)) {
    refuse(reply, 400, `format=${JSON.stringify(format)}: expected one of ${PROFILE_FORMATS.join(', ')}`);
    return undefined;
  }
  const windowText = query.window ?? DEFAULT_PROFILE_WINDOW;
  const windowMs = typeof windowText === 'string' ? parseDurationMs(windowText) : undefined;
  if (windowMs === undefined || !(windowMs > 0) || windowMs > MAX_WINDOW_MS) {
    refuse(reply, 400, `window=${JSON.stringify(windowText)}: expected a duration above 0 and at most 24h, such as 10m, 90s or 2h`);
    return undefined;
  }
  return { format: format as ProfileFormat, windowMs };
}

function exported(reply: FastifyReply, contentType: string, render: () => string): FastifyReply {
  let body: string;
  try {
    body = render();
  } catch (error) {
    if (error instanceof ExportRefused) return refuse(reply, 404, error.message);
    throw error;
  }
  return reply.header('content-type', contentType).header('cache-control', 'no-store').send(body);
}

/** A 429 for the time share: counted as `tokentap_limit_exceeded_total{limit="profile_time_share"}`. */
function busy(reply: FastifyReply, budget: ProfileWorkBudget, counters: LimitCounters): FastifyReply {
  counters.tripped('profile_time_share');
  const seconds = Math.ceil(budget.waitMs() / 1000);
  return refuse(
    reply.header('retry-after', String(seconds)),
    429,
    `the last /profile answer took ${Math.round(budget.lastMs)} ms of the process's time, which it shares with the relay; ask again in ${seconds} s (at most ${PROFILE_TIME_SHARE * 100} % of its time goes to /profile)`,
  );
}

function refuse(reply: FastifyReply, status: number, message: string): FastifyReply {
  return reply.code(status).header('cache-control', 'no-store').send({ error: message });
}
