import type { Settings } from '../config/load.js';
import { dashboardUrl, runbookUrl } from './alert-links.js';
import { causesHint } from './engine-panels.js';
import { humanSeconds } from './human-format.js';
import { IN_NAMESPACE } from './namespace-template.js';
import { formatPromDuration } from './prometheus-duration.js';
import { LABEL, promNumber, selector } from './promql.js';
import { RATE_WINDOW_MS, RECORD } from './recording-rules.js';
import { scaledMs, type AlertingRule, type RenderOptions } from './rule-types.js';
import { GUARD_MATCH, trafficGuard } from './traffic-guard.js';

/**
 * TokentapTTFTP99OverBudget: the alert on-call teams ask for by name. It reads the per-workload P99
 * (histogram_quantile over the classic buckets, recording-rules.ts). Because the TTFT threshold is
 * a bucket boundary, the interpolated P99 is above the threshold exactly when more than 1 % of the
 * window's first tokens came later than it.
 */

export const P99_TTFT_ALERT = 'TokentapTTFTP99OverBudget';

export function p99TtftAlerts(settings: Settings, options: RenderOptions): AlertingRule[] {
  const range = formatPromDuration(scaledMs(RATE_WINDOW_MS, options));
  const forDuration = formatPromDuration(scaledMs(settings.alerts.p99TtftForMs, options));
  const rules: AlertingRule[] = [];
  for (const workload of settings.workloads) {
    const thresholdS = workload.slo?.thresholdsS.ttft;
    if (thresholdS === undefined) continue;
    const p99 = selector(RECORD.quantile('ttft', 0.99), { [LABEL.workload]: workload.name });
    rules.push({
      alert: P99_TTFT_ALERT,
      expr: `${p99} > ${promNumber(thresholdS)}\n${GUARD_MATCH}\n${trafficGuard(workload.name, range, settings.alerts.minRequestsPerHour)}`,
      for: forDuration,
      labels: { severity: settings.alerts.p99TtftSeverity, [LABEL.workload]: workload.name, [LABEL.slo]: 'ttft' },
      annotations: {
        summary: `${workload.name}${IN_NAMESPACE}: P99 TTFT above its ${humanSeconds(thresholdS)} budget`,
        description:
          `P99 time to first token of ${workload.name}${IN_NAMESPACE} over the last ${range} is {{ $value | humanizeDuration }}, ` +
          `above its ${humanSeconds(thresholdS)} budget, and has been for at least ${forDuration} ` +
          `(counted while the workload serves at least ${promNumber(settings.alerts.minRequestsPerHour)} requests per hour). ${causesHint(workload.name, 'ttft')}`,
        runbook_url: runbookUrl(settings.alerts, P99_TTFT_ALERT),
        dashboard_url: dashboardUrl(settings.alerts, workload.name),
      },
    });
  }
  return rules;
}
