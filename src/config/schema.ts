import { z } from 'zod';
import { parseDurationMs } from './duration.js';

/**
 * The configuration file's schema, validated once at start-up (STYLE.md habit 2): unknown keys are
 * errors, every problem is reported with its path, and the result is frozen. zod is used rather
 * than hand-written checks because it reports all problems at once, with paths, for free.
 */

const listenAddress = z.string().superRefine((value, ctx) => {
  if (parseListenAddress(value) === undefined) {
    ctx.addIssue({ code: 'custom', message: `expected HOST:PORT with a port from 0 to 65535, got "${value}"` });
  }
});

const upstreamUrl = z.string().superRefine((value, ctx) => {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    ctx.addIssue({ code: 'custom', message: `expected an http:// URL such as http://127.0.0.1:8000, got "${value}"` });
    return;
  }
  if (url.protocol !== 'http:') {
    ctx.addIssue({ code: 'custom', message: `only http:// upstreams are supported (the inference server is in the same pod), got "${url.protocol}"` });
  }
  if (url.search || url.hash) {
    ctx.addIssue({ code: 'custom', message: 'must not carry a query string or fragment' });
  }
});

const duration = z.string().superRefine((value, ctx) => {
  const ms = parseDurationMs(value);
  if (ms === undefined || ms <= 0) {
    ctx.addIssue({ code: 'custom', message: `expected a positive duration like "200ms", "30s" or "5m", got "${value}"` });
  }
});

const bucketList = z
  .array(z.number().positive().finite(), { error: 'expected a list of positive numbers (seconds or tokens)' })
  .min(1)
  .superRefine((values, ctx) => {
    for (let i = 1; i < values.length; i++) {
      if ((values[i] as number) <= (values[i - 1] as number)) {
        ctx.addIssue({ code: 'custom', path: [i], message: 'bucket boundaries must be strictly increasing' });
      }
    }
  });

/** Label-safe: it becomes the `workload` label and part of alert and dashboard names. */
const workloadName = z
  .string()
  .regex(/^[a-z][a-z0-9_-]{0,62}$/, { error: 'expected a name of lower-case letters, digits, "_" or "-", starting with a letter (it becomes a label value)' });

/**
 * How a request is assigned to a workload. All given conditions must hold; workloads are tried in
 * order, the first match wins, and a request that matches none belongs to the last workload.
 */
const workloadMatch = z.strictObject({
  /** Request headers that must be present with exactly these values; names are case-insensitive. */
  header: z.record(z.string().regex(/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/, { error: 'expected an HTTP header name' }), z.string()).optional(),
  /** Request path without the query: exact, or a prefix when it ends with "*" (`/v1/*`). */
  path: z.string().startsWith('/', { error: 'expected a path starting with "/"' }).optional(),
  /** The `model` the request body asks for, exactly. */
  model: z.string().min(1).optional(),
});

/** A workload's service-level objectives: the share of events that must be good, and what good means. */
const sloObjectives = z
  .strictObject({
    /** Target ratio of good events, e.g. 0.99. */
    objective: z.number().gt(0, { error: 'expected a ratio between 0 and 1, e.g. 0.99' }).lt(1, { error: 'expected a ratio between 0 and 1, e.g. 0.99 (1 leaves no error budget)' }),
    /** A request is good for TTFT when its first token came within this time. */
    ttft: duration.optional(),
    /** A token is good for ITL when its per-token gap is within this time. */
    itl: duration.optional(),
    /** A request is good for e2e when it finished within this time. */
    e2e: duration.optional(),
  })
  .superRefine((slo, ctx) => {
    if (slo.ttft === undefined && slo.itl === undefined && slo.e2e === undefined) {
      ctx.addIssue({ code: 'custom', message: 'expected at least one threshold: ttft, itl or e2e' });
    }
  });

const workload = z.strictObject({
  name: workloadName,
  match: workloadMatch.optional(),
  slo: sloObjectives.optional(),
});

const workloadList = z
  .array(workload)
  .min(1, { error: 'expected at least one workload' })
  .superRefine((list, ctx) => {
    const seen = new Set<string>();
    list.forEach((w, i) => {
      if (seen.has(w.name)) ctx.addIssue({ code: 'custom', path: [i, 'name'], message: `duplicate workload name "${w.name}"` });
      seen.add(w.name);
      if (w.match === undefined && i < list.length - 1) {
        ctx.addIssue({ code: 'custom', path: [i], message: `workload "${w.name}" has no match rules, so it takes every request and the workloads after it are never used; put it last` });
      }
    });
  });

export const configFileSchema = z.strictObject({
  upstream: upstreamUrl.optional(),
  listen: listenAddress.optional(),
  admin_listen: listenAddress.optional(),
  /** Seconds of silence from the upstream (before headers or between chunks) before the request is cut as `timeout`. */
  upstream_idle_timeout: duration.optional(),
  /** Path the readiness check requests from the upstream (vLLM, TGI, llama.cpp: /health). */
  upstream_health_path: z.string().startsWith('/', { error: 'expected a path starting with "/"' }).optional(),
  /** Workloads in match order; see workloadMatch. Without it every request is workload "default". */
  workloads: workloadList.optional(),
  log_level: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).optional(),
  metrics: z
    .strictObject({
      /** Distinct model label values before further models are folded into `other`. */
      max_models: z.number().int().min(1).max(1000).optional(),
      buckets: z
        .strictObject({
          ttfb: bucketList.optional(),
          ttft: bucketList.optional(),
          itl: bucketList.optional(),
          tpot: bucketList.optional(),
          e2e: bucketList.optional(),
          tokens: bucketList.optional(),
        })
        .optional(),
    })
    .optional(),
});

export type ConfigFile = z.infer<typeof configFileSchema>;
export type WorkloadConfig = z.infer<typeof workload>;

export interface ListenAddress {
  readonly host: string;
  readonly port: number;
}

/** "0.0.0.0:8080", "[::1]:8080", ":8080" (all interfaces). */
export function parseListenAddress(text: string): ListenAddress | undefined {
  const match = /^(?:\[([^\]]+)\]|([^:[\]]*)):(\d{1,5})$/.exec(text);
  if (!match) return undefined;
  const port = Number(match[3]);
  if (port > 65535) return undefined;
  const host = match[1] ?? match[2] ?? '';
  return { host: host === '' ? '0.0.0.0' : host, port };
}
