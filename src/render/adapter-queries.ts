import { ATTR, METRICS, MODEL_INFO } from '../metrics/definitions.js';
import { scope } from './dashboard-queries.js';
import { GENERATIONS_ONLY, NAMESPACE_LABEL, promLabel } from './promql.js';

/**
 * PromQL for the LoRA adapter panels (adapter-panels.ts): request series grouped by the base model
 * each model label runs on, joined from tokentap_model_info, and the adapter cold starts. The
 * conventions of dashboard-queries.ts hold: per namespace, `$`-variables, no division.
 *
 * The join: tokentap_model_info has one series per (pod, model label) with value 1, so
 * `x * on (namespace, pod, gen_ai_request_model) group_left (base_model) tokentap_model_info`
 * keeps x's value and adds its `base_model`. Series whose model has no info series (`other`,
 * `unknown`, a sidecar without model discovery) drop out of the by-base-model panels.
 */

const MODEL = promLabel(ATTR.model);
export const BASE_MODEL = MODEL_INFO.labels[1];
const RATE = '[$__rate_interval]';
const TTFT = METRICS.ttft.promName;
const COLD_TTFT = METRICS.adapterColdStartTtft.promName;

function withBaseModel(expr: string): string {
  const info = `${MODEL_INFO.promName}{namespace=~"$namespace", pod=~"$pod", ${MODEL}=~"$model"}`;
  return `(${expr}) * on (${NAMESPACE_LABEL}, pod, ${MODEL}) group_left (${BASE_MODEL}) ${info}`;
}

function quantileByBase(q: number, bucketRates: string): string {
  return `histogram_quantile(${q}, sum by (le, ${NAMESPACE_LABEL}, ${BASE_MODEL}) (${withBaseModel(bucketRates)}))`;
}

/** TTFT quantile per namespace and base model, every request of its adapters and itself. */
export function ttftQuantileByBaseModel(q: number): string {
  return quantileByBase(q, `rate(${TTFT}_bucket${scope()}${RATE})`);
}

/**
 * The same without the adapter cold starts: the cold-start histogram holds the same samples with
 * the same buckets (definitions.ts), so TTFT minus it, bucket by bucket, is the warm requests'.
 * A series with no cold start yet has no cold-start series to subtract: `or ... * 0` gives it zeros.
 */
export function warmTtftQuantileByBaseModel(q: number): string {
  const all = `rate(${TTFT}_bucket${scope()}${RATE})`;
  const cold = `rate(${COLD_TTFT}_bucket${scope()}${RATE})`;
  return quantileByBase(q, `${all} - (${cold} or ${all} * 0)`);
}

/** Generation requests per second per namespace and base model. */
export function requestsPerSecondByBaseModel(): string {
  return `sum by (${NAMESPACE_LABEL}, ${BASE_MODEL}) (${withBaseModel(`rate(${METRICS.requests.promName}${scope(undefined, GENERATIONS_ONLY)}${RATE})`)})`;
}

/** Adapter cold starts per second per namespace and adapter. */
export function adapterColdStartsPerSecond(): string {
  return `sum by (${NAMESPACE_LABEL}, ${MODEL}) (rate(${METRICS.adapterColdStarts.promName}${scope()}${RATE}))`;
}
