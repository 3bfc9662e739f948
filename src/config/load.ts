import { readFileSync } from 'node:fs';
import { LineCounter, parseDocument, type Document } from 'yaml';
import type { z } from 'zod';
import { TokentapError } from '../errors.js';
import { METRICS, type HistogramKey } from '../metrics/definitions.js';
import { NATIVE_DEFAULTS, schemaForFactor, type NativeHistogramSettings } from '../metrics/native-buckets.js';
import type { HistogramExposition } from '../metrics/protobuf-exposition.js';
import { podIdentityFromEnv, type PodIdentity } from '../dcgm/pod-identity.js';
import type { ModelDiscoverySettings } from '../discovery/model-discovery.js';
import { commitOf } from '../version.js';
import { defaultMaxConnections, LIMIT_DEFAULTS, type RelayLimits } from '../proxy/relay-limits.js';
import type { Route } from '../taps/route-table.js';
import type { ProfileSettings } from '../profile/profile-store.js';
import { parseDurationMs, parseDurationSeconds } from './duration.js';
import { nearestKnownKey } from './key-suggestion.js';
import { configFileSchema, parseListenAddress, type ConfigFile, type ListenAddress, type WorkloadConfig } from './schema.js';

/** The kinds of SLO a workload can have; also the `slo` label of `tokentap_slo_events_total`. */
export const SLO_KINDS = ['ttft', 'itl', 'e2e'] as const;
export type SloKind = (typeof SLO_KINDS)[number];

/** `first_token`: the first token of any kind, reasoning included; `first_answer`: the first non-reasoning token. */
export type TtftOn = 'first_token' | 'first_answer';

export interface MatchConditions {
  readonly headers: readonly (readonly [name: string, value: string])[];
  readonly path: string | undefined;
  readonly model: string | undefined;
}

/** A workload as the program uses it: match rules normalised, thresholds in seconds. */
export interface Workload {
  readonly name: string;
  /**
   * Alternatives, any one of which assigns a request here (a config `match` mapping is a list of
   * one); within one, all conditions must hold. Undefined for a catch-all. Header names lower-case.
   */
  readonly match: readonly MatchConditions[] | undefined;
  /** Undefined when the workload has no SLO. Thresholds in seconds, only those configured. */
  readonly slo:
    | {
        readonly objective: number;
        readonly thresholdsS: Readonly<Partial<Record<SloKind, number>>>;
        /** `ttft_on`: which token the TTFT threshold is measured to (default first_token). */
        readonly ttftOn: TtftOn;
        /** `itl_percentile`: for goodput, the share of a request's ITL tokens that must be within `itl` (default 0.99). */
        readonly itlPercentile: number;
      }
    | undefined;
}

