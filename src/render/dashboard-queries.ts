import { METRICS, GPU_METRICS } from '../metrics/definitions.js';
import type { SloKind } from '../config/load.js';

/**
 * PromQL for the dashboards, built from the metric definitions table only (metric names, label
 * names), so a panel can never query a series tokentap does not emit.
 *
 * Conventions that every query here follows:
 * - Template variables: `$namespace`, `$pod`, `$workload`, `$model` are regex matchers; `$__rate_interval`
 *   is Grafana's rate window.
 * - Ratios never divide by zero: the denominator is filtered with `> 0`, so no traffic yields no
 *   series (the panel shows "No traffic") instead of NaN or a fake 0 % / 100 %.
 * - A numerator that may have no series at all (no bad event yet) is completed with zeros from
 *   the denominator's own series, so 0 % is shown as 0 % once there is traffic.
 */

/** Prometheus label names of the OTel attributes. */
export const LABEL = {
  workload: 'workload',
  model: 'gen_ai_request_model',
  outcome: 'outcome',
  tokenType: 'gen_ai_token_type',
  slo: 'slo',
  result: 'result',
} as const;

const histogram = (key: keyof typeof METRICS): string => METRICS[key].promName;

/** The selector every tokentap series is filtered by; `workload` is the variable unless pinned to one workload. */
export function scope(workload?: string, extra = ''): string {
  const w = workload === undefined ? `${LABEL.workload}=~"$workload"` : `${LABEL.workload}="${workload}"`;
  return `{namespace=~"$namespace", pod=~"$pod", ${w}, ${LABEL.model}=~"$model"${extra === '' ? '' : `, ${extra}`}}`;
}

/** `histogram_quantile` over a classic histogram; `by` keeps extra labels (e.g. workload). */
export function quantile(q: number, key: 'ttft' | 'itlToken' | 'e2e' | 'ttfb' | 'tpot', workload?: string, by: readonly string[] = []): string {
  return `histogram_quantile(${q}, sum by (${['le', ...by].join(', ')}) (rate(${histogram(key)}_bucket${scope(workload)}[$__rate_interval])))`;
}

/** `numerator / denominator`, empty when the denominator is zero; both are `sum by (by)` expressions. */
function safeRatio(numerator: string, denominator: string): string {
  return `(${numerator}) / (${denominator} > 0)`;
}

/** `sum by (by) (fn(metric{...}[window]))`, with zeros for groups that have events of another kind. */
function completed(fn: string, metric: string, selector: string, all: string, window: string, by: readonly string[]): string {
  const group = by.length === 0 ? 'sum' : `sum by (${by.join(', ')})`;
  return `${group} (${fn}(${metric}${selector}[${window}])) or ${group} (${fn}(${metric}${all}[${window}])) * 0`;
}

const SLO_EVENTS = METRICS.sloEvents.promName;

/** Share of good events of one SLO of one workload over `window` (attainment / SLI). */
export function sloAttainment(workload: string, slo: SloKind, window: string): string {
  const all = scope(workload, `${LABEL.slo}="${slo}"`);
  const good = scope(workload, `${LABEL.slo}="${slo}", ${LABEL.result}="good"`);
  return safeRatio(completed('increase', SLO_EVENTS, good, all, window, []), `sum (increase(${SLO_EVENTS}${all}[${window}]))`);
}

/** Share of bad events of one SLO of one workload over `window` (the error ratio). */
function sloErrorRatio(workload: string, slo: SloKind, window: string): string {
  const all = scope(workload, `${LABEL.slo}="${slo}"`);
  const bad = scope(workload, `${LABEL.slo}="${slo}", ${LABEL.result}="bad"`);
  return safeRatio(completed('increase', SLO_EVENTS, bad, all, window, []), `sum (increase(${SLO_EVENTS}${all}[${window}]))`);
}

/** Error budget left over `window`: 1 - error ratio / (1 - objective); negative once overspent. */
export function errorBudgetRemaining(workload: string, slo: SloKind, objective: number, window: string): string {
  return `1 - (${sloErrorRatio(workload, slo, window)}) / ${round(1 - objective)}`;
}

/** How fast the budget burns: error ratio over `window` / (1 - objective); 1 spends it exactly over the SLO window. */
export function burnRate(workload: string, slo: SloKind, objective: number, window: string): string {
  return `(${sloErrorRatio(workload, slo, window)}) / ${round(1 - objective)}`;
}

/** Attainment of every SLO of every selected workload over `window`, by workload and slo. */
export function sloAttainmentByWorkload(window: string): string {
  const by = [LABEL.workload, LABEL.slo];
  const all = scope();
  const good = scope(undefined, `${LABEL.result}="good"`);
  return safeRatio(completed('increase', SLO_EVENTS, good, all, window, by), `sum by (${by.join(', ')}) (increase(${SLO_EVENTS}${all}[${window}]))`);
}

const REQUESTS = METRICS.requests.promName;

/** Finished requests per second by outcome. */
export function requestsPerSecondByOutcome(): string {
  return `sum by (${LABEL.outcome}) (rate(${REQUESTS}${scope()}[$__rate_interval]))`;
}

