import { WATCHDOG_ALERT } from './watchdog-alert.js';

/**
 * An example Alertmanager configuration for tokentap's alerts
 * (https://prometheus.io/docs/alerting/latest/configuration/):
 * - `severity="page"` goes to the pager receiver, `severity="ticket"` to the ticket receiver;
 * - a ticket is inhibited while a page fires for the same workload and SLO (the page already covers
 *   it: the ticket's slower windows would only repeat the news);
 * - the Watchdog goes to a dead man's switch every minute, and nowhere else.
 * Receivers are placeholders to replace: PagerDuty for pages, webhooks for tickets and the switch.
 */
export function renderAlertmanagerConfig(): object {
  const groupBy = ['alertname', 'workload', 'slo'];
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
        equal: ['workload', 'slo'],
      },
    ],
    receivers: [
      { name: 'pager', pagerduty_configs: [{ routing_key: 'REPLACE-WITH-PAGERDUTY-INTEGRATION-KEY', send_resolved: true }] },
      { name: 'ticket', webhook_configs: [{ url: 'http://ticket-bridge.example.invalid/alertmanager', send_resolved: true }] },
      { name: 'watchdog', webhook_configs: [{ url: 'http://deadmans-switch.example.invalid/ping', send_resolved: false }] },
    ],
  };
}
