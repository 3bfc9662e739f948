import { readFileSync } from 'node:fs';
import { LineCounter, parseDocument, type Document } from 'yaml';
import type { z } from 'zod';
import { TokentapError } from '../errors.js';
import { METRICS, type HistogramKey } from '../metrics/definitions.js';
import { parseDurationMs } from './duration.js';
import { configFileSchema, parseListenAddress, type ConfigFile, type ListenAddress, type WorkloadConfig } from './schema.js';

/** The kinds of SLO a workload can have; also the `slo` label of `tokentap_slo_events_total`. */
export const SLO_KINDS = ['ttft', 'itl', 'e2e'] as const;
export type SloKind = (typeof SLO_KINDS)[number];

/** A workload as the program uses it: match rules normalised, thresholds in seconds. */
export interface Workload {
  readonly name: string;
  /** Undefined for a catch-all. Header names are lower-case. */
  readonly match:
    | {
        readonly headers: readonly (readonly [name: string, value: string])[];
        readonly path: string | undefined;
        readonly model: string | undefined;
      }
    | undefined;
  /** Undefined when the workload has no SLO. Thresholds in seconds, only those configured. */
  readonly slo:
    | {
        readonly objective: number;
        readonly thresholdsS: Readonly<Partial<Record<SloKind, number>>>;
      }
    | undefined;
}

/** Validated, frozen settings: the rest of the program never re-checks them. */
export interface Settings {
  readonly upstream: URL;
  readonly listen: ListenAddress;
  readonly adminListen: ListenAddress;
  readonly upstreamIdleTimeoutMs: number;
  readonly upstreamHealthPath: string;
  readonly logLevel: NonNullable<ConfigFile['log_level']>;
  readonly maxModels: number;
  readonly buckets: Readonly<Record<HistogramKey, readonly number[]>>;
  /** In match order; the last one takes every request that matches none. At least one. */
  readonly workloads: readonly Workload[];
  /** The file the settings were read from, if any. */
  readonly configFile: string | undefined;
}

/** The settings that can also come from flags and the environment (flags win over environment over file). */
export interface SettingOverrides {
  readonly upstream?: string | undefined;
  readonly listen?: string | undefined;
  readonly adminListen?: string | undefined;
  readonly config?: string | undefined;
}

export const ENV = {
  upstream: 'TOKENTAP_UPSTREAM',
  listen: 'TOKENTAP_LISTEN',
  adminListen: 'TOKENTAP_ADMIN_LISTEN',
  config: 'TOKENTAP_CONFIG',
} as const;

const FLAG = {
  upstream: '--upstream',
  listen: '--listen',
  adminListen: '--admin-listen',
} as const;

const FILE_KEY = { upstream: 'upstream', listen: 'listen', adminListen: 'admin_listen' } as const;

export const DEFAULTS = {
  upstream: 'http://127.0.0.1:8000',
  listen: '0.0.0.0:8080',
  adminListen: '0.0.0.0:9464',
  upstreamIdleTimeout: '5m',
  upstreamHealthPath: '/health',
  logLevel: 'info',
  maxModels: 32,
  workload: 'default',
} as const;

/** Which configured bucket list feeds which histogram. */
const BUCKET_KEYS: Record<HistogramKey, keyof NonNullable<NonNullable<ConfigFile['metrics']>['buckets']>> = {
  ttfb: 'ttfb',
  ttft: 'ttft',
  itlToken: 'itl',
  itlChunk: 'itl',
  tpot: 'tpot',
  e2e: 'e2e',
  tokenUsage: 'tokens',
};

export interface LoadOptions {
  readonly flags: SettingOverrides;
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly readFile?: (path: string) => string;
}

/**
 * Resolves settings from flags, environment and the YAML file, validates all of them at once and
 * throws a TokentapError listing every problem with where it is: `FILE:LINE: path: message` for the
 * file, the flag or variable name otherwise.
 */
export function loadSettings({ flags, env, readFile = (p) => readFileSync(p, 'utf8') }: LoadOptions): Settings {
  const configFile = flags.config ?? nonEmpty(env[ENV.config]);
  const file = configFile === undefined ? { data: {}, locate: () => '' } : readConfigFile(configFile, readFile);

  const merged: Record<string, unknown> = { ...(file.data as Record<string, unknown>) };
  const origin: Record<string, string> = {};
  for (const key of ['upstream', 'listen', 'adminListen'] as const) {
    const fromEnv = nonEmpty(env[ENV[key]]);
    const fromFlag = flags[key];
    if (fromFlag !== undefined) {
      merged[FILE_KEY[key]] = fromFlag;
      origin[FILE_KEY[key]] = FLAG[key];
    } else if (fromEnv !== undefined) {
      merged[FILE_KEY[key]] = fromEnv;
      origin[FILE_KEY[key]] = ENV[key];
    }
  }

  const parsed = configFileSchema.safeParse(merged);
  if (!parsed.success) {
    const problems = parsed.error.issues.flatMap((issue) => describeIssue(issue, origin, configFile, file.locate));
    throw new TokentapError('TOKENTAP_ERR_CONFIG_INVALID', problems);
  }
  return freezeSettings(parsed.data, configFile);
}