/** Share of finished requests per workload that ended with `outcome`; 0 when there were requests but none such. */
export function outcomeRatio(outcome: string): string {
  const all = scope();
  const matching = scope(undefined, `${LABEL.outcome}="${outcome}"`);
  return safeRatio(
    completed('rate', REQUESTS, matching, all, '$__rate_interval', [LABEL.workload]),
    `sum by (${LABEL.workload}) (rate(${REQUESTS}${all}[$__rate_interval]))`,
  );
}

/** Tokens per second by type (input, output), per workload. */
export function tokensPerSecond(): string {
  return `sum by (${LABEL.workload}, ${LABEL.tokenType}) (rate(${METRICS.tokens.promName}${scope()}[$__rate_interval]))`;
}

/** Requests in flight per workload. */
export function inFlight(): string {
  return `sum by (${LABEL.workload}) (${METRICS.inFlight.promName}${scope()})`;
}

// DCGM exporter series -----------------------------------------------------------------------

/** DCGM's blank values start at 0x7ffffff0 (dcgm_structs.h); anything at or above is "unknown". */
const DCGM_BLANK = 2147483632;
/** DCGM reports framebuffer in MiB. */
const MIB = 1048576;

/** Labels that identify one GPU or MIG instance of one pod, after normalisation. */
const DCGM_GROUP = ['hostname', 'pod', 'gpu', 'UUID', 'GPU_I_ID'] as const;
const DCGM_BY = `sum by (${DCGM_GROUP.join(', ')})`;

/**
 * A DCGM field for the selected pods, whichever way Prometheus labelled it: the exporter's own
 * `pod`/`namespace` (ServiceMonitor with honorLabels, or a plain scrape) or `exported_pod`/
 * `exported_namespace` (a PodMonitor, where the target's own `pod` label wins). After the union,
 * `exported_pod` is copied into `pod` and older exporters' `Hostname` into `hostname`, so every
 * panel groups and labels by the same names. Blank/sentinel values are dropped, never drawn.
 */
function dcgmField(field: string): string {
  const direct = `${field}{pod=~"$pod", namespace=~"$namespace"}`;
  const renamed = `${field}{exported_pod=~"$pod", exported_namespace=~"$namespace"}`;
  const union = `(${direct} or ${renamed}) < ${DCGM_BLANK}`;
  return `label_replace(label_replace(${union}, "pod", "$1", "exported_pod", "(.+)"), "hostname", "$1", "Hostname", "(.+)")`;
}

/** Framebuffer in use, bytes, per GPU or MIG instance of the selected pods. */
export function dcgmMemoryUsedBytes(): string {
  return `${DCGM_BY} (${dcgmField('DCGM_FI_DEV_FB_USED')}) * ${MIB}`;
}

/** Framebuffer free, bytes. */
export function dcgmMemoryFreeBytes(): string {
  return `${DCGM_BY} (${dcgmField('DCGM_FI_DEV_FB_FREE')}) * ${MIB}`;
}

/**
 * Framebuffer size, bytes: FB_TOTAL where the exporter is configured to send it, else
 * used + free + reserved (FB_RESERVED is absent before DCGM 3: then used + free).
 */
export function dcgmMemoryTotalBytes(): string {
  const f = (name: string): string => `${DCGM_BY} (${dcgmField(name)})`;
  const used = f('DCGM_FI_DEV_FB_USED');
  const summed = `(${used} + ${f('DCGM_FI_DEV_FB_FREE')} + (${f('DCGM_FI_DEV_FB_RESERVED')} or ${used} * 0))`;
  return `(${f('DCGM_FI_DEV_FB_TOTAL')} or ${summed}) * ${MIB}`;
}

/**
 * GPU utilisation (0-1) of the GPUs the selected pods use. Joined by UUID, not pod: on MIG the
 * exporter reports utilisation per physical GPU, without pod labels.
 */
export function dcgmUtilizationRatio(): string {
  const util = `max by (hostname, gpu, UUID) (label_replace(DCGM_FI_DEV_GPU_UTIL < ${DCGM_BLANK}, "hostname", "$1", "Hostname", "(.+)"))`;
  return `(${util} and on (UUID) ${DCGM_BY} (${dcgmField('DCGM_FI_DEV_FB_USED')})) / 100`;
}

// The sidecar's own GPU gauges ----------------------------------------------------------------

const gpuScope = '{namespace=~"$namespace", pod=~"$pod"}';

export function sidecarGpuMemoryUsedBytes(): string {
  return `${GPU_METRICS.memoryUsed.promName}${gpuScope}`;
}

export function sidecarGpuMemoryTotalBytes(): string {
  return `${GPU_METRICS.memoryTotal.promName}${gpuScope}`;
}

export function sidecarGpuUtilizationRatio(): string {
  return `${GPU_METRICS.utilization.promName}${gpuScope}`;
}

/** DCGM scrape failures per second by reason, per pod. */
export function dcgmScrapeErrorRate(): string {
  return `sum by (pod, reason) (rate(${GPU_METRICS.scrapeErrors.promName}${gpuScope}[$__rate_interval]))`;
}

/** Avoids 0.010000000000000009 in queries. */
function round(value: number): number {
  return Number(value.toPrecision(12));
}
