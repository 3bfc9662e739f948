import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadSettings } from '../../src/config/load.js';
import { renderAlertmanagerConfig } from '../../src/render/alertmanager-config.js';
import { renderArtefacts } from '../../src/render/artefacts.js';
import { SIM_HEADER, startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { startAlertmanager, type AlertmanagerServer } from '../helpers/alertmanager-server.js';
import { startPrometheus, type PrometheusServer } from '../helpers/prometheus-server.js';
import { eventually, startTestSidecar } from '../helpers/sidecar.js';
import { startWebhookReceiver, type WebhookReceiver } from '../helpers/webhook-receiver.js';

/**
 * End to end with the real servers on loopback: the simulator as upstream, slow to first token for
 * workload chat only; the sidecar in front; a real Prometheus scraping the sidecar every second with
 * the rules `tokentap render` writes, at test-sized windows (x0.01: the 1h window is 36 s); a real
 * Alertmanager with the rendered routing tree, its receivers pointed at this test's webhook.
 */

const CONFIG = `
workloads:
  - name: chat
    match: { header: { x-workload: chat } }
    slo: { objective: 0.99, ttft: 200ms }
  - name: rag
    match: { header: { x-workload: rag } }
    slo: { objective: 0.99, ttft: 1500ms }
  - name: default
`;
const WINDOW_SCALE = 0.01;
const SLOW_TTFT_MS = 400;
const FAST_TTFT_MS = 5;

/**
 * The rendered Alertmanager example with the same routes and inhibition, but every receiver posting
 * to the test's webhook (at /<receiver name>) and the waits shortened from tens of seconds to one.
 */
function alertmanagerForTest(webhookUrl: string): object {
  const config = renderAlertmanagerConfig() as { route: Record<string, unknown> & { routes: Record<string, unknown>[] }; receivers: { name: string }[] };
  const shorten = (route: Record<string, unknown>) => ({ ...route, ...('group_wait' in route ? { group_wait: '1s' } : {}), ...('group_interval' in route ? { group_interval: '1s' } : {}) });
  return {
    ...config,
    route: { ...shorten(config.route), routes: config.route.routes.map(shorten) },
    receivers: config.receivers.map(({ name }) => ({ name, webhook_configs: [{ url: `${webhookUrl}/${name}`, send_resolved: true }] })),
  };
}

let simulator: RunningSimulator;
let sidecar: Awaited<ReturnType<typeof startTestSidecar>>;
let receiver: WebhookReceiver;
let alertmanager: AlertmanagerServer;
let prometheus: PrometheusServer;
let rulesDir: string;
let trafficStopped = false;
let traffic: Promise<void> = Promise.resolve();

/**
 * Requests of one workload, one stream at a time with a 100 ms pause between them, until the test
 * ends (at most 90 s): a few requests a second, far above the traffic guard's 60 an hour, without
 * loading the shared 2-core machine more than needed.
 */
async function sendTraffic(workload: string, ttftMs: number): Promise<void> {
  const deadline = performance.now() + 90_000;
  while (!trafficStopped && performance.now() < deadline) {
    const response = await fetch(`${sidecar.proxyUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-workload': workload, [SIM_HEADER.ttftMs]: String(ttftMs), [SIM_HEADER.itlMs]: '2' },
      body: JSON.stringify({ model: 'sim-model', stream: true, max_tokens: 4, messages: [{ role: 'user', content: 'hi' }] }),
    });
    await response.arrayBuffer();
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

beforeAll(async () => {
  simulator = await startSimulator({ port: 0 });
  sidecar = await startTestSidecar(simulator.url, CONFIG);
  receiver = await startWebhookReceiver();
  alertmanager = await startAlertmanager(alertmanagerForTest(receiver.url));

  rulesDir = await mkdtemp(join(tmpdir(), 'tokentap-e2e-rules-'));
  const settings = loadSettings({ flags: { config: 'tokentap.yaml' }, env: {}, readFile: () => CONFIG });
  const rules = renderArtefacts(settings, { windowScale: WINDOW_SCALE }).find((a) => a.path === 'prometheus/rules.yaml');
  await writeFile(join(rulesDir, 'rules.yaml'), rules?.content ?? '');
  prometheus = await startPrometheus({ scrapeTargets: [`${sidecar.adminUrl}/metrics`], ruleFiles: [join(rulesDir, 'rules.yaml')], alertmanager: alertmanager.url });

  // Chat's first tokens take 400 ms against a 200 ms budget; rag's take 5 ms against 1.5 s, a
  // margin no scheduling noise on a busy machine eats.
  traffic = Promise.all([sendTraffic('chat', SLOW_TTFT_MS), sendTraffic('chat', SLOW_TTFT_MS), sendTraffic('rag', FAST_TTFT_MS), sendTraffic('rag', FAST_TTFT_MS)]).then(() => undefined);
}, 60_000);

afterAll(async () => {
  trafficStopped = true;
  await traffic.catch(() => undefined);
  await prometheus?.stop();
  await alertmanager?.stop();
  await receiver?.stop();
  await sidecar?.close();
  await simulator?.close();
  if (rulesDir) await rm(rulesDir, { recursive: true, force: true });
}, 30_000);

describe('alerting end to end', () => {
  it('pages for the workload whose first tokens are slow, with slo="ttft", and never for the healthy one', async () => {
    const { alert, notification } = await receiver.waitForAlert(
      'a TokentapErrorBudgetBurn page for chat/ttft at the pager receiver',
      (a) => a.status === 'firing' && a.labels.alertname === 'TokentapErrorBudgetBurn' && a.labels.severity === 'page' && a.labels.workload === 'chat',
      40_000,
    );
    expect(notification.path).toBe('/pager');
    expect(alert.labels).toEqual({ alertname: 'TokentapErrorBudgetBurn', severity: 'page', workload: 'chat', slo: 'ttft' });
    expect(alert.annotations.summary).toBe('chat: TTFT error budget burning fast');
    expect(alert.annotations.description).toMatch(/^\d+(\.\d+)?% of chat's TTFT events/);

    // The healthy workload is measured (its SLI is there, far below the page threshold of 14.4 %)
    // but nothing alerts for it.
    const ratio = await prometheus.query('tokentap:slo_error_ratio:rate1h{workload="rag", slo="ttft"}');
    expect(ratio).toHaveLength(1);
    expect(ratio[0]?.value).toBeLessThan(0.05);
    const ragAlerts = receiver.notifications.flatMap((n) => n.alerts).filter((a) => a.labels.workload === 'rag');
    expect(ragAlerts).toEqual([]);
    expect((await prometheus.alerts()).filter((a) => a.labels.workload === 'rag')).toEqual([]);
  }, 60_000);

  it('holds back the chat/ttft ticket while the page fires, and delivers the Watchdog to its own receiver', async () => {
    const isChatTicket = (a: { labels: Record<string, string> }) => a.labels.alertname === 'TokentapErrorBudgetBurn' && a.labels.severity === 'ticket' && a.labels.workload === 'chat';
    const ticket = await eventually('the chat/ttft ticket at Alertmanager', async () => (await alertmanager.alerts()).find(isChatTicket), (a) => a !== undefined, 20_000);
    expect(ticket?.labels.slo).toBe('ttft');
    expect(ticket?.status.state).toBe('suppressed');
    expect(ticket?.status.inhibitedBy.length).toBeGreaterThan(0);
    const tickets = receiver.notifications.filter((n) => n.path === '/ticket').flatMap((n) => n.alerts);
    expect(tickets.filter((a) => a.labels.workload === 'chat' && a.labels.slo === 'ttft')).toEqual([]);

    const { notification } = await receiver.waitForAlert('the Watchdog', (a) => a.labels.alertname === 'Watchdog', 20_000);
    expect(notification.path).toBe('/watchdog');
  }, 60_000);
});