/** Validated, frozen settings: the rest of the program never re-checks them. */
export interface Settings {
  readonly upstream: URL;
  readonly listen: ListenAddress;
  readonly adminListen: ListenAddress;
  /** `admin_allowed_hosts`: Host names the admin listener answers besides the private ones (src/admin/admin-host.ts). */
  readonly adminAllowedHosts: readonly string[];
  readonly upstreamIdleTimeoutMs: number;
  /** `upstream_retry_body_limit`: request bytes held for one retry on a fresh upstream connection. */
  readonly upstreamRetryBodyLimitBytes: number;
  /** `upstream_protocol`: whether HTTP/2 clients' streams go upstream over h2c (`h2c`) or as HTTP/1.1 requests (`http1`). */
  readonly upstreamProtocol: 'http1' | 'h2c';
  readonly upstreamHealthPath: string;
  /** After SIGTERM, how long in-flight requests may run before they are cut (lifecycle/drain-proxy.ts). */
  readonly drainTimeoutMs: number;
  /** `final_scrape_wait`: after the drain, the longest wait for a scrape of the final counts (lifecycle/final-scrape.ts); 0: none. */
  readonly finalScrapeWaitMs: number;
  readonly logLevel: NonNullable<ConfigFile['log_level']>;
  readonly maxModels: number;
  readonly buckets: Readonly<Record<HistogramKey, readonly number[]>>;
  /** What the protobuf exposition carries of each histogram (`metrics.histograms`). */
  readonly histograms: HistogramExposition;
  /** Native histogram resolution and limit (`metrics.native`). */
  readonly native: NativeHistogramSettings;
  /** How histograms are pushed over OTLP (`metrics.otlp_histograms`). */
  readonly otlpHistograms: 'explicit' | 'exponential';
  /** In match order; the last one takes every request that matches none. At least one. */
  readonly workloads: readonly Workload[];
  /** The node-local DCGM exporter to read this pod's GPU gauges from; undefined when not configured. */
  readonly dcgm: DcgmSettings | undefined;
  /** The price of the pod's accelerators (`cost:`, docs/capacity-and-cost.md); undefined when not configured. */
  readonly cost: CostSettings | undefined;
  /** Configured path-to-protocol routes, tried before the built-in ones (src/taps/route-table.ts). */
  readonly routes: readonly Route[];
  /** Add `stream_options.include_usage` to OpenAI streaming requests (src/proxy/usage-injection.ts). */
  readonly injectUsage: boolean;
  /** False (TOKENTAP_OBSERVE=off) proxies without observing anything: the benchmark's measure of what monitoring costs. */
  readonly observe: boolean;
  /** How `tokentap render` writes the alerting rules. */
  readonly alerts: AlertSettings;
  /** What the relay may hold per client and in total (`limits:`, src/proxy/relay-limits.ts). */
  readonly limits: RelayLimits;
  /** Capacity at SLO and pods needed (`capacity:`, docs/capacity-and-cost.md). */
  readonly capacity: CapacitySettings;
  /** The file the settings were read from, if any. */
  readonly configFile: string | undefined;
  /** Asking the upstream for its model names (src/discovery/); undefined when `model_discovery.enabled` is false. */
  readonly modelDiscovery: ModelDiscoverySettings | undefined;
  /** The git commit (TOKENTAP_COMMIT, else the git checkout's, else "unknown"): the `commit` label of tokentap_build_info. */
  readonly commit: string;
  /** The workload-shape record (`profiles:`, src/profile/); undefined when `profiles.enabled` is false or every workload says `profile: false`. */
  readonly profiles: ProfileSettings | undefined;
}

export interface AlertSettings {
  /** The Grafana every alert's dashboard link points into; undefined when not configured (render refuses then). */
  readonly grafanaUrl: string | undefined;
  /** Each alert's runbook is `<runbookBaseUrl>/<runbook file>`; undefined when not configured (render refuses then). */
  readonly runbookBaseUrl: string | undefined;
  /** The `severity` label value of each alert level. */
  readonly severityNames: Readonly<Record<AlertLevel, string>>;
  /** Static labels added to every alert. */
  readonly extraLabels: Readonly<Record<string, string>>;
  readonly p99TtftForMs: number;
  readonly p99TtftLevel: AlertLevel | 'off';
  /** TokentapTTFTP99OverBudget needs at least this many requests in its 5-minute window. */
  readonly p99TtftMinRequests: number;
  /** Traffic guard: alerts need at least this many requests per hour over their long window. */
  readonly minRequestsPerHour: number;
  /**
   * ITL guard: the ITL burn-rate alerts need at least this many requests with a token over the
   * threshold in their long window, since one long slow stream can hold most of a quiet hour's ITL
   * events. 0 turns it off.
   */
  readonly itlMinSlowRequests: number;
  /** How long a sidecar target must be down, or a namespace's sidecar metrics absent, before its alert fires. */
  readonly absentForMs: number;
  /** PromQL label matchers selecting the sidecars' scrape targets in `up` (TokentapTargetDown). */
  readonly scrapeSelector: string;
  /** Namespaces whose sidecar metrics must be present (TokentapMetricsAbsent); empty: anywhere at all. */
  readonly expectedNamespaces: readonly string[];
}

