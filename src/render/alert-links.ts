import type { AlertSettings } from '../config/load.js';
import { TokentapError } from '../errors.js';
import { SLO_OVERVIEW_UID } from './dashboards.js';
import { NAMESPACE_URL_PARAMETER } from './namespace-template.js';

/**
 * The links every alert carries: its runbook under docs/runbooks/ and the SLO dashboard on the
 * configured Grafana, filtered to the alert's workload and namespace.
 */

/** The runbook file of an alert, and of one SLO kind for the burn-rate alert: `TokentapErrorBudgetBurn-ttft.md`. */
export function runbookFile(alertname: string, slo?: string): string {
  return `${alertname}${slo === undefined ? '' : `-${slo}`}.md`;
}

export function runbookUrl(alerts: AlertSettings, alertname: string, slo?: string): string {
  return `${alerts.runbookBaseUrl}/${runbookFile(alertname, slo)}`;
}

/** The refusal `tokentap render` gives without `alerts.grafana_url`, naming the config file when there is one. */
export function missingGrafanaUrl(configFile: string | undefined): TokentapError {
  return new TokentapError('TOKENTAP_ERR_CONFIG_INVALID', [
    `${configFile === undefined ? '' : `${configFile}: `}alerts.grafana_url: required by tokentap render: the absolute URL of the Grafana that shows the tokentap dashboards, e.g. https://grafana.example.com (every alert links to its dashboard there)`,
  ]);
}

function grafanaUrl(alerts: AlertSettings): string {
  if (alerts.grafanaUrl === undefined) throw missingGrafanaUrl(undefined);
  return alerts.grafanaUrl;
}

/**
 * The SLO dashboard's absolute URL with Grafana's `var-workload` set, and `var-namespace` when the
 * alert has a namespace (a template Prometheus expands per alert).
 */
export function dashboardUrl(alerts: AlertSettings, workload?: string): string {
  const base = `${grafanaUrl(alerts)}/d/${SLO_OVERVIEW_UID}`;
  if (workload === undefined) return `${base}?${NAMESPACE_URL_PARAMETER.replace('&', '')}`;
  return `${base}?var-workload=${encodeURIComponent(workload)}${NAMESPACE_URL_PARAMETER}`;
}
