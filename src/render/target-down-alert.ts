import type { Settings } from '../config/load.js';
import { alertLabels } from './alert-labels.js';
import { dashboardUrl, runbookUrl } from './alert-links.js';
import { IN_NAMESPACE } from './namespace-template.js';
import { formatPromDuration } from './prometheus-duration.js';
import { scaledMs, type AlertingRule, type RenderOptions } from './rule-types.js';

/**
 * TokentapTargetDown: Prometheus knows a sidecar's scrape target but cannot scrape it (`up == 0`):
 * the sidecar crashed or hangs, its admin port is closed or blocked, while the pod is still there.
 * One alert per target. `alerts.scrape_selector` picks the sidecars' own targets out of `up`; the
 * default matches the `tokentap` PodMonitor of deploy/kubernetes (job `<namespace>/tokentap`,
 * endpoint `metrics`, leaving out the engine's endpoint `8000` of the same PodMonitor) and a plain
 * `job_name: tokentap` scrape.
 *
 * A target that disappears (pod deleted, PodMonitor gone or no longer selected) has no `up` series
 * left and this alert resolves; TokentapMetricsAbsent (absent-metrics-alert.ts) covers that case
 * for the namespaces the configuration names.
 */

export const TARGET_DOWN_ALERT = 'TokentapTargetDown';

export function targetDownAlert(settings: Settings, options: RenderOptions): AlertingRule {
  const forDuration = formatPromDuration(scaledMs(settings.alerts.absentForMs, options));
  return {
    alert: TARGET_DOWN_ALERT,
    expr: `up{${settings.alerts.scrapeSelector}} == 0`,
    for: forDuration,
    labels: alertLabels(settings.alerts, 'ticket', {}),
    annotations: {
      summary: `tokentap sidecar target {{ $labels.instance }} down${IN_NAMESPACE}`,
      description:
        `Prometheus has failed to scrape the tokentap sidecar at {{ $labels.instance }}{{ with $labels.pod }} (pod {{ . }}){{ end }}${IN_NAMESPACE} (job {{ $labels.job }}) for at least ${forDuration}. ` +
        'The SLO alerts of the workloads it serves see none of its requests while it is down.',
      runbook_url: runbookUrl(settings.alerts, TARGET_DOWN_ALERT),
      dashboard_url: dashboardUrl(settings.alerts),
    },
  };
}
