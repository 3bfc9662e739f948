import { LABEL, NAMESPACE_LABEL } from './promql.js';
import { WATCHDOG_ALERT } from './watchdog-alert.js';

/**
 * An example Alertmanager configuration for tokentap's alerts
 * (https://prometheus.io/docs/alerting/latest/configuration/):
 * - `severity="page"` goes to the pager receiver, `severity="ticket"` to the ticket receiver;
 * - alerts are grouped, and a ticket is inhibited while a page fires, per namespace, workload and
 *   SLO (the page already covers it: the ticket's slower windows would only repeat the news; a
 *   page in prod must not silence a ticket in staging). Alerts without a namespace label have it
 *   empty, which Alertmanager treats as equal, so they group and inhibit per workload and SLO;
 * - the Watchdog goes to a dead man's switch every minute, and nowhere else.
 * Receivers are placeholders to replace: PagerDuty for pages, webhooks for tickets and the switch.
 */
export function renderAlertmanagerConfig(): object {
  const alertKey = [NAMESPACE_LABEL, LABEL.workload, LABEL.slo];
  const groupBy = ['alertname', ...alertKey];
  return {
    route: {
      receiver: 'ticket',
      group_by: groupBy,
      group_wait: '30s',
      group_interval: '5m',
      repeat_interval: '12h',
      routes: [
        {
          receiver: 'watchdog',
          matchers: [`alertname="${WATCHDOG_ALERT}"`],
          group_wait: '0s',
          group_interval: '1m',
          repeat_interval: '1m',
        },
        { receiver: 'pager', matchers: ['severity="page"'], group_wait: '10s', repeat_interval: '1h' },
        { receiver: 'ticket', matchers: ['severity="ticket"'], repeat_interval: '1d' },
      ],
    },
    inhibit_rules: [
      {
        source_matchers: ['severity="page"'],
        target_matchers: ['severity="ticket"'],
        equal: alertKey,
      },
    ],
    receivers: [
      { name: 'pager', pagerduty_configs: [{ routing_key: 'REPLACE-WITH-PAGERDUTY-INTEGRATION-KEY', send_resolved: true }] },
      { name: 'ticket', webhook_configs: [{ url: 'http://ticket-bridge.example.invalid/alertmanager', send_resolved: true }] },
      { name: 'watchdog', webhook_configs: [{ url: 'http://deadmans-switch.example.invalid/ping', send_resolved: false }] },
    ],
  };
}
