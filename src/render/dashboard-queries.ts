import { ATTR, METRICS, GPU_METRICS } from '../metrics/definitions.js';
import { GENERATIONS_ONLY, NAMESPACE_LABEL, promLabel } from './promql.js';

/**
 * PromQL for the dashboards, built from the metric definitions table only (metric names, label
 * names), so a panel can never query a series tokentap does not emit.
 *
 * Conventions that every query here follows:
 * - Template variables: `$namespace`, `$pod`, `$workload`, `$model` are regex matchers; `$__rate_interval`
 *   is Grafana's rate window.
 * - SLO quantities (attainment, error budget, burn rate) are the workload's, across all its pods, as
 *   the alerts compute them: they ignore `$pod` (see `sloScope`).
 * - Every per-workload aggregation is also by namespace, as the recording rules are: with `$namespace`
 *   at All, the same workload name in staging and prod stays two series, never one merged SLI or
 *   quantile. Series without a namespace label form one group with an empty namespace.
 * - Per-workload panels sit in rows Grafana repeats per value of `$workload`, so inside a row the
 *   variable is that one workload; nothing is pinned to a workload name.
 * - Ratios never divide by zero: the denominator is filtered with `> 0`, and a zero denominator
 *   (counters that exist and did not move) gives NaN, which the panels show as "No traffic";
 *   no series at all means nothing was scraped, shown as "No data", never a fake 0 % / 100 %.
 * - A numerator that may have no series at all (no bad event yet) is completed with zeros from
 *   the denominator's own series, so 0 % is shown as 0 % once there is traffic.
 */

/** Prometheus label names of the OTel attributes. */
export const LABEL = {
  workload: promLabel(ATTR.workload),
  model: promLabel(ATTR.model),
  outcome: promLabel(ATTR.outcome),
  tokenType: promLabel(ATTR.tokenType),
  slo: promLabel(ATTR.slo),
  result: promLabel(ATTR.sloResult),
} as const;

const histogram = (key: keyof typeof METRICS): string => METRICS[key].promName;

function matchers(byPod: boolean, workload: string | undefined, extra: string): string {
  const w = workload === undefined ? `${LABEL.workload}=~"$workload"` : `${LABEL.workload}="${workload}"`;
  const pod = byPod ? ['pod=~"$pod"'] : [];
  return `{${['namespace=~"$namespace"', ...pod, w, `${LABEL.model}=~"$model"`, ...(extra === '' ? [] : [extra])].join(', ')}}`;
}

/** The selector every tokentap series is filtered by; `workload` is the variable unless pinned to one workload. */
export function scope(workload?: string, extra = ''): string {
  return matchers(true, workload, extra);
}

/**
 * The selector of SLO events: `scope` without `pod`. `$pod` at All expands to the pods seen in the
 * dashboard's time range (dashboard-variables.ts), so a 30-day sum filtered by it would silently
 * drop every pod a rollout replaced since then; and the SLO is the workload's, across its pods.
 */
function sloScope(extra = ''): string {
  return matchers(false, undefined, extra);
}

/** `histogram_quantile` over a classic histogram, per namespace; `by` keeps extra labels (e.g. workload). */
export function quantile(q: number, key: 'ttft' | 'itlToken' | 'e2e' | 'ttfb' | 'tpot', workload?: string, by: readonly string[] = []): string {
  return `histogram_quantile(${q}, sum by (${['le', NAMESPACE_LABEL, ...by].join(', ')}) (rate(${histogram(key)}_bucket${scope(workload)}[$__rate_interval])))`;
}

/**
 * `numerator / denominator`, both `sum by` expressions over the same labels: NaN where the
 * denominator is zero (the counters exist and did not move: the panels show "No traffic"), no
 * series where it has none (nothing scraped: "No data"). The division itself is guarded (`> 0`);
 * the zero groups come back as `0 * NaN`.
 */
export function safeRatio(numerator: string, denominator: string): string {
  return `(${numerator}) / (${denominator} > 0) or (${denominator} == 0) * NaN`;
}

