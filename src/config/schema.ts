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

export const configFileSchema = z.strictObject({
  upstream: upstreamUrl.optional(),
  listen: listenAddress.optional(),
  admin_listen: listenAddress.optional(),
  /** Seconds of silence from the upstream (before headers or between chunks) before the request is cut as `timeout`. */
  upstream_idle_timeout: duration.optional(),
  /** Path the readiness check requests from the upstream (vLLM, TGI, llama.cpp: /health). */
  upstream_health_path: z.string().startsWith('/', { error: 'expected a path starting with "/"' }).optional(),
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
