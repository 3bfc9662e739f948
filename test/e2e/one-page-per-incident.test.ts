import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadSettings } from '../../src/config/load.js';
import { renderArtefacts } from '../../src/render/artefacts.js';
import { SIM_HEADER, startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { alertmanagerForTest } from '../helpers/alertmanager-merge.js';
import { startAlertmanager, type AlertmanagerServer } from '../helpers/alertmanager-server.js';
import { startPrometheus, type PrometheusServer } from '../helpers/prometheus-server.js';
import { startTestSidecar } from '../helpers/sidecar.js';
import { startWebhookReceiver, type WebhookNotification, type WebhookReceiver } from '../helpers/webhook-receiver.js';

/**
 * One incident, one page. The model server behind a sidecar goes down: it answers 503 to every
 * request at once, whatever the workload. Two workloads, each with a TTFT and an e2e SLO, make four
 * burn-rate pages (and four burn-rate tickets) at Prometheus, all in namespace prod. The on-call
 * engineer must be paged once for it: at the page receiver, one notification group (one PagerDuty
 * incident: Alertmanager keys the incident by the group), which holds all four pages; no ticket.
 *
 * Real servers on loopback: simulator, sidecar, Prometheus 2.42 (rules at a hundredth of their
 * windows), Alertmanager with the rendered routes merged into a configuration of its own.
 */

const CONFIG = `
workloads:
  - name: chat
    match: { header: { x-workload: chat } }
    slo: { objective: 0.99, ttft: 200ms, e2e: 5s }
  - name: rag
    match: { header: { x-workload: rag } }
    slo: { objective: 0.99, ttft: 300ms, e2e: 5s }
  - name: default
alerts:
  grafana_url: https://grafana.example.com
  runbook_base_url: https://runbooks.example.com/tokentap
`;
const WINDOW_SCALE = 0.01;
const PAGES = ['chat/ttft', 'chat/e2e', 'rag/ttft', 'rag/e2e'];
/** Bounds on the traffic: it runs until the four pages have reached the page receiver, or this long. */
const TRAFFIC_MAX_MS = 60_000;
const TRAFFIC_MAX_REQUESTS = 3_000;

let simulator: RunningSimulator;
let sidecar: Awaited<ReturnType<typeof startTestSidecar>>;
let receiver: WebhookReceiver;
let alertmanager: AlertmanagerServer;
let prometheus: PrometheusServer;
let rulesDir: string;

const pageNotifications = (): WebhookNotification[] => receiver.notifications.filter((n) => n.path === '/tokentap-page');
const paged = (): Set<string> =>
  new Set(pageNotifications().flatMap((n) => n.alerts.filter((a) => a.status === 'firing').map((a) => `${a.labels.workload}/${a.labels.slo}`)));

beforeAll(async () => {
  simulator = await startSimulator({ port: 0 });
  sidecar = await startTestSidecar(simulator.url, CONFIG);
  receiver = await startWebhookReceiver();
  const settings = loadSettings({ flags: { config: 'tokentap.yaml' }, env: {}, readFile: () => CONFIG });
  const artefacts = renderArtefacts(settings, { windowScale: WINDOW_SCALE });
  alertmanager = await startAlertmanager(alertmanagerForTest(artefacts.find((a) => a.path === 'alertmanager/tokentap-routes.yaml')?.content ?? '', receiver.url));
  rulesDir = await mkdtemp(join(tmpdir(), 'tokentap-one-page-'));
  await writeFile(join(rulesDir, 'rules.yaml'), artefacts.find((a) => a.path === 'prometheus/rules.yaml')?.content ?? '');
  prometheus = await startPrometheus({
    scrapeTargets: [{ url: `${sidecar.adminUrl}/metrics`, job: 'tokentap', labels: { namespace: 'prod' } }],
    ruleFiles: [join(rulesDir, 'rules.yaml')],
    alertmanager: alertmanager.url,
  });

  // One lane per workload, a 100 ms pause between requests (each 503 takes milliseconds), until
  // the four pages have arrived; then a few group intervals more, for anything that would follow.
  let sent = 0;
  const started = performance.now();
  const done = () => paged().size === PAGES.length || sent >= TRAFFIC_MAX_REQUESTS || performance.now() - started > TRAFFIC_MAX_MS;
  const lane = async (workload: string) => {
    while (!done()) {
      sent++;
      const response = await fetch(`${sidecar.proxyUrl}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-workload': workload, [SIM_HEADER.fault]: 'status:503' },
        body: JSON.stringify({ model: 'sim-model', stream: true, max_tokens: 4, messages: [{ role: 'user', content: 'hi' }] }),
        signal: AbortSignal.timeout(20_000),
      });
      await response.arrayBuffer();
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  };
  await Promise.all([lane('chat'), lane('rag')]);
  await new Promise((resolve) => setTimeout(resolve, 4_000));
}, TRAFFIC_MAX_MS + 60_000);

afterAll(async () => {
  await prometheus?.stop();
  await alertmanager?.stop();
  await receiver?.stop();
  await sidecar?.close();
  await simulator?.close();
  if (rulesDir) await rm(rulesDir, { recursive: true, force: true });
}, 30_000);

describe('an upstream that fails every request of every workload', () => {
  it('fires a burn-rate page per workload and SLO at Prometheus', async () => {
    const pages = (await prometheus.alerts()).filter((a) => a.labels.alertname === 'TokentapErrorBudgetBurn' && a.labels.severity === 'critical');
    expect(new Set(pages.map((a) => `${a.labels.workload}/${a.labels.slo}`))).toEqual(new Set(PAGES));
  });

  it('pages once: every page notification is of one group, for the namespace, and that group holds the four pages', () => {
    expect(paged()).toEqual(new Set(PAGES));
    const groups = new Set(pageNotifications().map((n) => JSON.stringify(n.groupLabels)));
    expect([...groups]).toEqual([JSON.stringify({ namespace: 'prod' })]);
  });

  it('sends no ticket: the burn-rate tickets of the same workloads and SLOs are held back by the pages', () => {
    const tickets = receiver.notifications.filter((n) => n.path === '/tokentap-ticket').flatMap((n) => n.alerts.map((a) => `${a.labels.alertname}/${a.labels.workload}/${a.labels.slo}`));
    expect(tickets).toEqual([]);
  });
});
