import type { AlertSettings } from '../config/load.js';
import { NAMESPACE_URL_PARAMETER } from './namespace-template.js';

/**
 * The links every alert carries: its runbook (an anchor named after the alert, as the README's
 * headings are) and the dashboard filtered to the alert's workload and namespace.
 */

export function runbookUrl(alerts: AlertSettings, alertname: string): string {
  return `${alerts.runbookUrl}#${alertname.toLowerCase()}`;
}

/**
 * The dashboard URL with Grafana's `var-workload` set, and `var-namespace` when the alert has a
 * namespace (a template Prometheus expands per alert); the URL may be a path ("/d/uid") or absolute.
 */
export function dashboardUrl(alerts: AlertSettings, workload?: string): string {
  if (workload === undefined) return alerts.dashboardUrl;
  const separator = alerts.dashboardUrl.includes('?') ? '&' : '?';
  return `${alerts.dashboardUrl}${separator}var-workload=${encodeURIComponent(workload)}${NAMESPACE_URL_PARAMETER}`;
}