export interface CapacitySettings {
  /** Requests with a first token an in-flight band needs before its verdict counts. */
  readonly minSamplesPerBand: number;
  /** The window the fleet's capacity rules read the in-flight bands over. */
  readonly windowMs: number;
  /** The window of the observed peak (in flight, requests per second). */
  readonly peakWindowMs: number;
  /** The operator's planned fleet peak, requests per second; undefined when not stated. */
  readonly plannedPeakRps: number | undefined;
  /** The headroom share under which TokentapCapacityHeadroomLow opens a ticket. */
  readonly headroomTicketRatio: number;
}

/** Alert levels: a page wakes someone up, a ticket waits for working hours. */
export type AlertLevel = 'page' | 'ticket';

export interface CostSettings {
  /** Price of one accelerator for one hour, in `currency`. */
  readonly pricePerHour: number;
  /** Accelerators of the pod, or `dcgm`: as many as the DCGM exporter reports for this pod (src/dcgm/). */
  readonly accelerators: number | 'dcgm';
  /** ISO 4217 code, the `currency` label of tokentap_accelerator_price_per_hour. */
  readonly currency: string;
}

export interface DcgmSettings {
  readonly url: URL;
  readonly intervalMs: number;
  readonly timeoutMs: number;
  /** This pod and its GPUs, from POD_NAME, POD_NAMESPACE and NVIDIA_VISIBLE_DEVICES. */
  readonly identity: PodIdentity;
}

/** The settings that can also come from flags and the environment (flags win over environment over file). */
export interface SettingOverrides {
  readonly upstream?: string | undefined;
  readonly listen?: string | undefined;
  readonly adminListen?: string | undefined;
  readonly drainTimeout?: string | undefined;
  readonly finalScrapeWait?: string | undefined;
  readonly config?: string | undefined;
}

export const ENV = {
  upstream: 'TOKENTAP_UPSTREAM',
  listen: 'TOKENTAP_LISTEN',
  adminListen: 'TOKENTAP_ADMIN_LISTEN',
  drainTimeout: 'TOKENTAP_DRAIN_TIMEOUT',
  finalScrapeWait: 'TOKENTAP_FINAL_SCRAPE_WAIT',
  config: 'TOKENTAP_CONFIG',
  observe: 'TOKENTAP_OBSERVE',
  modelDiscovery: 'TOKENTAP_MODEL_DISCOVERY',
  dcgmUrl: 'TOKENTAP_DCGM_URL',
} as const;

const FLAG = {
  upstream: '--upstream',
  listen: '--listen',
  adminListen: '--admin-listen',
  drainTimeout: '--drain-timeout',
  finalScrapeWait: '--final-scrape-wait',
} as const;

const FILE_KEY = { upstream: 'upstream', listen: 'listen', adminListen: 'admin_listen', drainTimeout: 'drain_timeout', finalScrapeWait: 'final_scrape_wait' } as const;

