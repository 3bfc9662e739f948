import { ATTR, METRICS, type HistogramKey } from '../metrics/definitions.js';
import { safeRatio, scope } from './dashboard-queries.js';
import { GENERATIONS_ONLY, NAMESPACE_LABEL, promLabel } from './promql.js';

/**
 * PromQL for the "where the time goes" rows (engine-panels.ts): tokentap's engine-timing, goodput
 * and capacity series, and the inference engine's own /metrics beside them. The conventions of
 * dashboard-queries.ts hold: per namespace, `$`-variables, every division guarded with `> 0`.
 *
 * The engine's series carry no workload: they are the pod's (the engine container of the same pod
 * as the sidecar, scraped with the pod's `namespace` and `pod` target labels). A workload's engine
 * panel keeps the pods that served the selected workload (`and on (namespace, pod)` the pods of
 * its tokentap series). Which engine a pod runs is decided by what exists: each panel is the `or` of
 * the equivalent series of vLLM, SGLang, TGI and llama.cpp, each summed per pod, so a pod shows
 * the one its engine exports.
 */

const IN_FLIGHT = promLabel(ATTR.inFlight);
const RATE = '[$__rate_interval]';

/** Generation requests per second of the selected workload (`$workload`: its repeated row), per namespace. */
export function requestsPerSecond(): string {
  return `sum by (${NAMESPACE_LABEL}) (rate(${METRICS.requests.promName}${scope(undefined, GENERATIONS_ONLY)}${RATE}))`;
}

/** Requests per second that met every SLO of the workload (tokentap_goodput_requests_total), per namespace. */
export function goodputPerSecond(): string {
  return `sum by (${NAMESPACE_LABEL}) (rate(${METRICS.goodput.promName}${scope()}${RATE}))`;
}

/**
 * The mean sample of a histogram per request over the rate window, per namespace; empty without
 * samples. With `native` (`metrics.histograms: native`), `or` the same from the native series,
 * whichever the Prometheus ingested (native-dashboard-queries.ts).
 */
export function meanPerRequest(key: HistogramKey, native = false): string {
  const name = METRICS[key].promName;
  const sum = (suffix: string): string => `sum by (${NAMESPACE_LABEL}) (rate(${name}_${suffix}${scope()}${RATE}))`;
  const classic = safeRatio(sum('sum'), sum('count'));
  if (!native) return classic;
  const rate = `sum by (${NAMESPACE_LABEL}) (rate(${name}${scope()}${RATE}))`;
  return `${classic}\nor\n${safeRatio(`histogram_sum(${rate})`, `histogram_count(${rate})`)}`;
}

/** A quantile of a `*_by_concurrency` histogram per `in_flight` band and namespace; `native` as for meanPerRequest. */
export function quantileByInFlight(q: number, key: 'ttftByConcurrency' | 'itlByConcurrency', native = false): string {
  const by = `${NAMESPACE_LABEL}, ${IN_FLIGHT}`;
  const classic = `histogram_quantile(${q}, sum by (le, ${by}) (rate(${METRICS[key].promName}_bucket${scope()}${RATE})))`;
  if (!native) return classic;
  return `${classic}\nor\nhistogram_quantile(${q}, sum by (${by}) (rate(${METRICS[key].promName}${scope()}${RATE})))`;
}

/** The engine container's series of the selected pods. */
const ENGINE_SCOPE = '{namespace=~"$namespace", pod=~"$pod"}';
const PER_POD = `sum by (${NAMESPACE_LABEL}, pod)`;

/** The pods that served the selected workload (`$workload`), to keep a per-pod engine series to them. */
function selectedPods(): string {
  return `group by (${NAMESPACE_LABEL}, pod) (${METRICS.requests.promName}${scope()})`;
}

/** The first of `series` (metric names, gauges) that the pod's engine exports, summed per pod, kept to the workload's pods. */
function enginePerPod(series: readonly string[]): string {
  return `(${series.map((name) => `${PER_POD} (${name}${ENGINE_SCOPE})`).join(' or ')}) and on (${NAMESPACE_LABEL}, pod) ${selectedPods()}`;
}

/** Requests the engine is running: vLLM, SGLang, TGI (current batch), llama.cpp (slots processing). */
export function engineRunning(): string {
  return enginePerPod(['vllm:num_requests_running', 'sglang:num_running_reqs', 'tgi_batch_current_size', 'llamacpp:requests_processing']);
}

/** Requests waiting in the engine's queue. */
export function engineWaiting(): string {
  return enginePerPod(['vllm:num_requests_waiting', 'sglang:num_queue_reqs', 'tgi_queue_size', 'llamacpp:requests_deferred']);
}

/** KV-cache usage, 0-1: vLLM, SGLang (token_usage), llama.cpp; TGI exports none. */
export function engineKvCacheUsage(): string {
  return enginePerPod(['vllm:kv_cache_usage_perc', 'sglang:token_usage', 'llamacpp:kv_cache_usage_ratio']);
}

/** Preemptions per second (vLLM: requests evicted from the running batch when the KV cache is full). */
export function enginePreemptionsPerSecond(): string {
  return `${PER_POD} (rate(vllm:num_preemptions_total${ENGINE_SCOPE}${RATE})) and on (${NAMESPACE_LABEL}, pod) ${selectedPods()}`;
}

/** Prefix-cache hit rate: vLLM hits / queries (tokens) over the rate window, else SGLang's cache_hit_rate gauge. */
export function enginePrefixCacheHitRate(): string {
  const rate = (name: string): string => `${PER_POD} (rate(${name}${ENGINE_SCOPE}${RATE}))`;
  const vllm = safeRatio(rate('vllm:prefix_cache_hits_total'), rate('vllm:prefix_cache_queries_total'));
  return `(${vllm} or ${PER_POD} (sglang:cache_hit_rate${ENGINE_SCOPE})) and on (${NAMESPACE_LABEL}, pod) ${selectedPods()}`;
}

/** Mean of one of vLLM's own request histograms (queue, prefill time) per pod. */
export function engineHistogramMean(name: 'vllm:request_queue_time_seconds' | 'vllm:request_prefill_time_seconds'): string {
  const rate = (suffix: string): string => `${PER_POD} (rate(${name}_${suffix}${ENGINE_SCOPE}${RATE}))`;
  return `(${safeRatio(rate('sum'), rate('count'))}) and on (${NAMESPACE_LABEL}, pod) ${selectedPods()}`;
}
