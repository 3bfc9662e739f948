import type { Settings } from '../config/load.js';
import { METRICS } from '../metrics/definitions.js';
import { alertLabels } from './alert-labels.js';
import { dashboardUrl, runbookUrl } from './alert-links.js';
import { IN_NAMESPACE } from './namespace-template.js';
import { LABEL, NAMESPACE_LABEL } from './promql.js';
import { RECORD } from './recording-rules.js';
import { formatPromDuration } from './prometheus-duration.js';
import { scaledMs, type AlertingRule, type RenderOptions } from './rule-types.js';

/**
 * TokentapSLONotInRules: a ticket for a workload whose sidecars count SLO events that no rendered
 * rule reads. The rules are rendered once for the cluster from one configuration (docs/alerts.md,
 * "Installing"), the sidecars read their own: a workload or SLO added to a sidecar's configuration
 * and not to the rules' is measured, shown on the dashboard, and never pages, however fast it burns.
 * Each rendered workload and SLO records its objective as a constant (tokentap:slo_objective:ratio
 * {workload, slo}), so an event series without one is a workload and SLO the rules do not know.
 *
 * `for` an hour: sidecars and rules roll out separately, and a new workload's first hour before the
 * re-rendered rules arrive is no fault.
 */

export const SLO_NOT_IN_RULES_ALERT = 'TokentapSLONotInRules';
const FOR_MS = 3_600_000;

export function sloNotInRulesAlert(settings: Settings, options: RenderOptions): AlertingRule {
  const events = METRICS.sloEvents.promName;
  const forDuration = formatPromDuration(scaledMs(FOR_MS, options));
  return {
    alert: SLO_NOT_IN_RULES_ALERT,
    expr: `count by (${NAMESPACE_LABEL}, ${LABEL.workload}) (${events} unless on (${LABEL.workload}, ${LABEL.slo}) ${RECORD.objective})`,
    for: forDuration,
    labels: alertLabels(settings.alerts, 'ticket', {}),
    annotations: {
      summary: `workload {{ $labels.workload }}${IN_NAMESPACE} has SLOs no tokentap rule reads: it cannot page`,
      description:
        `The tokentap sidecars${IN_NAMESPACE} have counted SLO events (${events}) of workload {{ $labels.workload }} for at least ${forDuration} for an SLO the rendered rules do not have: ` +
        "their configuration has a workload or SLO that the configuration the rules were rendered from lacks. Its error budget is not watched: render the rules again from a configuration with this workload's SLOs and apply them.",
      runbook_url: runbookUrl(settings.alerts, SLO_NOT_IN_RULES_ALERT),
      dashboard_url: dashboardUrl(settings.alerts),
    },
  };
}
