import { parse } from 'yaml';

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

/**
 * The user's own configuration (a default receiver and nothing else) with the rendered routes,
 * inhibitions and receivers merged in; every receiver posts to the test's webhook (at
 * /<receiver name>). Waits are shortened from tens of seconds to one, except the tickets', which
 * keep several seconds: a ticket that fires a moment before its page must still be held back, as
 * the real 30 s group_wait holds it.
 */
export function alertmanagerForTest(snippetYaml: string, webhookUrl: string): object {
  const snippet = parse(snippetYaml) as Parameters<typeof mergeTokentapRoutes>[1];
  const merged = mergeTokentapRoutes({ route: { receiver: 'default' }, receivers: [{ name: 'default' }] }, snippet) as AlertmanagerConfigFile & {
    route: { routes: Array<Record<string, unknown> & { routes: Record<string, unknown>[] }> };
  };
  const shorten = (route: Record<string, unknown>, wait: string) => ({ ...route, group_wait: wait, group_interval: '1s' });
  const [tokentap] = merged.route.routes;
  return {
    ...merged,
    route: {
      ...merged.route,
      routes: [{ ...shorten(tokentap as Record<string, unknown>, '5s'), routes: (tokentap?.routes ?? []).map((r) => shorten(r, r['receiver'] === 'tokentap-ticket' ? '5s' : '1s')) }],
    },
    receivers: merged.receivers.map(({ name }) => ({ name, webhook_configs: [{ url: `${webhookUrl}/${name}`, send_resolved: true }] })),
  };
}
