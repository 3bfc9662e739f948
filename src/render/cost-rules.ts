import type { Settings } from '../config/load.js';
import { ATTR, METRICS, POD_METRICS } from '../metrics/definitions.js';
import { formatPromDuration } from './prometheus-duration.js';
import { GENERATIONS_ONLY, LABEL, WORKLOAD_KEY, labelList, promLabel } from './promql.js';
import { RATE_WINDOW_MS } from './recording-rules.js';
import { scaledMs, type RecordingRule, type RenderOptions } from './rule-types.js';

/**
 * Cost recording rules (docs/capacity-and-cost.md "Accelerator time and cost"), rendered only with
 * `cost:` configured: without it the sidecars export no accelerator-seconds, count or price, and
 * the rules would only evaluate to nothing.
 *
 * Two bases, as the llm-d/OpenCost proposal names them (`cost_basis`):
 * - `usage`: each workload pays for the accelerator-seconds its requests were attributed
 *   (tokentap_accelerator_seconds_total) at its pod's price; the pod's idle time is paid by nobody.
 * - `allocation`: each pod's whole wall time (busy + idle) at its price and accelerator count is
 *   spread over the workloads in proportion to their accelerator-seconds on that pod, so the
 *   workloads together pay for every pod that did any work in the window.
 *
 * A pod is one scrape target, `job` and `instance`: prices and counts are joined per target,
 * because two pods of one workload may run on different accelerators.
 */

/** Labels that identify one sidecar (one pod): the scrape target. */
const TARGET = ['job', 'instance'] as const;
const CURRENCY = promLabel(ATTR.currency);
export const COST_BASIS_LABEL = 'cost_basis';
export type CostBasis = 'usage' | 'allocation';

export const COST_RECORD = {
  /** `{namespace, workload}`: accelerator-seconds per second attributed to the workload's requests, all pods and phases. */
  acceleratorSeconds: 'tokentap:accelerator_seconds:rate5m',
  /** `{namespace, workload, currency, cost_basis}`: the workload's cost per second. */
  cost: 'tokentap:cost:rate5m',
  /** `{namespace, workload, currency, cost_basis}`: cost per finished generation request. */
  costPerRequest: 'tokentap:cost_per_request:rate5m',
  /** `{namespace, workload, currency, cost_basis}`: the cost per million tokens, input and output together (the prefill of requests without an input count left out, as below). */
  costPerMillionTokens: 'tokentap:cost_per_million_tokens:rate5m',
  /** `{namespace, workload, currency, cost_basis}`: the prefill part of the cost, of the requests that reported their input tokens, per million input (prompt) tokens. */
  costPerMillionInputTokens: 'tokentap:cost_per_million_input_tokens:rate5m',
  /** `{namespace, workload, currency, cost_basis}`: the decode part of the cost per million output (generated) tokens. */
  costPerMillionOutputTokens: 'tokentap:cost_per_million_output_tokens:rate5m',
  /** `{namespace, workload, currency, cost_basis}`: the workload's cost per request that met every SLO (goodput); absent when none did. */
  costPerGoodRequest: 'tokentap:cost_per_good_request:rate5m',
  /** `{namespace, workload}`: quantiles of accelerator-seconds per request (times price / 3600: cost per request). */
  requestAcceleratorSeconds: (q: 0.5 | 0.99) => `tokentap:request_accelerator_seconds:p${Math.round(q * 100)}_rate5m`,
} as const;