export const DEFAULTS = {
  upstream: 'http://127.0.0.1:8000',
  ttftOn: 'first_token' as TtftOn,
  /** A request of fewer than 100 ITL tokens then counts as goodput only when every one was within `itl`. */
  itlPercentile: 0.99,
  listen: '0.0.0.0:8080',
  adminListen: '0.0.0.0:9464',
  upstreamIdleTimeout: '5m',
  upstreamRetryBodyLimit: 64 * 1024,
  upstreamHealthPath: '/health',
  /** With the 10 s flush allowance (cli/serve.ts), fits Kubernetes' default terminationGracePeriodSeconds of 30. */
  drainTimeout: '20s',
  logLevel: 'info',
  maxModels: 32,
  workload: 'default',
  dcgmInterval: '15s',
  dcgmTimeout: '5s',
  /** One accelerator unless `cost.accelerators` says otherwise. */
  accelerators: 1,
  currency: 'USD',
  severityNames: { page: 'critical', ticket: 'warning' },
  p99TtftFor: '15m',
  /** A ticket: the burn-rate page is the page; a P99 over budget alone is a 1 % tail, worth a look in working hours. */
  p99TtftLevel: 'ticket',
  /** histogram_quantile's P99 of fewer than 100 samples is the slowest of them: one slow request. */
  p99TtftMinRequests: 100,
  absentFor: '10m',
  /**
   * The sidecar's target as deploy/kubernetes' PodMonitor `tokentap` makes it (prometheus-operator sets
   * `job="<namespace>/<PodMonitor name>"` and `endpoint="<port name>"`: `metrics`, not the engine's
   * `8000` endpoint of the same PodMonitor), or as a plain `job_name: tokentap` scrape (no endpoint label).
   */
  scrapeSelector: 'job=~"(.+/)?tokentap", endpoint=~"metrics|"',
  /** One request a minute: below that, a single slow request is already 1-2 % of the hour's traffic. */
  minRequestsPerHour: 60,
  itlMinSlowRequests: 3,
  modelDiscoveryPaths: ['/v1/models', '/api/tags', '/info'],
  profileMaxRequestsPerWorkload: 10_000,
  profileBlockTokens: 512,
  modelDiscoveryInterval: '5m',
  /** Before the first answer: vLLM loads a 7B model in one to three minutes, so this finds it soon after. */
  modelDiscoveryRetry: '15s',
  modelDiscoveryTimeout: '2s',
  /** Ollama's default keep_alive, the one idle-time unload among the engines (docs/model-discovery.md#lora-adapters). */
  adapterIdleAfter: '5m',
  /**
   * A band's verdict at a 0.99 objective needs 100 samples: with fewer, one slow request is more than
   * 1 % of them and breaks it alone (the same reasoning as p99TtftMinRequests).
   */
  capacityMinSamplesPerBand: 100,
  /**
   * A week: a knee found on one busy day stays known while later days are compared with it (a window
   * as short as the peak's would only know a knee on the days the pods were already past it).
   */
  capacityWindow: '168h',
  /** One daily cycle: the day's peak hours are always inside it. */
  capacityPeakWindow: '24h',
  /** A ticket while a fifth of capacity is left: time to add pods in working hours, before the peak grows past it. */
  capacityHeadroomTicketRatio: 0.2,
} as const;

