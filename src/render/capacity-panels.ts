import * as dashboard from '@grafana/grafana-foundation-sdk/dashboard';
import type { Settings } from '../config/load.js';
import { METRICS } from '../metrics/definitions.js';
import { timeSeriesPanel, type Placement } from './dashboard-panels.js';
import { LABEL } from './dashboard-queries.js';
import { CAPACITY_RECORD } from './capacity-rules.js';
import { enginePrefixCacheHitRate } from './engine-queries.js';
import { GENERATIONS_ONLY, NAMESPACE_LABEL } from './promql.js';

/**
 * The row "Capacity and cost" (docs/capacity-and-cost.md). Capacity panels read the recording rules
 * of capacity-rules.ts: the knee logic needs several steps and a week of histograms, which a panel
 * query cannot redo at every refresh; they show "No data" until those rules are loaded. Cost panels
 * read the sidecar's accelerator-time series directly:
 *
 * - accelerator-seconds (`tokentap_accelerator_seconds_total{workload, model, phase}`): each
 *   request's share of its pod's busy time (processor sharing), prefill until its first token and
 *   decode after;
 * - the price per accelerator-hour (`tokentap_accelerator_price_per_hour{currency}`) and the count
 *   (`tokentap_accelerators`), per pod, joined `on (namespace, pod)` before summing, so pods with
 *   different prices each count at their own;
 * - usage basis: cost per request = accelerator-seconds x price / 3600 / requests; per 1M input
 *   tokens the prefill share over input tokens, per 1M output tokens the decode share over output
 *   tokens; allocation basis: every accelerator-second the pods exist (busy and idle) x price,
 *   spread over the requests.
 */
export const CAPACITY_ROW_TITLE = 'Capacity and cost';

const NS = `{{${NAMESPACE_LABEL}}}`;
const IN_NS = `${NAMESPACE_LABEL}=~"$namespace"`;
const SELECTED = `${IN_NS}, ${LABEL.workload}=~"$workload"`;
const NO_RULES = 'No data: are the sidecars scraped and the capacity recording rules of tokentap render loaded (a band counts from capacity.min_samples_per_band requests)?';
const NO_COST = 'No data: are the sidecars scraped, with cost: configured (accelerator price and count)?';

const RATE = '$__rate_interval';

/** Per pod price joined to a per-pod series, then summed by `by`: each pod at its own price. */
function priced(series: string, by: string): string {
  const price = `max by (${NAMESPACE_LABEL}, pod, currency) (tokentap_accelerator_price_per_hour{${IN_NS}})`;
  return `sum by (${by}, currency) (${series} * on (${NAMESPACE_LABEL}, pod) group_left (currency) ${price})`;
}

const requestsRate = (by: string): string => `sum by (${by}) (rate(${METRICS.requests.promName}{${SELECTED}, ${GENERATIONS_ONLY}}[${RATE}]))`;
const acceleratorRate = (phase?: 'prefill' | 'decode'): string =>
  `sum by (${NAMESPACE_LABEL}, pod, ${LABEL.workload}) (rate(tokentap_accelerator_seconds_total{${SELECTED}${phase === undefined ? '' : `, phase="${phase}"`}}[${RATE}]))`;
const tokensRate = (type: 'input' | 'output'): string =>
  `sum by (${NAMESPACE_LABEL}, ${LABEL.workload}) (rate(${METRICS.tokens.promName}{${SELECTED}, ${LABEL.tokenType}="${type}"}[${RATE}]))`;

