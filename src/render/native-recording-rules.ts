import { SLO_KINDS, type Settings, type SloKind } from '../config/load.js';
import { METRICS, type MetricDefinition } from '../metrics/definitions.js';
import { SLI_WINDOWS, type SliWindowName } from './burn-rate-windows.js';
import { formatPromDuration } from './prometheus-duration.js';
import { LABEL, WORKLOAD_KEY, labelList, promNumber, selector } from './promql.js';
import { LATENCIES, QUANTILES, RATE_WINDOW_MS, RECORD, sliRecordingRules, type LatencyName } from './recording-rules.js';
import { scaledMs, type RecordingRule, type RenderOptions } from './rule-types.js';

/**
 * The native-histogram variant of the SLI and quantile recording rules (`tokentap render
 * --histograms native`, or `metrics.histograms: native`): the same record names and labels as
 * recording-rules.ts, so the burn-rate and P99 alerts and the dashboards read them unchanged, but
 * computed from Prometheus native histograms (one series per histogram, no `_bucket`):
 *
 * - SLI error ratio = 1 - histogram_fraction(0, threshold, rate(...)) over the SLO's latency
 *   histogram, one rule per workload and SLO (the threshold is a literal). Exact where the threshold
 *   is a bucket boundary of the schema (a power of two such as 0.25 s, 0.5 s, 1 s at any schema;
 *   2^(k/8) at schema 3); elsewhere histogram_fraction interpolates inside the one bucket that
 *   straddles the threshold, so the error is at most that bucket's share of the events
 *   (docs/native-histograms.md).
 * - It counts what the histograms hold: requests abandoned before a first token are not in the TTFT
 *   histogram, and the e2e histogram holds failed requests by their duration. The classic rules read
 *   tokentap_slo_events_total, which counts both as bad; these cannot.
 * - Quantiles: histogram_quantile over the summed native rates.
 *
 * Needs native histograms ingested: Prometheus 2.40..2.x with `--enable-feature=native-histograms`
 * (histogram_fraction, histogram_quantile, histogram_count and histogram_sum are there since 2.40;
 * promtool of the Debian 2.42 accepts these rules), Prometheus 3.x with the same flag or, from 3.8,
 * `scrape_native_histograms: true`.
 */

/** The histogram each SLO is judged on: per token for ITL, as the SLO is. */
const SLO_HISTOGRAM: Record<SloKind, MetricDefinition> = {
  ttft: METRICS.ttft,
  itl: METRICS.itlToken,
  e2e: METRICS.e2e,
};

function nativeErrorRatioRule(workload: string, slo: SloKind, thresholdS: number, windowName: SliWindowName, windowMs: number, options: RenderOptions): RecordingRule {
  const range = formatPromDuration(scaledMs(windowMs, options));
  const rate = `sum by (${labelList(...WORKLOAD_KEY)}) (rate(${selector(SLO_HISTOGRAM[slo].promName, { [LABEL.workload]: workload })}[${range}]))`;
  // No events in the window: histogram_fraction of an empty histogram is NaN; `histogram_count > 0`
  // leaves no sample instead, as the classic rule does.
  return {
    record: RECORD.errorRatio(windowName),
    expr: [`1 - histogram_fraction(0, ${promNumber(thresholdS)}, ${rate})`, `and on (${labelList(...WORKLOAD_KEY)})`, `(histogram_count(${rate}) > 0)`].join('\n'),
    // `workload` too, though the expression keeps it: promtool's lint refuses two rules with one
    // record name and the same rule labels.
    labels: { [LABEL.workload]: workload, [LABEL.slo]: slo },
  };
}

/** Per workload and SLO with a threshold: the error ratio over every burn-rate window. */
export function nativeErrorRatioRules(settings: Settings, options: RenderOptions): RecordingRule[] {
  const rules: RecordingRule[] = [];
  for (const window of SLI_WINDOWS) {
    for (const workload of settings.workloads) {
      for (const slo of SLO_KINDS) {
        const thresholdS = workload.slo?.thresholdsS[slo];
        if (thresholdS !== undefined) rules.push(nativeErrorRatioRule(workload.name, slo, thresholdS, window.name, window.ms, options));
      }
    }
  }
  return rules;
}

/** The SLI rules of recording-rules.ts with the error ratios computed from native histograms; the objective and threshold constants as they are. */
export function nativeSliRecordingRules(settings: Settings, options: RenderOptions): RecordingRule[] {
  const classicRatios = new Set<string>(SLI_WINDOWS.map((w) => RECORD.errorRatio(w.name)));
  return [...nativeErrorRatioRules(settings, options), ...sliRecordingRules(settings, options).filter((rule) => !classicRatios.has(rule.record))];
}

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
