import type { FastifyInstance, FastifyReply } from 'fastify';
import { parseDurationMs } from '../config/duration.js';
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
export function registerProfileRoutes(app: FastifyInstance, store: ProfileStore): void {
  app.get<{ Querystring: ProfileQuery }>('/profile', async (request, reply) => {
    const asked = parseQuery(request.query, reply);
    if (asked === undefined) return reply;
    if (asked.format !== 'json' && asked.format !== 'aiperf') {
      return refuse(reply, 400, `format=${asked.format} exports one workload: ask /profile/<workload>?format=${asked.format} (workloads: ${store.workloads.join(', ')})`);
    }
    const set = store.profileSet(asked.windowMs);
    if (asked.format === 'json') return reply.header('cache-control', 'no-store').send(set);
    return exported(reply, 'text/plain; charset=utf-8', () => aiperfMixtureArguments(set, store.mergedArrivals(asked.windowMs)));
  });

  app.get<{ Params: { workload: string }; Querystring: ProfileQuery }>('/profile/:workload', async (request, reply) => {
    const asked = parseQuery(request.query, reply);
    if (asked === undefined) return reply;
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
}

function parseQuery(query: ProfileQuery, reply: FastifyReply): { format: ProfileFormat; windowMs: number } | undefined {
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

function refuse(reply: FastifyReply, status: number, message: string): FastifyReply {
  return reply.code(status).header('cache-control', 'no-store').send({ error: message });
}
