import type { Settings } from '../config/load.js';
import { BUILD_INFO } from '../metrics/definitions.js';
import { alertLabels } from './alert-labels.js';
import { dashboardUrl, runbookUrl } from './alert-links.js';
import { formatPromDuration } from './prometheus-duration.js';
import { NAMESPACE_LABEL, selector } from './promql.js';
import { scaledMs, type AlertingRule, type RenderOptions } from './rule-types.js';

/**
 * TokentapMetricsAbsent: no tokentap sidecar series where the configuration says there must be some,
 * so every SLO alert there is blind. One rule per namespace in `alerts.expected_namespaces`
 * (`absent(tokentap_build_info{namespace="prod"})`), or, without that list, one for the whole
 * Prometheus (`absent(tokentap_build_info)`: no sidecar scraped anywhere, e.g. a PodMonitor
 * kube-prometheus-stack does not select).
 *
 * `absent()` only knows the labels written in its selector, which is why the namespaces are listed
 * rather than discovered; in exchange it fires for a namespace that was never scraped, and keeps
 * firing for as long as the metrics are missing. A rule that remembers namespaces from past series
 * cannot do either: it has nothing to remember for a sidecar never scraped, and forgets (sending a
 * "resolved") a while after the metrics vanished.
 *
 * tokentap_build_info is exported by every sidecar from its start, before any request, and goes
 * stale within one scrape when the scrape fails or the target disappears.
 */

export const ABSENT_ALERT = 'TokentapMetricsAbsent';

export function absentMetricsAlerts(settings: Settings, options: RenderOptions): AlertingRule[] {
  const forDuration = formatPromDuration(scaledMs(settings.alerts.absentForMs, options));
  const namespaces = settings.alerts.expectedNamespaces;
  if (namespaces.length === 0) return [absentRule(settings, forDuration, undefined)];
  return namespaces.map((namespace) => absentRule(settings, forDuration, namespace));
}

function absentRule(settings: Settings, forDuration: string, namespace: string | undefined): AlertingRule {
  const info = BUILD_INFO.promName;
  const where = namespace === undefined ? ' in this Prometheus' : ` in namespace ${namespace}`;
  return {
    alert: ABSENT_ALERT,
    expr: `absent(${selector(info, namespace === undefined ? {} : { [NAMESPACE_LABEL]: namespace })})`,
    for: forDuration,
    // absent() gives the namespace label from its selector; written here too so that the rule reads alone.
    labels: alertLabels(settings.alerts, 'ticket', namespace === undefined ? {} : { [NAMESPACE_LABEL]: namespace }),
    annotations: {
      summary: `no tokentap sidecar metrics${where}`,
      description:
        `No ${info} series${where} for at least ${forDuration}: no tokentap sidecar${where} is being scraped successfully, or none ever was. ` +
        'The SLO alerts of its workloads cannot fire while their metrics are missing. ' +
        'This alert keeps firing until the metrics are back.',
      runbook_url: runbookUrl(settings.alerts, ABSENT_ALERT),
      dashboard_url: dashboardUrl(settings.alerts),
    },
  };
}
