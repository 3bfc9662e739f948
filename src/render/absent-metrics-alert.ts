import type { Settings } from '../config/load.js';
import { METRICS } from '../metrics/definitions.js';
import { alertLabels } from './alert-labels.js';
import { dashboardUrl, runbookUrl } from './alert-links.js';
import { IN_NAMESPACE } from './namespace-template.js';
import { formatPromDuration } from './prometheus-duration.js';
import { NAMESPACE_LABEL } from './promql.js';
import { scaledMs, type AlertingRule, type RenderOptions } from './rule-types.js';

/**
 * TokentapMetricsAbsent: a namespace whose sidecars were scraped within the last hour has no
 * sidecar series now (the pods are gone, the scrape fails, the PodMonitor was deleted or stopped
 * matching). Every SLO alert of that namespace is blind then. One alert per namespace without
 * listing namespaces: the rules are rendered once for the whole cluster.
 *
 * `absent()` cannot do this per namespace (it only knows the labels written in its selector), so
 * the namespaces that had `tokentap_requests_total` over the lookback are compared with those that
 * have it now. A scrape that fails marks its series stale at once, so they drop out of the second
 * set within one scrape. After the lookback the namespace is forgotten and the alert resolves.
 */

export const ABSENT_ALERT = 'TokentapMetricsAbsent';

/** How long a namespace is remembered after its sidecar metrics vanished. */
export const ABSENT_LOOKBACK_MS = 3_600_000;

export function absentMetricsAlert(settings: Settings, options: RenderOptions): AlertingRule {
  const requests = METRICS.requests.promName;
  const lookback = formatPromDuration(scaledMs(ABSENT_LOOKBACK_MS, options));
  const forDuration = formatPromDuration(scaledMs(settings.alerts.absentForMs, options));
  return {
    alert: ABSENT_ALERT,
    expr: [
      `count by (${NAMESPACE_LABEL}) (last_over_time(${requests}[${lookback}]))`,
      `unless on (${NAMESPACE_LABEL})`,
      `count by (${NAMESPACE_LABEL}) (${requests})`,
    ].join('\n'),
    for: forDuration,
    labels: alertLabels(settings.alerts, 'ticket', {}),
    annotations: {
      summary: `tokentap sidecar metrics gone${IN_NAMESPACE}`,
      description:
        `No ${requests} series${IN_NAMESPACE} has been scraped for at least ${forDuration}, although there were some in the last ${lookback}. ` +
        'The SLO alerts of these workloads cannot fire while their metrics are missing. ' +
        `This alert resolves when the metrics come back, or ${lookback} after they vanished.`,
      runbook_url: runbookUrl(settings.alerts, ABSENT_ALERT),
      dashboard_url: dashboardUrl(settings.alerts),
    },
  };
}
