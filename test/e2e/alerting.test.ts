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
import { eventually, startTestSidecar } from '../helpers/sidecar.js';
import { startWebhookReceiver, type WebhookReceiver } from '../helpers/webhook-receiver.js';

/**
 * End to end with the real servers on loopback: the simulator as upstream, slow to first token for
 * workload chat only; the sidecar in front; a real Prometheus scraping the sidecar every second with
 * the rules `tokentap render` writes, at test-sized windows (x0.01: the 1h window is 36 s); a real
 * Alertmanager with the rendered routes merged into a configuration of its own, as a user would
 * (docs/alerts.md), every receiver pointed at this test's webhook.
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
alerts:
  grafana_url: https://grafana.example.com
  runbook_base_url: https://runbooks.example.com/tokentap
  # The test sends a few requests a second: its 3 s P99 window holds about a dozen first tokens.
  p99_ttft_min_requests: 5
`;
const WINDOW_SCALE = 0.01;
const SLOW_TTFT_MS = 400;
const FAST_TTFT_MS = 5;

let simulator: RunningSimulator;
let sidecar: Awaited<ReturnType<typeof startTestSidecar>>;
let receiver: WebhookReceiver;
let alertmanager: AlertmanagerServer;
let prometheus: PrometheusServer;
let rulesDir: string;
let trafficStopped = false;
let sidecarClosed = false;
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
  const settings = loadSettings({ flags: { config: 'tokentap.yaml' }, env: {}, readFile: () => CONFIG });
  const artefacts = renderArtefacts(settings, { windowScale: WINDOW_SCALE });
  alertmanager = await startAlertmanager(alertmanagerForTest(artefacts.find((a) => a.path === 'alertmanager/tokentap-routes.yaml')?.content ?? '', receiver.url));

  rulesDir = await mkdtemp(join(tmpdir(), 'tokentap-e2e-rules-'));
  const rules = artefacts.find((a) => a.path === 'prometheus/rules.yaml');
  await writeFile(join(rulesDir, 'rules.yaml'), rules?.content ?? '');
  // Job "tokentap", as docs/alerts.md's plain Prometheus scrape names it: the default scrape_selector matches it.
  prometheus = await startPrometheus({ scrapeTargets: [{ url: `${sidecar.adminUrl}/metrics`, job: 'tokentap' }], ruleFiles: [join(rulesDir, 'rules.yaml')], alertmanager: alertmanager.url });

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
  if (!sidecarClosed) await sidecar?.close();
  await simulator?.close();
  if (rulesDir) await rm(rulesDir, { recursive: true, force: true });
}, 30_000);

const isChat = (a: { labels: Record<string, string> }) => a.labels.workload === 'chat';

describe('alerting end to end', () => {
  it('pages once for the workload whose first tokens are slow, with slo="ttft", and never for the healthy one', async () => {
    const { alert, notification } = await receiver.waitForAlert(
      'a TokentapErrorBudgetBurn page for chat/ttft at the page receiver',
      (a) => a.status === 'firing' && a.labels.alertname === 'TokentapErrorBudgetBurn' && a.labels.severity === 'critical' && a.labels.workload === 'chat',
      40_000,
    );
    expect(notification.path).toBe('/tokentap-page');
    expect(alert.labels).toEqual({ alertname: 'TokentapErrorBudgetBurn', severity: 'critical', workload: 'chat', slo: 'ttft' });
    expect(alert.annotations.summary).toBe('chat: TTFT error budget burning fast');
    expect(alert.annotations.description).toMatch(/^\d+(\.\d+)?% of chat's TTFT events/);
    expect(alert.annotations.runbook_url).toBe('https://runbooks.example.com/tokentap/TokentapErrorBudgetBurn-ttft.md');
    expect(alert.annotations.dashboard_url).toBe('https://grafana.example.com/d/tokentap-slo-overview?var-workload=chat');

    // The healthy workload is measured (its SLI is there, far below the page threshold of 14.4 %)
    // but nothing alerts for it.
    const ratio = await prometheus.query('tokentap:slo_error_ratio:rate1h{workload="rag", slo="ttft"}');
    expect(ratio).toHaveLength(1);
    expect(ratio[0]?.value).toBeLessThan(0.05);
    const ragAlerts = receiver.notifications.flatMap((n) => n.alerts).filter((a) => a.labels.workload === 'rag');
    expect(ragAlerts).toEqual([]);
    expect((await prometheus.alerts()).filter((a) => a.labels.workload === 'rag')).toEqual([]);
  }, 60_000);

  it('holds back the chat tickets (burn rate and P99) while the page fires: one notification for the incident', async () => {
    // Both tickets fire at Prometheus (the P99 one after its 9 s `for`) and reach Alertmanager, which suppresses them.
    const suppressed = await eventually(
      'the chat burn-rate and P99 tickets suppressed at Alertmanager',
      async () => (await alertmanager.alerts()).filter((a) => isChat(a) && a.labels.severity === 'warning'),
      (list) => list.length === 2 && list.every((a) => a.status.state === 'suppressed'),
      30_000,
    );
    expect(suppressed.map((a) => a.labels.alertname).sort()).toEqual(['TokentapErrorBudgetBurn', 'TokentapTTFTP99OverBudget']);
    // Let a few group intervals pass: still the one page, nothing else about chat anywhere.
    await new Promise((resolve) => setTimeout(resolve, 6000));
    const chatNotifications = receiver.notifications.filter((n) => n.alerts.some(isChat));
    expect(chatNotifications.map((n) => n.path)).toEqual(['/tokentap-page']);
    expect(chatNotifications[0]?.alerts.map((a) => `${a.labels.alertname}/${a.labels.severity}/${a.labels.workload}`)).toEqual(['TokentapErrorBudgetBurn/critical/chat']);
  }, 60_000);

  it('delivers TokentapWatchdog to its own receiver, labelled with its severity alone and never held back by the page', async () => {
    const { alert, notification } = await receiver.waitForAlert('the watchdog', (a) => a.labels.alertname === 'TokentapWatchdog', 20_000);
    expect(notification.path).toBe('/tokentap-watchdog');
    expect(alert.labels).toEqual({ alertname: 'TokentapWatchdog', severity: 'none' });
    const atAlertmanager = (await alertmanager.alerts()).filter((a) => a.labels.alertname === 'TokentapWatchdog' || (isChat(a) && a.labels.severity === 'critical'));
    expect(atAlertmanager.map((a) => `${a.labels.alertname}/${a.labels.severity}/${a.status.state}`).sort()).toEqual(['TokentapErrorBudgetBurn/critical/active', 'TokentapWatchdog/none/active']);
  }, 30_000);

  it('notifies TokentapTargetDown and TokentapMetricsAbsent once the sidecar stops answering its scrapes', async () => {
    trafficStopped = true;
    await traffic;
    sidecarClosed = true;
    await sidecar.close();
    const down = await receiver.waitForAlert('TokentapTargetDown', (a) => a.status === 'firing' && a.labels.alertname === 'TokentapTargetDown', 40_000);
    expect(down.notification.path).toBe('/tokentap-ticket');
    expect(down.alert.labels).toMatchObject({ alertname: 'TokentapTargetDown', severity: 'warning', job: 'tokentap' });
    expect(down.alert.annotations.runbook_url).toBe('https://runbooks.example.com/tokentap/TokentapTargetDown.md');
    const absent = await receiver.waitForAlert('TokentapMetricsAbsent', (a) => a.status === 'firing' && a.labels.alertname === 'TokentapMetricsAbsent', 40_000);
    expect(absent.notification.path).toBe('/tokentap-ticket');
    expect(absent.alert.labels).toEqual({ alertname: 'TokentapMetricsAbsent', severity: 'warning' });
    expect(absent.alert.annotations.runbook_url).toBe('https://runbooks.example.com/tokentap/TokentapMetricsAbsent.md');
  }, 90_000);
});