export function costRecordingRules(settings: Settings, options: RenderOptions): RecordingRule[] {
  if (settings.cost === undefined) return [];
  const range = formatPromDuration(scaledMs(RATE_WINDOW_MS, options));
  const rate = (metric: string, matchers = '') => `rate(${metric}${matchers === '' ? '' : `{${matchers}}`}[${range}])`;
  const target = labelList(...TARGET);
  const workloadOnTarget = `sum by (${labelList(...WORKLOAD_KEY, ...TARGET)}) (${rate(METRICS.acceleratorSeconds.promName)})`;
  const pricePerSecond = `(${POD_METRICS.pricePerHour.promName} / 3600)`;
  const usage = [
    `sum by (${labelList(...WORKLOAD_KEY, CURRENCY)}) (`,
    `  ${workloadOnTarget}`,
    `  * on (${target}) group_left (${CURRENCY}) ${pricePerSecond}`,
    `)`,
  ].join('\n');
  // Each pod's cost per second of wall time: busy + idle (1 while the sidecar runs, less across a
  // restart or a missed scrape) x accelerators x price, spread by the workloads' shares on that pod.
  const podCost = `((${rate(POD_METRICS.busy.promName)} + ${rate(POD_METRICS.idle.promName)}) * ${POD_METRICS.accelerators.promName})`;
  const allocation = [
    `sum by (${labelList(...WORKLOAD_KEY, CURRENCY)}) (`,
    `  ${workloadOnTarget}`,
    `  / on (${target}) group_left ()`,
    `  (sum by (${target}) (${rate(METRICS.acceleratorSeconds.promName)}) > 0)`,
    `  * on (${target}) group_left () ${podCost}`,
    `  * on (${target}) group_left (${CURRENCY}) ${pricePerSecond}`,
    `)`,
  ].join('\n');
  const withBasis = (basis: CostBasis, expr: string): RecordingRule => ({ record: COST_RECORD.cost, expr, labels: { [COST_BASIS_LABEL]: basis } });
  const perWorkload = `on (${labelList(...WORKLOAD_KEY)}) group_left ()`;
  const per = (record: string, denominator: string, scale = ''): RecordingRule => ({
    record,
    expr: `${COST_RECORD.cost}${scale}\n/ ${perWorkload}\n(${denominator} > 0)`,
  });
  const tokens = (type?: 'input' | 'output') => `sum by (${labelList(...WORKLOAD_KEY)}) (${rate(METRICS.tokens.promName, type === undefined ? '' : `${LABEL.tokenType}="${type}"`)})`;
  // Input tokens pay for the prefill share of the workload's accelerator-seconds, output tokens for
  // the decode share, as the llm-d proposal splits input and output costs by compute time. Only the
  // prefill of the requests that reported their input tokens pays for them: a stream without a usage
  // report has prefill time but no input count, and its time over the others' tokens inflated the
  // figure (two equal requests, one without usage: twice the cost per input token).
  const byWorkload = (expr: string) => `sum by (${labelList(...WORKLOAD_KEY)}) (${expr})`;
  const share = (part: string) => ` * on (${labelList(...WORKLOAD_KEY)}) group_left ()\n((${part}) / (${byWorkload(rate(METRICS.acceleratorSeconds.promName))} > 0))`;
  const reportedInput = byWorkload(rate(METRICS.inputTokensAcceleratorSeconds.promName));
  const decode = byWorkload(rate(METRICS.acceleratorSeconds.promName, `${promLabel(ATTR.phase)}="decode"`));
  return [
    { record: COST_RECORD.acceleratorSeconds, expr: `sum by (${labelList(...WORKLOAD_KEY)}) (${rate(METRICS.acceleratorSeconds.promName)})` },
    withBasis('usage', usage),
    withBasis('allocation', allocation),
    per(COST_RECORD.costPerRequest, `sum by (${labelList(...WORKLOAD_KEY)}) (${rate(METRICS.requests.promName, GENERATIONS_ONLY)})`),
    per(COST_RECORD.costPerMillionTokens, tokens(), ` * 1e6${share(`${reportedInput} + ${decode}`)}`),
    per(COST_RECORD.costPerMillionInputTokens, tokens('input'), ` * 1e6${share(reportedInput)}`),
    per(COST_RECORD.costPerMillionOutputTokens, tokens('output'), ` * 1e6${share(decode)}`),
    per(COST_RECORD.costPerGoodRequest, `sum by (${labelList(...WORKLOAD_KEY)}) (${rate(METRICS.goodput.promName)})`),
    ...([0.5, 0.99] as const).map((q) => ({
      record: COST_RECORD.requestAcceleratorSeconds(q),
      // Native histograms carry their buckets in one series: no `_bucket`, no `le` (native-recording-rules.ts).
      expr:
        options.histograms === 'native'
          ? `histogram_quantile(${q}, sum by (${labelList(...WORKLOAD_KEY)}) (${rate(METRICS.requestAcceleratorSeconds.promName)}))`
          : `histogram_quantile(${q}, sum by (${labelList(...WORKLOAD_KEY, 'le')}) (${rate(`${METRICS.requestAcceleratorSeconds.promName}_bucket`)}))`,
    })),
  ];
}
