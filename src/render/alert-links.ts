import type { AlertSettings } from '../config/load.js';
import { TokentapError } from '../errors.js';
import { SLO_OVERVIEW_UID } from './dashboards.js';
import { NAMESPACE_URL_PARAMETER } from './namespace-template.js';

/**
 * The links every alert carries: its runbook (a copy of docs/runbooks/ wherever the team serves it)
 * and the SLO dashboard on the configured Grafana, filtered to the alert's workload and namespace.
 * Both bases are required by `tokentap render` and must be absolute: an alert is read in PagerDuty,
 * Slack or e-mail, where a relative link leads nowhere (docs/alerts.md, "Links in alerts").
 */

/** The runbook file of an alert, and of one SLO kind for the burn-rate alert: `TokentapErrorBudgetBurn-ttft.md`. */
export function runbookFile(alertname: string, slo?: string): string {
  return `${alertname}${slo === undefined ? '' : `-${slo}`}.md`;
}

/**
 * What `tokentap render` refuses in the `alerts:` section although `serve` accepts it: a missing link
 * base. One problem per line, `FILE: path: message`; `tokentap check` reports the same lines.
 */
export function missingAlertLinks(alerts: AlertSettings, configFile: string | undefined): string[] {
  const where = configFile === undefined ? '' : `${configFile}: `;
  const problems: string[] = [];
  if (alerts.grafanaUrl === undefined) {
    problems.push(
      `${where}alerts.grafana_url: required by tokentap render: the absolute URL of the Grafana that shows the tokentap dashboards, e.g. https://grafana.example.com (every alert links to its dashboard there)`,
    );
  }
  if (alerts.runbookBaseUrl === undefined) {
    problems.push(
      `${where}alerts.runbook_base_url: required by tokentap render: the absolute URL where on-call opens the runbooks of docs/runbooks (your fork, Git server or wiki copy), ` +
        'e.g. https://github.com/ORG/tokentap/blob/main/docs/runbooks (every alert links to <runbook_base_url>/<alert>.md)',
    );
  }
  return problems;
}

/**
 * Link bases that are still the documentation's placeholders: a host reserved for examples (RFC 2606:
 * example.com, .net, .org and *.example) or the `ORG` of `https://github.com/ORG/tokentap`. Valid and
 * absolute, so render accepts them, but every page would lead nowhere: `check` and `render` warn,
 * one line each as `FILE: warning: path: message`.
 */
export function placeholderAlertLinks(alerts: AlertSettings, configFile: string | undefined): string[] {
  const where = configFile === undefined ? '' : `${configFile}: `;
  const links = [
    ['grafana_url', alerts.grafanaUrl],
    ['runbook_base_url', alerts.runbookBaseUrl],
  ] as const;
  return links.flatMap(([key, value]) =>
    value !== undefined && isPlaceholder(value)
      ? [`${where}warning: alerts.${key}: ${value} is the documentation's placeholder: every alert would link there; set your own before applying the rendered rules`]
      : [],
  );
}

const EXAMPLE_HOST = /(^|\.)example(\.(com|net|org))?$/i;

function isPlaceholder(value: string): boolean {
  const url = new URL(value);
  return EXAMPLE_HOST.test(url.hostname) || (url.hostname === 'github.com' && url.pathname.startsWith('/ORG/'));
}

function required(value: string | undefined, alerts: AlertSettings): string {
  if (value === undefined) throw new TokentapError('TOKENTAP_ERR_CONFIG_INVALID', missingAlertLinks(alerts, undefined));
  return value;
}

export function runbookUrl(alerts: AlertSettings, alertname: string, slo?: string): string {
  return `${required(alerts.runbookBaseUrl, alerts)}/${runbookFile(alertname, slo)}`;
}

/**
 * The SLO dashboard's absolute URL with Grafana's `var-workload` set, and `var-namespace` when the
 * alert has a namespace (a template Prometheus expands per alert).
 */
export function dashboardUrl(alerts: AlertSettings, workload?: string): string {
  const base = `${required(alerts.grafanaUrl, alerts)}/d/${SLO_OVERVIEW_UID}`;
  if (workload === undefined) return `${base}?${NAMESPACE_URL_PARAMETER.replace('&', '')}`;
  return `${base}?var-workload=${encodeURIComponent(workload)}${NAMESPACE_URL_PARAMETER}`;
}
