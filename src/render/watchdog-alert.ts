import type { Settings } from '../config/load.js';
import { alertLabels } from './alert-labels.js';
import { dashboardUrl, runbookUrl } from './alert-links.js';
import { LABEL } from './promql.js';
import type { AlertingRule } from './rule-types.js';

/**
 * TokentapWatchdog: always firing, so its absence at the receiving end (a dead man's switch) shows
 * that rule evaluation or alert delivery broke. Named apart from kube-prometheus-stack's own
 * `Watchdog`, which routes and silences would otherwise catch as well. Its labels say it belongs to
 * every workload and no SLO (`workload="*"` cannot clash with a workload, whose name must start
 * with a letter; `slo="none"` is no SLO kind), and severity "none" keeps it out of the page and
 * ticket routes.
 */

export const WATCHDOG_ALERT = 'TokentapWatchdog';

export function watchdogAlert(settings: Settings): AlertingRule {
  return {
    alert: WATCHDOG_ALERT,
    expr: 'vector(1)',
    labels: alertLabels(settings.alerts, 'none', { [LABEL.workload]: '*', [LABEL.slo]: 'none' }),
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
