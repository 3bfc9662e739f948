import type { AlertSettings } from '../config/load.js';
import { PAGE_LINKS, RECEIVER, ROUTE_TIMING, TOKENTAP_ALERTS, tokentapRouting } from './alertmanager-routes.js';

/**
 * The same routing as a prometheus-operator `AlertmanagerConfig`
 * (https://prometheus-operator.dev/docs/api-reference/api/#monitoring.coreos.com/v1alpha1.AlertmanagerConfig).
 * The operator adds a `namespace="<the object's namespace>"` matcher to its routes and inhibitions
 * unless the Alertmanager resource sets `alertmanagerConfigMatcherStrategy: { type: None }`; tokentap's
 * alerts carry the namespace of the workload (and the watchdog none), so docs/alerts.md asks for
 * that strategy. Receivers are placeholders: PagerDuty reads its key from a Secret.
 */
export function renderAlertmanagerConfigCrd(alerts: AlertSettings): object {
  const routing = tokentapRouting(alerts);
  const matchers = (list: readonly { name: string; matchType: string; value: string }[]) => list.map((m) => ({ name: m.name, matchType: m.matchType, value: m.value }));
  return {
    apiVersion: 'monitoring.coreos.com/v1alpha1',
    kind: 'AlertmanagerConfig',
    metadata: {
      name: 'tokentap',
      labels: { 'app.kubernetes.io/name': 'tokentap', 'app.kubernetes.io/component': 'alert-routing' },
    },
    spec: {
      route: {
        receiver: RECEIVER.ticket,
        matchers: matchers([TOKENTAP_ALERTS]),
        groupBy: [...routing.groupBy],
        groupWait: ROUTE_TIMING.groupWait,
        groupInterval: ROUTE_TIMING.groupInterval,
        repeatInterval: ROUTE_TIMING.repeatInterval,
        routes: routing.routes.map((r) => ({
          receiver: r.receiver,
          matchers: matchers(r.matchers),
          ...(r.groupBy === undefined ? {} : { groupBy: [...r.groupBy] }),
          ...(r.groupWait === undefined ? {} : { groupWait: r.groupWait }),
          ...(r.groupInterval === undefined ? {} : { groupInterval: r.groupInterval }),
          ...(r.repeatInterval === undefined ? {} : { repeatInterval: r.repeatInterval }),
        })),
      },
      inhibitRules: routing.inhibitRules.map((r) => ({ sourceMatch: matchers(r.source), targetMatch: matchers(r.target), equal: [...r.equal] })),
      receivers: [
        {
          name: RECEIVER.page,
          pagerdutyConfigs: [
            {
              routingKey: { name: 'tokentap-pagerduty', key: 'routing-key' },
              sendResolved: true,
              // The operator's field for a link's text is `alt` (PagerDutyLinkConfig, v1alpha1).
              pagerDutyLinkConfigs: PAGE_LINKS.map((l) => ({ href: l.href, alt: l.text })),
            },
          ],
        },
        { name: RECEIVER.ticket, webhookConfigs: [{ url: 'http://ticket-bridge.example.invalid/alertmanager', sendResolved: true }] },
        { name: RECEIVER.watchdog, webhookConfigs: [{ url: 'http://deadmans-switch.example.invalid/ping', sendResolved: false }] },
      ],
    },
  };
}
