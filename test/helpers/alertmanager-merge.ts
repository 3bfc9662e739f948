/**
 * The merge docs/alerts.md asks users to make: tokentap's route goes first under the existing
 * `route.routes`, its inhibit rules and receivers are appended. `EXISTING_CONFIG` stands for a
 * user's configuration: kube-prometheus-stack's default (its own Watchdog to a null receiver, a
 * critical-inhibits-warning rule per namespace and alertname) plus a team route.
 */

export interface AlertmanagerConfigFile {
  route: { receiver: string; routes?: object[]; [key: string]: unknown };
  inhibit_rules?: object[];
  receivers: { name: string; [key: string]: unknown }[];
  [key: string]: unknown;
}

export const EXISTING_CONFIG: AlertmanagerConfigFile = {
  global: { resolve_timeout: '5m' },
  route: {
    receiver: 'null',
    group_by: ['namespace'],
    group_wait: '30s',
    group_interval: '5m',
    repeat_interval: '12h',
    routes: [
      { receiver: 'null', matchers: ['alertname="Watchdog"'] },
      { receiver: 'platform-team', matchers: ['severity="critical"'] },
    ],
  },
  inhibit_rules: [
    { source_matchers: ['severity="critical"'], target_matchers: ['severity=~"warning|info"'], equal: ['namespace', 'alertname'] },
  ],
  receivers: [{ name: 'null' }, { name: 'platform-team', webhook_configs: [{ url: 'http://platform-pager.example.invalid/hook' }] }],
};

/** `snippet` is the parsed deploy/alertmanager/tokentap-routes.yaml. */
export function mergeTokentapRoutes(existing: AlertmanagerConfigFile, snippet: { route: { routes: object[] }; inhibit_rules: object[]; receivers: { name: string }[] }): AlertmanagerConfigFile {
  return {
    ...existing,
    route: { ...existing.route, routes: [...snippet.route.routes, ...(existing.route.routes ?? [])] },
    inhibit_rules: [...(existing.inhibit_rules ?? []), ...snippet.inhibit_rules],
    receivers: [...existing.receivers, ...snippet.receivers],
  };
}
