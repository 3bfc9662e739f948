import type { Settings } from '../config/load.js';
import { UPSTREAM_READY } from '../metrics/definitions.js';
import { alertLabels } from './alert-labels.js';
import { dashboardUrl, runbookUrl } from './alert-links.js';
import { IN_NAMESPACE } from './namespace-template.js';
import { formatPromDuration } from './prometheus-duration.js';
import { NAMESPACE_LABEL } from './promql.js';
import { scaledMs, type AlertingRule, type RenderOptions } from './rule-types.js';

/**
 * TokentapUpstreamDown: a page when no sidecar of a namespace has a healthy upstream, for
 * `alerts.absent_for`. The SLO alerts cannot see this outage: the readiness probe (/readyz) fails
 * with the model server, the kubelet takes every pod out of the Service, clients' requests stop at
 * the Service or the ingress, and the sidecars have no request to count as bad. The few that failed
 * before the probe did are a second's worth of an hour's events, far below a burn rate of 14.4.
 * Every sidecar still answers its scrapes, so TokentapTargetDown and TokentapMetricsAbsent stay
 * silent too. What the sidecars do see is their readiness probes failing: tokentap_upstream_ready.
 *
 * Per namespace, as tokentap's other alerts: the page means nothing in the namespace can serve.
 * A pod whose model server alone is down (the others serve) is capacity, not an outage, and does
 * not page. Two Deployments in one namespace are one for this alert: one of them down while the
 * other serves does not page.
 */

export const UPSTREAM_DOWN_ALERT = 'TokentapUpstreamDown';

export function upstreamDownAlert(settings: Settings, options: RenderOptions): AlertingRule {
  const forDuration = formatPromDuration(scaledMs(settings.alerts.absentForMs, options));
  return {
    alert: UPSTREAM_DOWN_ALERT,
    expr: `max by (${NAMESPACE_LABEL}) (${UPSTREAM_READY.promName}) == 0`,
    for: forDuration,
    labels: alertLabels(settings.alerts, 'page', {}),
    annotations: {
      summary: `no tokentap sidecar${IN_NAMESPACE} has a healthy upstream: the model server is down`,
      description:
        `Every tokentap sidecar${IN_NAMESPACE} has found its upstream (the model server) unhealthy at its readiness probes for at least ${forDuration}: ` +
        'its health endpoint failed, answered 500 or more, or did not answer in time. The pods are out of their Service, so clients get errors ' +
        'before any request reaches a sidecar, and the SLO alerts, which count requests, see none of them.',
      runbook_url: runbookUrl(settings.alerts, UPSTREAM_DOWN_ALERT),
      dashboard_url: dashboardUrl(settings.alerts),
    },
  };
}
