import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { loadSettings } from '../../src/config/load.js';
import { renderArtefacts } from '../../src/render/artefacts.js';
import { alertmanagerForTest } from '../helpers/alertmanager-merge.js';
import { startAlertmanager, type AlertmanagerServer } from '../helpers/alertmanager-server.js';

/**
 * What the on-call engineer's PagerDuty incident links to. The real Alertmanager 0.25 runs the
 * rendered routes with the rendered `tokentap-page` receiver as it is, its PagerDuty Events API URL
 * pointed at a stand-in on loopback that keeps every event; alerts are posted to Alertmanager's API
 * as Prometheus posts them, with the annotations the rendered rules give them.
 */

const CONFIG = `
workloads:
  - name: chat
    slo: { objective: 0.99, ttft: 200ms }
alerts:
  grafana_url: https://grafana.example.com
  runbook_base_url: https://runbooks.example.com/tokentap
`;

interface PagerDutyEvent {
  event_action: 'trigger' | 'resolve';
  dedup_key: string;
  links?: Array<{ href: string; text: string }>;
}

const BURN = {
  labels: { alertname: 'TokentapErrorBudgetBurn', severity: 'critical', namespace: 'prod', workload: 'chat', slo: 'ttft' },
  annotations: {
    summary: 'chat TTFT error budget burning',
    runbook_url: 'https://runbooks.example.com/tokentap/TokentapErrorBudgetBurn-ttft.md',
    dashboard_url: 'https://grafana.example.com/d/tokentap-slo-overview?var-workload=chat&var-namespace=prod',
  },
};
const DOWN = {
  labels: { alertname: 'TokentapUpstreamDown', severity: 'critical', namespace: 'prod' },
  annotations: {
    summary: 'no model server ready in prod',
    runbook_url: 'https://runbooks.example.com/tokentap/TokentapUpstreamDown.md',
    dashboard_url: 'https://grafana.example.com/d/tokentap-slo-overview?var-namespace=prod',
  },
};

let pagerduty: Server;
const events: PagerDutyEvent[] = [];
let alertmanager: AlertmanagerServer;

async function post(alerts: Array<{ labels: Record<string, string>; annotations: Record<string, string>; endsAt?: string }>): Promise<void> {
  const response = await fetch(`${alertmanager.url}/api/v2/alerts`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(alerts.map((a) => ({ ...a, startsAt: new Date(Date.now() - 60_000).toISOString() }))),
  });
  expect(response.status).toBe(200);
}

async function eventWhere(what: string, predicate: (event: PagerDutyEvent) => boolean): Promise<PagerDutyEvent> {
  const deadline = performance.now() + 30_000;
  for (;;) {
    const found = events.find(predicate);
    if (found !== undefined) return found;
    if (performance.now() > deadline) throw new Error(`no PagerDuty event ${what}; received ${JSON.stringify(events)}\n${alertmanager.output()}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

beforeAll(async () => {
  pagerduty = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      events.push(JSON.parse(Buffer.concat(chunks).toString('utf8')) as PagerDutyEvent);
      response.writeHead(202, { 'content-type': 'application/json' }).end('{"status":"success"}');
    });
  });
  await new Promise<void>((resolve) => pagerduty.listen(0, '127.0.0.1', resolve));
  const pagerdutyUrl = `http://127.0.0.1:${(pagerduty.address() as AddressInfo).port}/v2/enqueue`;

  const settings = loadSettings({ flags: { config: 'tokentap.yaml' }, env: {}, readFile: () => CONFIG });
  const snippet = renderArtefacts(settings, { windowScale: 1 }).find((a) => a.path === 'alertmanager/tokentap-routes.yaml')?.content ?? '';
  const rendered = (parse(snippet) as { receivers: Array<{ name: string; pagerduty_configs?: object[] }> }).receivers.find((r) => r.name === 'tokentap-page');
  // The test's short waits, with the rendered PagerDuty receiver as it is but for its key and the API URL.
  const config = alertmanagerForTest(snippet, 'http://127.0.0.1:9/unused') as { receivers: Array<{ name: string }> };
  config.receivers = config.receivers.map((r) =>
    r.name === 'tokentap-page' ? { name: r.name, pagerduty_configs: rendered?.pagerduty_configs?.map((c) => ({ ...c, routing_key: 'test-routing-key', url: pagerdutyUrl })) } : r,
  );
  alertmanager = await startAlertmanager(config);
}, 60_000);

afterAll(async () => {
  await alertmanager?.stop();
  await new Promise((resolve) => pagerduty?.close(resolve));
});

describe('a PagerDuty incident from the rendered page receiver', () => {
  it('links the runbook and the dashboard of its first firing alert, named after it', async () => {
    await post([BURN, DOWN]);
    const trigger = await eventWhere('triggered', (e) => e.event_action === 'trigger');
    // Alertmanager orders a group's alerts by their labels, fewer labels first: the namespace's
    // model servers down (the cause) comes before the burn-rate page of one workload.
    expect(trigger.links).toEqual([
      { href: DOWN.annotations.runbook_url, text: 'Runbook: TokentapUpstreamDown' },
      { href: DOWN.annotations.dashboard_url, text: 'Dashboard' },
    ]);
  }, 60_000);

  it('links the alert still firing once the first has resolved, and resolves the incident with the last', async () => {
    const seen = events.length;
    await post([BURN, { ...DOWN, endsAt: new Date().toISOString() }]);
    const update = await eventWhere('after the upstream page resolved', (e) => events.indexOf(e) >= seen && e.event_action === 'trigger');
    expect(update.links).toEqual([
      { href: BURN.annotations.runbook_url, text: 'Runbook: TokentapErrorBudgetBurn (ttft)' },
      { href: BURN.annotations.dashboard_url, text: 'Dashboard: chat' },
    ]);
    await post([{ ...BURN, endsAt: new Date().toISOString() }]);
    const resolve = await eventWhere('resolving the incident', (e) => e.event_action === 'resolve');
    expect(resolve.dedup_key).toBe(update.dedup_key);
  }, 60_000);
});