/** `sum by (by) (fn(metric{...}[window]))`, with zeros for groups that have events of another kind. */
function completed(fn: string, metric: string, selector: string, all: string, window: string, by: readonly string[]): string {
  const group = by.length === 0 ? 'sum' : `sum by (${by.join(', ')})`;
  return `${group} (${fn}(${metric}${selector}[${window}])) or ${group} (${fn}(${metric}${all}[${window}])) * 0`;
}

const SLO_EVENTS = METRICS.sloEvents.promName;

/** Share of `result` events of the selected workloads over `window`, per namespace, workload and SLO. */
function sloShare(result: 'good' | 'bad', window: string): string {
  const all = sloScope();
  const matching = sloScope(`${LABEL.result}="${result}"`);
  const by = [NAMESPACE_LABEL, LABEL.workload, LABEL.slo];
  return safeRatio(completed('increase', SLO_EVENTS, matching, all, window, by), `sum by (${by.join(', ')}) (increase(${SLO_EVENTS}${all}[${window}]))`);
}

/** Share of good events over `window` (attainment / SLI), per namespace, workload and SLO. */
export function sloAttainment(window: string): string {
  return sloShare('good', window);
}

/**
 * The error ratio divided by each workload's error budget ratio (1 - objective): `budgetRatios` is
 * a `{workload}` series per workload with an SLO (dashboard-slo-constants.ts), never zero.
 */
function perBudget(window: string, budgetRatios: string): string {
  return `(${sloShare('bad', window)}) / on (${LABEL.workload}) group_left () (${budgetRatios})`;
}

/** Error budget left over `window`: 1 - error ratio / (1 - objective); negative once overspent. */
export function errorBudgetRemaining(budgetRatios: string, window: string): string {
  return `1 - ${perBudget(window, budgetRatios)}`;
}

/** How fast the budget burns: error ratio over `window` / (1 - objective); 1 spends it exactly over the SLO window. */
export function burnRate(budgetRatios: string, window: string): string {
  return perBudget(window, budgetRatios);
}

/**
 * A configured per-workload constant (`{workload}` series: an objective, a threshold), kept to
 * the selected workloads that have series in the selected namespaces, so a repeated row draws its
 * own workload's value only.
 */
export function forSelectedWorkloads(constants: string): string {
  return `(${constants}) and on (${LABEL.workload}) group by (${LABEL.workload}) (${METRICS.requests.promName}{namespace=~"$namespace", ${LABEL.workload}=~"$workload"})`;
}

const REQUESTS = METRICS.requests.promName;

/** Finished requests per second by outcome, all selected namespaces and workloads together (rates add up). */
export function requestsPerSecondByOutcome(): string {
  return `sum by (${LABEL.outcome}) (rate(${REQUESTS}${scope(undefined, GENERATIONS_ONLY)}[$__rate_interval]))`;
}

/** Share of finished requests per namespace and workload that ended with `outcome`; 0 when there were requests but none such. */
export function outcomeRatio(outcome: string): string {
  const all = scope(undefined, GENERATIONS_ONLY);
  const matching = scope(undefined, `${LABEL.outcome}="${outcome}", ${GENERATIONS_ONLY}`);
  const by = [NAMESPACE_LABEL, LABEL.workload];
  return safeRatio(completed('rate', REQUESTS, matching, all, '$__rate_interval', by), `sum by (${by.join(', ')}) (rate(${REQUESTS}${all}[$__rate_interval]))`);
}

/** Tokens per second by type (input, output), per namespace and workload. */
export function tokensPerSecond(): string {
  return `sum by (${NAMESPACE_LABEL}, ${LABEL.workload}, ${LABEL.tokenType}) (rate(${METRICS.tokens.promName}${scope()}[$__rate_interval]))`;
}

/** Requests in flight per namespace and workload. */
export function inFlight(): string {
  return `sum by (${NAMESPACE_LABEL}, ${LABEL.workload}) (${METRICS.inFlight.promName}${scope()})`;
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
