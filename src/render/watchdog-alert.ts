import type { Settings } from '../config/load.js';
import { alertLabels } from './alert-labels.js';
import { dashboardUrl, runbookUrl } from './alert-links.js';
import type { AlertingRule } from './rule-types.js';

/**
 * TokentapWatchdog: always firing, so its absence at the receiving end (a dead man's switch) shows
 * that rule evaluation or alert delivery broke. Named apart from kube-prometheus-stack's own
 * `Watchdog`, which routes and silences would otherwise catch as well. It is about the rule
 * pipeline, not about a workload, SLO or namespace, so it carries none of those labels: only
 * severity "none", which keeps it out of the page and ticket routes and out of every inhibition
 * (alertmanager-routes.ts: their targets are the ticket severity and the P99 alert), and the
 * configured static labels (team, service) that users' own routes may select on.
 */

export const WATCHDOG_ALERT = 'TokentapWatchdog';

export function watchdogAlert(settings: Settings): AlertingRule {
  return {
    alert: WATCHDOG_ALERT,
    expr: 'vector(1)',
    labels: alertLabels(settings.alerts, 'none', {}),
    annotations: {
      summary: 'tokentap alerting pipeline is working (always firing)',
      description:
        'This alert always fires. It shows that Prometheus evaluates the tokentap rules and Alertmanager delivers them. ' +
        "Route it to a dead man's switch that raises an alarm when it stops arriving.",
      runbook_url: runbookUrl(settings.alerts, WATCHDOG_ALERT),
      dashboard_url: dashboardUrl(settings.alerts),
    },
  };
}
