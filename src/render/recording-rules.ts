import { SLO_KINDS, type Settings } from '../config/load.js';
import { METRICS } from '../metrics/definitions.js';
import { SLI_WINDOWS, type SliWindowName } from './burn-rate-windows.js';
import { formatPromDuration } from './prometheus-duration.js';
import { GENERATIONS_ONLY, LABEL, WORKLOAD_KEY, labelList, promNumber, selector } from './promql.js';
import { scaledMs, type RecordingRule, type RenderOptions } from './rule-types.js';

/**
 * Recording rules: per workload and SLO the SLI error ratio over every burn-rate window, and per
 * workload the latency quantiles and request and token rates that dashboards and alerts read.
 * "Per workload" is per namespace and workload (`WORKLOAD_KEY`): the same workload name in two
 * namespaces is two deployments with two SLIs.
 * Names follow the Prometheus `level:metric:operation` convention with a `tokentap:` level, like
 * Sloth's `slo:sli_error:ratio_rate5m`.
 */

export const QUANTILES = [0.5, 0.9, 0.99] as const;
export type Quantile = (typeof QUANTILES)[number];

/** The latencies with per-workload quantiles: recording-rule name part and the histogram behind it. */
export const LATENCIES = {
  ttft: METRICS.ttft,
  /** To the first answer token (reasoning excluded): what a workload with `ttft_on: first_answer` is judged on. */
  ttft_answer: METRICS.ttftAnswer,
  /** Per token, not per chunk: the ITL SLO is per token too. */
  itl: METRICS.itlToken,
  e2e: METRICS.e2e,
} as const;
export type LatencyName = keyof typeof LATENCIES;

/** The window the quantiles and rates are computed over (nominal; scaled by RenderOptions). */
export const RATE_WINDOW_MS = 5 * 60_000;

export const RECORD = {
  /** `{namespace, workload, slo}`: bad events / all events of the SLO over the window; 0 when none was bad, absent without events. */
  errorRatio: (window: SliWindowName) => `tokentap:slo_error_ratio:rate${window}`,
  /**
   * `{workload, slo}`: the configured objective, e.g. 0.99. A constant for users' own queries and
   * panels; it has no namespace (it comes from the configuration, not from a scrape), so join it
   * with `on (workload, slo) group_left` (one series per pair, many namespaces on the other side).
   * The rendered alerts and dashboard write the value in literally.
   */
  objective: 'tokentap:slo_objective:ratio',
  /** `{workload, slo}`: the configured threshold in seconds; a constant, like `objective`. */
  threshold: 'tokentap:slo_threshold:seconds',
  /** `{namespace, workload}`: histogram_quantile over the classic buckets, all models and pods together. */
  quantile: (latency: LatencyName, q: Quantile) => `tokentap:${latency}_seconds:p${Math.round(q * 100)}_rate5m`,
  /** `{namespace, workload, outcome}`: finished requests per second. */
  requests: 'tokentap:requests:rate5m',
  /** `{namespace, workload, gen_ai_token_type}`: tokens per second, input and output. */
  tokens: 'tokentap:tokens:rate5m',
} as const;

function errorRatioRule(window: (typeof SLI_WINDOWS)[number], options: RenderOptions): RecordingRule {
  const range = formatPromDuration(scaledMs(window.ms, options));
  const events = METRICS.sloEvents.promName;
  const by = `sum by (${labelList(...WORKLOAD_KEY, LABEL.slo)})`;
  const all = `${by} (rate(${events}[${range}]))`;
  // A workload with no bad event has no `result="bad"` series at all; `or 0 * all` makes its ratio
  // 0 rather than absent, so dashboards show 0 % and not "no data". A window without events gives
  // no sample rather than NaN (0 / 0, while the counters exist but did not move): `all > 0`.
  return {
    record: RECORD.errorRatio(window.name),
    expr: [`(`, `  ${by} (rate(${selector(events, { [LABEL.sloResult]: 'bad' })}[${range}]))`, `  or`, `  0 * ${all}`, `)`, `/`, `(${all} > 0)`].join('\n'),
  };
}

function sloConstantRules(settings: Settings): RecordingRule[] {
  const rules: RecordingRule[] = [];
  for (const workload of settings.workloads) {
    if (workload.slo === undefined) continue;
    for (const kind of SLO_KINDS) {
      const thresholdS = workload.slo.thresholdsS[kind];
      if (thresholdS === undefined) continue;
      const labels = { [LABEL.workload]: workload.name, [LABEL.slo]: kind };
      rules.push({ record: RECORD.objective, expr: `vector(${promNumber(workload.slo.objective)})`, labels });
      rules.push({ record: RECORD.threshold, expr: `vector(${promNumber(thresholdS)})`, labels });
    }
  }
  return rules;
}

/** Per workload: p50, p90 and p99 of TTFT, ITL and e2e. */
export function latencyRecordingRules(options: RenderOptions): RecordingRule[] {
  const range = formatPromDuration(scaledMs(RATE_WINDOW_MS, options));
  return Object.entries(LATENCIES).flatMap(([name, metric]) =>
    QUANTILES.map((q) => ({
      record: RECORD.quantile(name as LatencyName, q),
      expr: `histogram_quantile(${q}, sum by (${labelList(...WORKLOAD_KEY, 'le')}) (rate(${metric.promName}_bucket[${range}])))`,
    })),
  );
}

/** Per workload and SLO: the error ratio over every burn-rate window, and the objective and threshold as constants. */
export function sliRecordingRules(settings: Settings, options: RenderOptions): RecordingRule[] {
  return [...SLI_WINDOWS.map((w) => errorRatioRule(w, options)), ...sloConstantRules(settings)];
}

/** Per workload: requests per second by outcome and tokens per second by type. */
export function trafficRecordingRules(options: RenderOptions): RecordingRule[] {
  const range = formatPromDuration(scaledMs(RATE_WINDOW_MS, options));
  return [
    { record: RECORD.requests, expr: `sum by (${labelList(...WORKLOAD_KEY, LABEL.outcome)}) (rate(${METRICS.requests.promName}{${GENERATIONS_ONLY}}[${range}]))` },
    { record: RECORD.tokens, expr: `sum by (${labelList(...WORKLOAD_KEY, LABEL.tokenType)}) (rate(${METRICS.tokens.promName}[${range}]))` },
  ];
}