function freezeSettings(config: ConfigFile, configFile: string | undefined): Settings {
  const buckets = {} as Record<HistogramKey, readonly number[]>;
  for (const key of Object.keys(BUCKET_KEYS) as HistogramKey[]) {
    const configured = config.metrics?.buckets?.[BUCKET_KEYS[key]];
    buckets[key] = Object.freeze([...(configured ?? METRICS[key].defaultBuckets)]);
  }
  return Object.freeze({
    upstream: new URL(config.upstream ?? DEFAULTS.upstream),
    listen: parseListenAddress(config.listen ?? DEFAULTS.listen) as ListenAddress,
    adminListen: parseListenAddress(config.admin_listen ?? DEFAULTS.adminListen) as ListenAddress,
    upstreamIdleTimeoutMs: parseDurationMs(config.upstream_idle_timeout ?? DEFAULTS.upstreamIdleTimeout) as number,
    upstreamHealthPath: config.upstream_health_path ?? DEFAULTS.upstreamHealthPath,
    logLevel: config.log_level ?? DEFAULTS.logLevel,
    maxModels: config.metrics?.max_models ?? DEFAULTS.maxModels,
    buckets: Object.freeze(buckets),
    workloads: Object.freeze((config.workloads ?? [{ name: DEFAULTS.workload }]).map(freezeWorkload)),
    configFile,
  });
}

function freezeWorkload(config: WorkloadConfig): Workload {
  const match = config.match;
  const slo = config.slo;
  const thresholdsS: Partial<Record<SloKind, number>> = {};
  if (slo !== undefined) {
    for (const kind of SLO_KINDS) {
      const text = slo[kind];
      if (text !== undefined) thresholdsS[kind] = (parseDurationMs(text) as number) / 1000;
    }
  }
  return Object.freeze({
    name: config.name,
    match:
      match === undefined
        ? undefined
        : Object.freeze({
            headers: Object.freeze(Object.entries(match.header ?? {}).map(([name, value]) => Object.freeze([name.toLowerCase(), value] as const))),
            path: match.path,
            model: match.model,
          }),
    slo: slo === undefined ? undefined : Object.freeze({ objective: slo.objective, thresholdsS: Object.freeze(thresholdsS) }),
  });
}

interface ParsedFile {
  readonly data: unknown;
  /** "FILE:LINE: " for a path in the file, or "FILE: " when the path has no node. */
  readonly locate: (path: readonly PropertyKey[]) => string;
}

function readConfigFile(path: string, readFile: (path: string) => string): ParsedFile {
  let text: string;
  try {
    text = readFile(path);
  } catch (error) {
    throw new TokentapError('TOKENTAP_ERR_CONFIG_UNREADABLE', [`${path}: ${(error as Error).message}`]);
  }
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { lineCounter, prettyErrors: false, uniqueKeys: true });
  if (doc.errors.length > 0) {
    throw new TokentapError(
      'TOKENTAP_ERR_CONFIG_INVALID',
      doc.errors.map((e) => `${path}:${e.linePos?.[0].line ?? 1}: YAML: ${e.message.split('\n')[0]}`),
    );
  }
  const data = doc.toJS() ?? {};
  if (typeof data !== 'object' || Array.isArray(data)) {
    throw new TokentapError('TOKENTAP_ERR_CONFIG_INVALID', [`${path}:1: expected a mapping of settings at the top level`]);
  }
  return { data, locate: (p) => `${path}:${lineOf(doc, lineCounter, p)}: ` };
}

function lineOf(doc: Document, lineCounter: LineCounter, path: readonly PropertyKey[]): number {
  // Walk up until a node exists (an unknown or missing key has no node of its own).
  for (let depth = path.length; depth >= 0; depth--) {
    const node = doc.getIn(path.slice(0, depth) as unknown[], true) as { range?: [number, number, number] } | undefined;
    if (node?.range) return lineCounter.linePos(node.range[0]).line;
  }
  return 1;
}

function describeIssue(
  issue: z.core.$ZodIssue,
  origin: Record<string, string>,
  configFile: string | undefined,
  locate: ParsedFile['locate'],
): string[] {
  const paths = issue.code === 'unrecognized_keys' ? issue.keys.map((key) => [...issue.path, key]) : [issue.path];
  return paths.map((path) => {
    const top = String(path[0] ?? '');
    const message = issue.code === 'unrecognized_keys' ? 'unknown setting' : issue.message;
    const fromOverride = origin[top];
    if (fromOverride !== undefined) return `${fromOverride}: ${message}`;
    const where = configFile === undefined ? '' : locate(path);
    return `${where}${formatPath(path)}: ${message}`;
  });
}

/** `metrics.buckets.ttft[2]` */
function formatPath(path: readonly PropertyKey[]): string {
  return path
    .map((part, i) => (typeof part === 'number' ? `[${part}]` : `${i === 0 ? '' : '.'}${String(part)}`))
    .join('');
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value === '' ? undefined : value;
}