/** Which configured bucket list feeds which histogram; undefined: its default buckets only. */
const BUCKET_KEYS: Record<HistogramKey, keyof NonNullable<NonNullable<ConfigFile['metrics']>['buckets']> | undefined> = {
  ttfb: 'ttfb',
  ttft: 'ttft',
  ttftAnswer: 'ttft',
  engineTtft: 'ttft',
  outsideEngineTtft: 'ttft',
  queueOrOutsideEngineTtft: 'ttft',
  engineQueue: 'ttft',
  enginePrefill: 'ttft',
  itlToken: 'itl',
  itlChunk: 'itl',
  ttftByConcurrency: 'ttft',
  adapterColdStartTtft: 'ttft',
  itlByConcurrency: 'itl',
  tpot: 'tpot',
  e2e: 'e2e',
  tokenUsage: 'tokens',
  requestAcceleratorSeconds: undefined,
  cachedInputRatio: undefined,
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
  for (const key of ['upstream', 'listen', 'adminListen', 'drainTimeout', 'finalScrapeWait'] as const) {
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

  // The node-local DCGM exporter's address differs per node, so the pod spec supplies it:
  // TOKENTAP_DCGM_URL=http://$(NODE_IP):9400/metrics, with NODE_IP from the downward API.
  const dcgmUrl = nonEmpty(env[ENV.dcgmUrl]);
  if (dcgmUrl !== undefined) {
    const fromFile = merged.dcgm;
    merged.dcgm = { ...(typeof fromFile === 'object' && fromFile !== null ? fromFile : {}), url: dcgmUrl };
    origin['dcgm.url'] = ENV.dcgmUrl;
  }

  const parsed = configFileSchema.safeParse(merged);
  if (!parsed.success) {
    const problems = parsed.error.issues.flatMap((issue) => describeIssue(issue, origin, configFile, file.locate));
    throw new TokentapError('TOKENTAP_ERR_CONFIG_INVALID', problems);
  }
  return freezeSettings(parsed.data, configFile, env);
}

/**
 * Which histograms each SLO's threshold becomes a boundary of, so that `bucket{le="<threshold>"}`
 * counts exactly the good events (DESIGN.md section 3).
 */
const THRESHOLD_BUCKETS: Record<SloKind, readonly HistogramKey[]> = {
  ttft: ['ttft', 'ttftAnswer', 'ttftByConcurrency', 'adapterColdStartTtft'],
  itl: ['itlToken', 'itlChunk', 'itlByConcurrency'],
  e2e: ['e2e'],
};

function freezeSettings(config: ConfigFile, configFile: string | undefined, env: LoadOptions['env']): Settings {
  const workloads = Object.freeze((config.workloads ?? [{ name: DEFAULTS.workload }]).map(freezeWorkload));
  const buckets = {} as Record<HistogramKey, readonly number[]>;
  for (const key of Object.keys(BUCKET_KEYS) as HistogramKey[]) {
    const list = BUCKET_KEYS[key];
    const configured = list === undefined ? undefined : config.metrics?.buckets?.[list];
    buckets[key] = [...(configured ?? METRICS[key].defaultBuckets)];
  }
  for (const workload of workloads) {
    for (const kind of SLO_KINDS) {
      const thresholdS = workload.slo?.thresholdsS[kind];
      if (thresholdS === undefined) continue;
      for (const key of THRESHOLD_BUCKETS[kind]) buckets[key] = withBoundary(buckets[key], thresholdS);
    }
  }
  for (const key of Object.keys(buckets) as HistogramKey[]) Object.freeze(buckets[key]);
  return Object.freeze({
    upstream: new URL(config.upstream ?? DEFAULTS.upstream),
    listen: parseListenAddress(config.listen ?? DEFAULTS.listen) as ListenAddress,
    adminListen: parseListenAddress(config.admin_listen ?? DEFAULTS.adminListen) as ListenAddress,
    adminAllowedHosts: Object.freeze([...(config.admin_allowed_hosts ?? [])]),
    upstreamIdleTimeoutMs: parseDurationMs(config.upstream_idle_timeout ?? DEFAULTS.upstreamIdleTimeout) as number,
    upstreamRetryBodyLimitBytes: config.upstream_retry_body_limit ?? DEFAULTS.upstreamRetryBodyLimit,
    upstreamProtocol: config.upstream_protocol ?? 'http1',
    upstreamHealthPath: config.upstream_health_path ?? DEFAULTS.upstreamHealthPath,
    drainTimeoutMs: parseDurationMs(config.drain_timeout ?? DEFAULTS.drainTimeout) as number,
    finalScrapeWaitMs: config.final_scrape_wait === undefined ? 0 : (parseDurationMs(config.final_scrape_wait) as number),
    logLevel: config.log_level ?? DEFAULTS.logLevel,
    maxModels: config.metrics?.max_models ?? DEFAULTS.maxModels,
    buckets: Object.freeze(buckets),
    histograms: config.metrics?.histograms ?? 'both',
    native: freezeNative(config.metrics?.native),
    otlpHistograms: config.metrics?.otlp_histograms ?? (config.metrics?.histograms === 'classic' ? 'explicit' : 'exponential'),
    workloads,
    dcgm: freezeDcgm(config.dcgm, env),
    cost: freezeCost(config.cost),
    routes: Object.freeze((config.routes ?? []).map((r) => Object.freeze({ path: r.path, protocol: r.protocol, method: r.method?.toUpperCase() }))),
    injectUsage: config.inject_usage ?? false,
    observe: observeFromEnv(env),
    alerts: freezeAlerts(config.alerts),
    limits: freezeLimits(config.limits),
    capacity: freezeCapacity(config.capacity),
    configFile,
    modelDiscovery: freezeModelDiscovery(config.model_discovery, env),
    commit: commitOf(env),
    profiles: freezeProfiles(config.profiles, config.workloads, workloads),
  });
}

function freezeProfiles(config: ConfigFile['profiles'], workloadConfigs: ConfigFile['workloads'], workloads: readonly Workload[]): ProfileSettings | undefined {
  if (config?.enabled === false) return undefined;
  const off = new Set((workloadConfigs ?? []).filter((w) => w.profile === false).map((w) => w.name));
  const names = workloads.map((w) => w.name).filter((name) => !off.has(name));
  if (names.length === 0) return undefined;
  return Object.freeze({
    maxRequestsPerWorkload: config?.max_requests_per_workload ?? DEFAULTS.profileMaxRequestsPerWorkload,
    blockTokens: config?.block_tokens ?? DEFAULTS.profileBlockTokens,
    workloads: Object.freeze(names),
  });
}

function freezeNative(native: NonNullable<ConfigFile['metrics']>['native']): NativeHistogramSettings {
  const schema = native?.schema ?? (native?.bucket_factor === undefined ? NATIVE_DEFAULTS.schema : schemaForFactor(native.bucket_factor));
  const zeroThreshold = native?.zero_threshold ?? NATIVE_DEFAULTS.zeroThreshold;
  return Object.freeze({
    schema,
    maxBuckets: native?.max_buckets ?? NATIVE_DEFAULTS.maxBuckets,
    zeroThreshold,
    maxZeroThreshold: native?.max_zero_threshold ?? zeroThreshold,
  });
}

/** The capacity settings of a configuration without a `capacity:` section. */
export function defaultCapacitySettings(): CapacitySettings {
  return freezeCapacity(undefined);
}

function freezeCapacity(config: ConfigFile['capacity']): CapacitySettings {
  return Object.freeze({
    minSamplesPerBand: config?.min_samples_per_band ?? DEFAULTS.capacityMinSamplesPerBand,
    windowMs: parseDurationMs(config?.window ?? DEFAULTS.capacityWindow) as number,
    peakWindowMs: parseDurationMs(config?.peak_window ?? DEFAULTS.capacityPeakWindow) as number,
    plannedPeakRps: config?.planned_peak_rps,
    headroomTicketRatio: config?.headroom_ticket_ratio ?? DEFAULTS.capacityHeadroomTicketRatio,
  });
}

/** TOKENTAP_OBSERVE: `on` (the default, also when unset or empty) or `off`. */
function observeFromEnv(env: LoadOptions['env']): boolean {
  const value = nonEmpty(env[ENV.observe]);
  if (value === undefined || value === 'on') return true;
  if (value === 'off') return false;
  throw new TokentapError('TOKENTAP_ERR_CONFIG_INVALID', [`${ENV.observe}: expected on or off, got ${JSON.stringify(value)}`]);
}

/** `boundaries` (strictly increasing) with `value` inserted in order, unless it is already there. */
export function withBoundary(boundaries: readonly number[], value: number): number[] {
  const at = boundaries.findIndex((b) => b >= value);
  if (boundaries[at] === value) return [...boundaries];
  const out = [...boundaries];
  out.splice(at === -1 ? out.length : at, 0, value);
  return out;
}

/** A link base as the URL parser writes it (a space in the path percent-encoded, as a link needs), without trailing slashes. */
function linkBase(value: string | undefined): string | undefined {
  return value === undefined ? undefined : new URL(value).href.replace(/\/+$/, '');
}

function freezeAlerts(config: ConfigFile['alerts']): AlertSettings {
  return Object.freeze({
    grafanaUrl: linkBase(config?.grafana_url),
    runbookBaseUrl: linkBase(config?.runbook_base_url),
    severityNames: Object.freeze({
      page: config?.severity_names?.page ?? DEFAULTS.severityNames.page,
      ticket: config?.severity_names?.ticket ?? DEFAULTS.severityNames.ticket,
    }),
    extraLabels: Object.freeze({ ...config?.labels }),
    p99TtftForMs: parseDurationMs(config?.p99_ttft_for ?? DEFAULTS.p99TtftFor) as number,
    p99TtftLevel: config?.p99_ttft_severity ?? DEFAULTS.p99TtftLevel,
    p99TtftMinRequests: config?.p99_ttft_min_requests ?? DEFAULTS.p99TtftMinRequests,
    minRequestsPerHour: config?.min_requests_per_hour ?? DEFAULTS.minRequestsPerHour,
    itlMinSlowRequests: config?.itl_min_slow_requests ?? DEFAULTS.itlMinSlowRequests,
    absentForMs: parseDurationMs(config?.absent_for ?? DEFAULTS.absentFor) as number,
    scrapeSelector: config?.scrape_selector ?? DEFAULTS.scrapeSelector,
    expectedNamespaces: Object.freeze([...(config?.expected_namespaces ?? [])]),
  });
}

/** TOKENTAP_MODEL_DISCOVERY (`on` or `off`) wins over `model_discovery.enabled`, so a pod can turn it off without a new config. */
function freezeModelDiscovery(config: ConfigFile['model_discovery'], env: LoadOptions['env']): ModelDiscoverySettings | undefined {
  const fromEnv = nonEmpty(env[ENV.modelDiscovery]);
  if (fromEnv !== undefined && fromEnv !== 'on' && fromEnv !== 'off') {
    throw new TokentapError('TOKENTAP_ERR_CONFIG_INVALID', [`${ENV.modelDiscovery}: expected on or off, got ${JSON.stringify(fromEnv)}`]);
  }
  if (fromEnv === 'off' || (fromEnv === undefined && config?.enabled === false)) return undefined;
  const intervalMs = parseDurationMs(config?.interval ?? DEFAULTS.modelDiscoveryInterval) as number;
  return Object.freeze({
    paths: Object.freeze([...(config?.paths ?? DEFAULTS.modelDiscoveryPaths)]),
    intervalMs,
    retryMs: Math.min(intervalMs, parseDurationMs(DEFAULTS.modelDiscoveryRetry) as number),
    timeoutMs: parseDurationMs(config?.timeout ?? DEFAULTS.modelDiscoveryTimeout) as number,
    adapterIdleAfterMs: parseDurationMs(config?.adapter_idle_after ?? DEFAULTS.adapterIdleAfter) as number,
  });
}

function freezeLimits(config: ConfigFile['limits']): RelayLimits {
  const ms = (text: string | undefined, fallback: number) => (text === undefined ? fallback : (parseDurationMs(text) as number));
  const maxConnections = config?.max_connections ?? defaultMaxConnections();
  return Object.freeze({
    maxConnections,
    maxConnectionsPerClient: config?.max_connections_per_client ?? maxConnections,
    requestHeadTimeoutMs: ms(config?.request_head_timeout, LIMIT_DEFAULTS.requestHeadTimeoutMs),
    requestBodyIdleTimeoutMs: ms(config?.request_body_idle_timeout, LIMIT_DEFAULTS.requestBodyIdleTimeoutMs),
    responseSendTimeoutMs: ms(config?.response_send_timeout, LIMIT_DEFAULTS.responseSendTimeoutMs),
    sniffedBodyBytes: config?.sniffed_body_bytes ?? LIMIT_DEFAULTS.sniffedBodyBytes,
    rewrittenBodyBytes: config?.rewritten_body_bytes ?? LIMIT_DEFAULTS.rewrittenBodyBytes,
    heldBodyBytes: config?.held_body_bytes ?? LIMIT_DEFAULTS.heldBodyBytes,
    pipelinedRequests: config?.pipelined_requests ?? LIMIT_DEFAULTS.pipelinedRequests,
    minRequestChunkBytes: config?.min_request_chunk_bytes ?? LIMIT_DEFAULTS.minRequestChunkBytes,
    interimResponses: config?.interim_responses ?? LIMIT_DEFAULTS.interimResponses,
    interimResponseBytes: config?.interim_response_bytes ?? LIMIT_DEFAULTS.interimResponseBytes,
    logBufferBytes: config?.log_buffer_bytes ?? LIMIT_DEFAULTS.logBufferBytes,
    h2MaxConcurrentStreams: config?.h2_max_concurrent_streams ?? LIMIT_DEFAULTS.h2MaxConcurrentStreams,
    h2MaxHeaderListBytes: config?.h2_max_header_list_bytes ?? LIMIT_DEFAULTS.h2MaxHeaderListBytes,
    h2StreamWindowBytes: config?.h2_stream_window_bytes ?? LIMIT_DEFAULTS.h2StreamWindowBytes,
    h2ClientResetsPerSecond: config?.h2_client_resets_per_second ?? LIMIT_DEFAULTS.h2ClientResetsPerSecond,
  });
}

function freezeCost(config: ConfigFile['cost']): CostSettings | undefined {
  if (config === undefined) return undefined;
  return Object.freeze({ pricePerHour: config.accelerator_price_per_hour, accelerators: config.accelerators ?? DEFAULTS.accelerators, currency: config.currency ?? DEFAULTS.currency });
}

function freezeDcgm(config: ConfigFile['dcgm'], env: LoadOptions['env']): DcgmSettings | undefined {
  if (config === undefined) return undefined;
  const intervalMs = parseDurationMs(config.interval ?? DEFAULTS.dcgmInterval) as number;
  const timeoutMs = config.timeout === undefined ? Math.min(parseDurationMs(DEFAULTS.dcgmTimeout) as number, intervalMs) : (parseDurationMs(config.timeout) as number);
  return Object.freeze({ url: new URL(config.url), intervalMs, timeoutMs, identity: podIdentityFromEnv(env) });
}

function freezeWorkload(config: WorkloadConfig): Workload {
  const match = config.match;
  const slo = config.slo;
  const thresholdsS: Partial<Record<SloKind, number>> = {};
  if (slo !== undefined) {
    for (const kind of SLO_KINDS) {
      const text = slo[kind];
      if (text !== undefined) thresholdsS[kind] = parseDurationSeconds(text) as number;
    }
  }
  return Object.freeze({
    name: config.name,
    match:
      match === undefined
        ? undefined
        : Object.freeze(
            (Array.isArray(match) ? match : [match]).map((conditions) =>
              Object.freeze({
                headers: Object.freeze(Object.entries(conditions.header ?? {}).map(([name, value]) => Object.freeze([name.toLowerCase(), value] as const))),
                path: conditions.path,
                model: conditions.model,
              }),
            ),
          ),
    slo:
      slo === undefined
        ? undefined
        : Object.freeze({
            objective: slo.objective,
            thresholdsS: Object.freeze(thresholdsS),
            ttftOn: slo.ttft_on ?? DEFAULTS.ttftOn,
            itlPercentile: slo.itl_percentile ?? DEFAULTS.itlPercentile,
          }),
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
      // e.linePos is filled only with prettyErrors, which would also add a code excerpt to the
      // message: the line comes from the error's offset instead.
      doc.errors.map((e) => `${path}:${lineCounter.linePos(e.pos[0]).line}: YAML: ${e.message.split('\n')[0]}`),
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
    const message = issue.code === 'unrecognized_keys' ? unknownSettingMessage(path) : issue.message;
    const fromOverride = origin[top] ?? origin[path.map(String).join('.')];
    if (fromOverride !== undefined) return `${fromOverride}: ${message}`;
    const where = configFile === undefined ? '' : locate(path);
    return `${where}${formatPath(path)}: ${message}`;
  });
}

function unknownSettingMessage(path: readonly PropertyKey[]): string {
  const suggestion = nearestKnownKey(configFileSchema, path);
  return suggestion === undefined ? 'unknown setting' : `unknown setting; did you mean "${suggestion}"?`;
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
