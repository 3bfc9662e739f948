import { formatPromDuration } from './prometheus-duration.js';
import { WORKLOAD_KEY, labelList } from './promql.js';
import { LATENCIES, QUANTILES, RATE_WINDOW_MS, RECORD, type LatencyName } from './recording-rules.js';
import { scaledMs, type RecordingRule, type RenderOptions } from './rule-types.js';

/**
 * The native-histogram variant of the quantile recording rules (`tokentap render --histograms
 * native`, or `metrics.histograms: native`): the same record names and labels as
 * recording-rules.ts, so the P99 alert and the dashboards read them unchanged, computed with
 * histogram_quantile over the summed native rates (one series per histogram, no `_bucket`).
 *
 * The SLI error ratios are not here: they read tokentap_slo_events_total in both variants
 * (recording-rules.ts). That counter is exact at every configured threshold and counts what no
 * latency histogram holds: a request that failed or was abandoned before its first token is bad for
 * TTFT, and a failed request bad for e2e at any duration. An SLI from histogram_fraction over the
 * TTFT and e2e histograms saw an upstream answering 503 to every request as no TTFT event and a
 * fast, good e2e event, and never paged (test/e2e/alerts-both-scrapes.test.ts).
 *
 * Needs native histograms ingested: Prometheus 2.40..2.x with `--enable-feature=native-histograms`
 * (histogram_quantile, histogram_count and histogram_sum are there since 2.40; promtool of the
 * Debian 2.42 accepts these rules), Prometheus 3.x with the same flag or, from 3.8,
 * `scrape_native_histograms: true`.
 */

/** Per workload: p50, p90 and p99 of TTFT, ITL and e2e from the native histograms. */
export function nativeLatencyRecordingRules(options: RenderOptions): RecordingRule[] {
  const range = formatPromDuration(scaledMs(RATE_WINDOW_MS, options));
  return Object.entries(LATENCIES).flatMap(([name, metric]) =>
    QUANTILES.map((q) => ({
      record: RECORD.quantile(name as LatencyName, q),
      expr: `histogram_quantile(${q}, sum by (${labelList(...WORKLOAD_KEY)}) (rate(${metric.promName}[${range}])))`,
    })),
  );
}
