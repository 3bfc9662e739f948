import type { Settings, TtftOn } from '../config/load.js';
import { METRICS, type HistogramKey } from '../metrics/definitions.js';
import { alertLabels } from './alert-labels.js';
import { dashboardUrl, runbookUrl } from './alert-links.js';
import { causesHint } from './engine-panels.js';
import { humanSeconds } from './human-format.js';
import { IN_NAMESPACE } from './namespace-template.js';
import { formatPromDuration } from './prometheus-duration.js';
import { LABEL, WORKLOAD_KEY, labelList, promNumber, selector } from './promql.js';
import { RATE_WINDOW_MS, RECORD, type LatencyName } from './recording-rules.js';
import { scaledMs, type AlertingRule, type RenderOptions } from './rule-types.js';
import { GUARD_MATCH } from './traffic-guard.js';

/**
 * TokentapTTFTP99OverBudget: the alert on-call teams ask for by name, a ticket by default. The
 * burn-rate page (burn-rate-alerts.ts) is what pages: a P99 over budget is also true of a 2x burn
 * that costs a month's budget in 15 days, so paging on it would page for what the burn-rate policy
 * deliberately waits on, and page twice for a real incident. Alertmanager holds it back while a
 * burn-rate page for the same namespace, workload and SLO fires (alertmanager-routes.ts).
 *
 * It reads the per-workload P99 (histogram_quantile over the classic buckets, recording-rules.ts, or
 * over the native histograms, native-recording-rules.ts).
 * Because the TTFT threshold is a bucket boundary, the estimated P99 is above the threshold exactly
 * when more than 1 % of the window's first tokens came later than it; its value is a linear
 * interpolation inside one bucket, which the description names.
 */

export const P99_TTFT_ALERT = 'TokentapTTFTP99OverBudget';

/**
 * A Go template (Prometheus expands it per alert) naming the bucket the estimated P99 lies in:
 * histogram_quantile interpolates linearly between the bounds of the bucket holding rank 0.99, and
 * returns the largest finite bound when that rank falls into the +Inf bucket.
 */
/** A Go template float literal: `le`/`ge` refuse to compare the float64 `$value` with an integer literal such as `80`. */
function goFloat(value: number): string {
  const text = promNumber(value);
  return /^-?\d+$/.test(text) ? `${text}.0` : text;
}

export function bucketBoundsText(buckets: readonly number[], thresholdS: number): string {
  const above = buckets.filter((b) => b > thresholdS);
  const largest = buckets[buckets.length - 1] as number;
  const ladder = above.map((upper, i) => {
    const lower = i === 0 ? thresholdS : (above[i - 1] as number);
    return `{{ else if le $value ${goFloat(upper)} }}between the bucket bounds ${humanSeconds(lower)} and ${humanSeconds(upper)}`;
  });
  const beyond = `at or above the largest bucket bound, ${humanSeconds(largest)} (how far above, the buckets cannot tell)`;
  return `{{ if ge $value ${goFloat(largest)} }}${beyond}${ladder.join('')}{{ else }}above ${humanSeconds(thresholdS)}{{ end }}`;
}

/**
 * What a workload's TTFT SLO measures to (its `ttft_on`), so its P99 alert reads the same: the first
 * token of any kind, or the first answer token, which a reasoning model sends after its reasoning
 * (docs/engine-timings.md). Both histograms have the configured TTFT buckets and every threshold as a bound.
 */
const TTFT_MEASURES = {
  first_token: { latency: 'ttft', histogram: METRICS.ttft, buckets: 'ttft', title: 'TTFT', name: 'time to first token', histogramName: 'TTFT', samples: 'first tokens' },
  first_answer: {
    latency: 'ttft_answer',
    histogram: METRICS.ttftAnswer,
    buckets: 'ttftAnswer',
    title: 'TTFT to the first answer token',
    name: 'time to first answer token',
    histogramName: 'first-answer-token',
    samples: 'first answer tokens',
  },
} as const satisfies Record<TtftOn, { latency: LatencyName; buckets: HistogramKey; [text: string]: unknown }>;

/** The samples a workload's histogram took over `range`, from its classic `_count` or its native series. */
function sampleCount(histogram: string, workload: string, range: string, options: RenderOptions): string {
  const by = labelList(...WORKLOAD_KEY);
  if (options.histograms === 'native') return `histogram_count(sum by (${by}) (increase(${selector(histogram, { [LABEL.workload]: workload })}[${range}])))`;
  return `sum by (${by}) (increase(${selector(`${histogram}_count`, { [LABEL.workload]: workload })}[${range}]))`;
}

export function p99TtftAlerts(settings: Settings, options: RenderOptions): AlertingRule[] {
  const level = settings.alerts.p99TtftLevel;
  if (level === 'off') return [];
  const range = formatPromDuration(scaledMs(RATE_WINDOW_MS, options));
  const forDuration = formatPromDuration(scaledMs(settings.alerts.p99TtftForMs, options));
  const minRequests = settings.alerts.p99TtftMinRequests;
  const rules: AlertingRule[] = [];
  for (const workload of settings.workloads) {
    const thresholdS = workload.slo?.thresholdsS.ttft;
    if (thresholdS === undefined) continue;
    const measure = TTFT_MEASURES[workload.slo?.ttftOn ?? 'first_token'];
    const p99 = selector(RECORD.quantile(measure.latency, 0.99), { [LABEL.workload]: workload.name });
    // The guard counts the samples behind the quantile (first tokens), not requests in general, in
    // the series the quantile reads: a Prometheus that ingests native histograms stores no `_count`
    // of them (2.x with the native-histograms flag), and a guard over `_count` never held there.
    const samples = `${sampleCount(measure.histogram.promName, workload.name, range, options)} >= ${promNumber(minRequests)}`;
    rules.push({
      alert: P99_TTFT_ALERT,
      expr: `${p99} > ${promNumber(thresholdS)}\n${GUARD_MATCH}\n${samples}`,
      for: forDuration,
      labels: alertLabels(settings.alerts, level, { [LABEL.workload]: workload.name, [LABEL.slo]: 'ttft' }),
      annotations: {
        summary: `${workload.name}${IN_NAMESPACE}: P99 ${measure.title} above its ${humanSeconds(thresholdS)} threshold`,
        description:
          `The P99 ${measure.name} of ${workload.name}${IN_NAMESPACE} over the last ${range} is estimated at {{ $value | humanizeDuration }}, ` +
          `above the ${humanSeconds(thresholdS)} threshold, and has been for at least ${forDuration}. ` +
          `The estimate interpolates within the ${measure.histogramName} histogram's buckets: the true P99 lies ${bucketBoundsText(settings.buckets[measure.buckets], thresholdS)}. ` +
          `Counted while the workload has at least ${promNumber(minRequests)} ${measure.samples} per ${range}. ${causesHint(workload.name, 'ttft')}`,
        runbook_url: runbookUrl(settings.alerts, P99_TTFT_ALERT),
        dashboard_url: dashboardUrl(settings.alerts, workload.name),
      },
    });
  }
  return rules;
}