export function capacityRow(settings: Settings, at: (width: number, height?: number) => Placement): dashboard.RowBuilder {
  const r = CAPACITY_RECORD;
  const mix = r.mix;
  const wl = `{${SELECTED}}`;
  const ns = `{${IN_NS}}`;
  const row = new dashboard.RowBuilder(CAPACITY_ROW_TITLE).id(at(24).id).collapsed(true);
  const by = `${NAMESPACE_LABEL}, ${LABEL.workload}`;
  const panels = [
    timeSeriesPanel(
      {
        title: 'Capacity at SLO per pod (requests in flight)',
        description:
          "Per pod, the highest in-flight band below the first band that broke a TTFT or ITL SLO (its upper bound), over capacity.window, pooling every pod's bands: for every workload together (pod mix) and per workload. 'at least' while no band broke: see the second query (1 = at least). Bands are powers of two: the true capacity lies within the band.",
        unit: 'short',
        min: 0,
        noData: NO_RULES,
        queries: [
          { expr: `${mix.inFlight}${ns}`, legend: `pod mix ${NS}` },
          { expr: `${r.inFlight}${wl}`, legend: `{{workload}} ${NS}` },
          { expr: `${mix.atLeast}${ns}`, legend: `pod mix is "at least" (1) ${NS}` },
        ],
      },
      at(8),
    ),
    timeSeriesPanel(
      {
        title: 'Sustainable requests per second per pod',
        description: "Little's law: capacity in flight / mean e2e over capacity.window. An upper estimate when the e2e at capacity is longer than the window's mean.",
        unit: 'reqps',
        min: 0,
        noData: NO_RULES,
        queries: [
          { expr: `${mix.sustainableRps}${ns}`, legend: `pod mix ${NS}` },
          { expr: `${r.sustainableRps}${wl}`, legend: `{{workload}} ${NS}` },
        ],
      },
      at(8),
    ),
    timeSeriesPanel(
      {
        title: 'Observed peak: requests per second (fleet) and in flight (busiest pod)',
        description: "The highest 5-minute rate of generation requests of every pod together over capacity.peak_window, and the busiest pod's highest scraped requests in flight over the same window.",
        unit: 'short',
        min: 0,
        noData: NO_RULES,
        queries: [
          { expr: `${mix.peakRps}${ns}`, legend: `peak requests/s ${NS}` },
          { expr: `${r.peakInFlight}${ns}`, legend: `peak in flight ${NS}` },
        ],
      },
      at(8),
    ),
    timeSeriesPanel(
      {
        title: 'Headroom',
        description: `1 - peak in flight / capacity. TokentapCapacityHeadroomLow opens a ticket below ${settings.capacity.headroomTicketRatio} for the pod mix once a band has broken (the dashed line).`,
        unit: 'percentunit',
        thresholdLines: [settings.capacity.headroomTicketRatio],
        noData: NO_RULES,
        queries: [
          { expr: `${mix.headroom}${ns}`, legend: `pod mix ${NS}` },
          { expr: `${r.headroom}${wl}`, legend: `{{workload}} ${NS}` },
        ],
      },
      at(8),
    ),
    timeSeriesPanel(
      {
        title: 'Pods needed at the observed and the planned peak, and pods running',
        description: 'ceil(peak requests per second / sustainable requests per second per pod), for the observed peak and for capacity.planned_peak_rps (only when configured); pods running: sidecars scraped now.',
        unit: 'short',
        min: 0,
        noData: NO_RULES,
        queries: [
          { expr: `${mix.podsNeeded}${ns}`, legend: `needed at the observed peak ${NS}` },
          ...(settings.capacity.plannedPeakRps === undefined ? [] : [{ expr: `${mix.podsNeededPlanned}${ns}`, legend: `needed at the planned ${settings.capacity.plannedPeakRps} requests/s ${NS}` }]),
          { expr: `count by (${NAMESPACE_LABEL}) (${r.podInFlight}${ns})`, legend: `running ${NS}` },
        ],
      },
      at(8),
    ),
    timeSeriesPanel(
      {
        title: 'Cost per request (usage and allocation basis)',
        description:
          "Usage basis: the workload's accelerator-seconds (its requests' shares of the pods' busy time) x each pod's price per accelerator-hour / 3600, over its generation requests. Allocation basis: every accelerator-second the pods exist (busy and idle: tokentap_accelerators x price) over every generation request of the namespace.",
        unit: 'currencyUSD',
        min: 0,
        noData: NO_COST,
        queries: [
          { expr: `${priced(acceleratorRate(), by)} / 3600\n/ on (${by}) group_left ()\n(${requestsRate(by)} > 0)`, legend: `{{workload}} usage {{currency}} ${NS}` },
          {
            expr: `${priced(`max by (${NAMESPACE_LABEL}, pod) (tokentap_accelerators{${IN_NS}})`, NAMESPACE_LABEL)} / 3600\n/ on (${NAMESPACE_LABEL}) group_left ()\n(${requestsRate(NAMESPACE_LABEL)} > 0)`,
            legend: `allocation {{currency}} ${NS}`,
          },
        ],
      },
      at(8),
    ),
    timeSeriesPanel(
      {
        title: 'Cost per 1M input and output tokens (usage basis)',
        description: "Prefill accelerator-seconds x price over input tokens, and decode over output tokens, x 1,000,000: the llm-d/OpenCost llm_cost_per_million_tokens at cost_basis=usage.",
        unit: 'currencyUSD',
        min: 0,
        noData: NO_COST,
        queries: [
          { expr: `${priced(acceleratorRate('prefill'), by)} / 3600 * 1e6\n/ on (${by}) group_left ()\n(${tokensRate('input')} > 0)`, legend: `{{workload}} per 1M input {{currency}} ${NS}` },
          { expr: `${priced(acceleratorRate('decode'), by)} / 3600 * 1e6\n/ on (${by}) group_left ()\n(${tokensRate('output')} > 0)`, legend: `{{workload}} per 1M output {{currency}} ${NS}` },
        ],
      },
      at(8),
    ),
    timeSeriesPanel(
      {
        title: 'Accelerator-seconds per request and busy share of the pods',
        description: "p50 and p99 of each request's accelerator-seconds (tokentap_request_accelerator_seconds), and the share of the pods' time with at least one request in flight (busy / (busy + idle)).",
        unit: 'short',
        min: 0,
        noData: NO_COST,
        queries: [
          { expr: `histogram_quantile(0.5, sum by (le, ${by}) (rate(tokentap_request_accelerator_seconds_bucket{${SELECTED}}[${RATE}])))`, legend: `{{workload}} p50 s ${NS}` },
          { expr: `histogram_quantile(0.99, sum by (le, ${by}) (rate(tokentap_request_accelerator_seconds_bucket{${SELECTED}}[${RATE}])))`, legend: `{{workload}} p99 s ${NS}` },
          {
            expr: `sum by (${NAMESPACE_LABEL}) (rate(tokentap_pod_busy_seconds_total${ns}[${RATE}]))\n/\n(sum by (${NAMESPACE_LABEL}) (rate(tokentap_pod_busy_seconds_total${ns}[${RATE}]) + rate(tokentap_pod_idle_seconds_total${ns}[${RATE}])) > 0)`,
            legend: `busy share ${NS}`,
          },
        ],
      },
      at(8),
    ),
    timeSeriesPanel(
      {
        title: 'Cached input share per request',
        description:
          "Mean share of a request's input tokens the server reported as cached (prefix-cache hits, tokentap_request_cached_input_ratio), and the request-level hit rate: the share of reporting requests with any cached input. Beside them the engine's own pod-level hit rate (vLLM prefix_cache_hits / prefix_cache_queries, SGLang cache_hit_rate), weighted by tokens and counting every client of the engine, for the pods that served the workload.",
        unit: 'percentunit',
        min: 0,
        noData: NO_COST,
        queries: [
          {
            expr: `sum by (${by}) (rate(tokentap_request_cached_input_ratio_sum{${SELECTED}}[${RATE}]))\n/\n(sum by (${by}) (rate(tokentap_request_cached_input_ratio_count{${SELECTED}}[${RATE}])) > 0)`,
            legend: `{{workload}} mean cached share ${NS}`,
          },
          {
            expr: `sum by (${by}) (rate(tokentap_requests_with_cached_input_total{${SELECTED}}[${RATE}]))\n/\n(sum by (${by}) (rate(tokentap_request_cached_input_ratio_count{${SELECTED}}[${RATE}])) > 0)`,
            legend: `{{workload}} requests with cached input ${NS}`,
          },
          // The engine's series carry no workload: per pod, of the pods that served the selected workloads (engine-queries.ts).
          { expr: enginePrefixCacheHitRate(), legend: `engine hit rate (tokens) {{pod}} ${NS}` },
        ],
      },
      at(8),
    ),
  ];
  for (const panel of panels) row.withPanel(panel);
  return row;
}
