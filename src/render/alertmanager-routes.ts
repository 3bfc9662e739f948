import type { AlertSettings } from '../config/load.js';
import { ALERT_NAME_PREFIX } from './alert-labels.js';
import { BURN_ALERT } from './burn-rate-alerts.js';
import { P99_TTFT_ALERT } from './p99-ttft-alert.js';
import { LABEL, NAMESPACE_LABEL } from './promql.js';
import { WATCHDOG_ALERT } from './watchdog-alert.js';

/**
 * What tokentap's alerts need from Alertmanager (https://prometheus.io/docs/alerting/latest/configuration/),
 * as a snippet to merge into an existing configuration rather than a configuration of its own,
 * which would replace the user's routing (docs/alerts.md shows the merge):
 * - one route for every `Tokentap*` alert, to put first under the user's `route.routes`: grouped per
 *   namespace, workload and SLO; the watchdog to a dead man's switch and nowhere else; pages to the
 *   pager receiver grouped per namespace alone, tickets to the ticket receiver. A model server that
 *   fails every request burns the TTFT and e2e budgets of every workload it serves at once: grouped
 *   per workload and SLO, that was one page (one PagerDuty incident: Alertmanager keys the incident
 *   by the group) per workload and SLO, four for two workloads (test/e2e/one-page-per-incident.test.ts);
 *   grouped per namespace, it is one, and a workload that starts burning later joins the open
 *   incident after group_interval instead of paging again;
 * - inhibitions, per namespace, workload and SLO (a page in prod must not silence a ticket in
 *   staging; alerts without a namespace label have it empty, which Alertmanager treats as equal):
 *   a tokentap ticket is held back while a tokentap page fires, and so is the P99 alert (whatever
 *   its level) while the burn-rate page fires: one page per incident;
 * - the receivers those routes name, as placeholders to replace or to rename to existing ones.
 */

/** The structure both renderings (the plain snippet, the AlertmanagerConfig CRD) are made from. */
export interface TokentapRouting {
  readonly groupBy: readonly string[];
  readonly routes: readonly {
    readonly receiver: string;
    readonly matchers: readonly Matcher[];
    readonly groupBy?: readonly string[];
    readonly groupWait?: string;
    readonly groupInterval?: string;
    readonly repeatInterval?: string;
  }[];
  readonly inhibitRules: readonly { readonly source: readonly Matcher[]; readonly target: readonly Matcher[]; readonly equal: readonly string[] }[];
}

export interface Matcher {
  readonly name: string;
  readonly matchType: '=' | '=~';
  readonly value: string;
}

export const RECEIVER = { page: 'tokentap-page', ticket: 'tokentap-ticket', watchdog: 'tokentap-watchdog' } as const;

/** The route that takes every tokentap alert, and the defaults its children inherit. */
export const ROUTE_TIMING = { groupWait: '30s', groupInterval: '5m', repeatInterval: '12h' } as const;

/** Every tokentap alert, and no other. */
export const TOKENTAP_ALERTS: Matcher = { name: 'alertname', matchType: '=~', value: `${ALERT_NAME_PREFIX}.+` };

export function tokentapRouting(alerts: AlertSettings): TokentapRouting {
  const severity = (level: 'page' | 'ticket'): Matcher => ({ name: 'severity', matchType: '=', value: alerts.severityNames[level] });
  const alertname = (name: string): Matcher => ({ name: 'alertname', matchType: '=', value: name });
  const equal = [NAMESPACE_LABEL, LABEL.workload, LABEL.slo];
  return {
    groupBy: ['alertname', ...equal],
    routes: [
      { receiver: RECEIVER.watchdog, matchers: [alertname(WATCHDOG_ALERT)], groupWait: '0s', groupInterval: '1m', repeatInterval: '1m' },
      { receiver: RECEIVER.page, matchers: [severity('page')], groupBy: [NAMESPACE_LABEL], groupWait: '10s', repeatInterval: '1h' },
      { receiver: RECEIVER.ticket, matchers: [severity('ticket')], repeatInterval: '1d' },
    ],
    inhibitRules: [
      { source: [TOKENTAP_ALERTS, severity('page')], target: [TOKENTAP_ALERTS, severity('ticket')], equal },
      { source: [alertname(BURN_ALERT), severity('page')], target: [alertname(P99_TTFT_ALERT)], equal },
    ],
  };
}

/**
 * The links of a PagerDuty incident: the runbook and the dashboard of the page's first firing alert
 * (the first alert when all are resolved). Without them the incident links only to Alertmanager and
 * carries the two URLs as text among its details, which the PagerDuty app does not open. Pages are
 * grouped per namespace, so one incident may hold several alerts: the others' links stay in the
 * details. Alertmanager leaves out a link whose URL comes out empty, and none of these templates can
 * fail (a notification always holds an alert), which would cost the page itself.
 */
const FIRST_ALERT = '(index (or .Alerts.Firing .Alerts) 0)';
export const PAGE_LINKS: readonly { readonly href: string; readonly text: string }[] = [
  { href: `{{ ${FIRST_ALERT}.Annotations.runbook_url }}`, text: `Runbook: {{ ${FIRST_ALERT}.Labels.alertname }}{{ with ${FIRST_ALERT}.Labels.slo }} ({{ . }}){{ end }}` },
  { href: `{{ ${FIRST_ALERT}.Annotations.dashboard_url }}`, text: `Dashboard{{ with ${FIRST_ALERT}.Labels.workload }}: {{ . }}{{ end }}` },
];

const matcherText = (m: Matcher): string => `${m.name}${m.matchType}${JSON.stringify(m.value)}`;

/**
 * The plain-configuration snippet, shaped like the part of alertmanager.yml it goes into:
 * `route.routes` (put the one entry first), `inhibit_rules` and `receivers` (append).
 */
export function renderAlertmanagerRoutes(alerts: AlertSettings): object {
  const routing = tokentapRouting(alerts);
  return {
    route: {
      routes: [
        {
          receiver: RECEIVER.ticket,
          matchers: [matcherText(TOKENTAP_ALERTS)],
          group_by: routing.groupBy,
          group_wait: ROUTE_TIMING.groupWait,
          group_interval: ROUTE_TIMING.groupInterval,
          repeat_interval: ROUTE_TIMING.repeatInterval,
          routes: routing.routes.map((r) => ({
            receiver: r.receiver,
            matchers: r.matchers.map(matcherText),
            ...(r.groupBy === undefined ? {} : { group_by: [...r.groupBy] }),
            ...(r.groupWait === undefined ? {} : { group_wait: r.groupWait }),
            ...(r.groupInterval === undefined ? {} : { group_interval: r.groupInterval }),
            ...(r.repeatInterval === undefined ? {} : { repeat_interval: r.repeatInterval }),
          })),
        },
      ],
    },
    inhibit_rules: routing.inhibitRules.map((r) => ({ source_matchers: r.source.map(matcherText), target_matchers: r.target.map(matcherText), equal: r.equal })),
    receivers: [
      { name: RECEIVER.page, pagerduty_configs: [{ routing_key: 'REPLACE-WITH-PAGERDUTY-INTEGRATION-KEY', send_resolved: true, links: PAGE_LINKS }] },
      { name: RECEIVER.ticket, webhook_configs: [{ url: 'http://ticket-bridge.example.invalid/alertmanager', send_resolved: true }] },
      { name: RECEIVER.watchdog, webhook_configs: [{ url: 'http://deadmans-switch.example.invalid/ping', send_resolved: false }] },
    ],
  };
}
