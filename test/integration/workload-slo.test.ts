import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { histogram, scrape, sumValues } from '../helpers/prometheus-text.js';
import { exchange } from '../helpers/replay-upstream.js';
import { eventually, startTestSidecar } from '../helpers/sidecar.js';

/** Workloads and SLO events through the real proxy, in front of the simulator. */
const CONFIG = `
workloads:
  - name: chat
    match: { header: { x-workload: chat } }
    slo: { objective: 0.99, ttft: 200ms, itl: 50ms }
  - name: rag
    match: { header: { x-workload: rag } }
    slo: { objective: 0.99, ttft: 300ms, itl: 100ms, e2e: 3s }
  - name: default
`;

let simulator: RunningSimulator;
let sidecar: Awaited<ReturnType<typeof startTestSidecar>>;

beforeAll(async () => {
  simulator = await startSimulator({ port: 0, ttftMs: 20, itlMs: 5, outputTokens: 8 });
  sidecar = await startTestSidecar(simulator.url, CONFIG);
});

afterAll(async () => {
  await sidecar?.close();
  await simulator?.close();
});

function chat(headers: Record<string, string>) {
  return exchange(`${sidecar.proxyUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ model: 'sim-model', stream: true, messages: [{ role: 'user', content: 'hi' }] }),
  });
}

/**
 * Sends a streaming request and gives up `abortAfterMs` after its response headers arrive, so the
 * proxy has surely waited that long (a timer started before sending would also count client-side
 * start-up time, which on a loaded machine can be most of it).
 */
function abandoned(headers: Record<string, string>, abortAfterMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${sidecar.proxyUrl}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, agent: false });
    let gaveUp = false;
    req.on('response', (res) => {
      res.resume();
      res.on('error', () => {});
      setTimeout(() => {
        gaveUp = true;
        req.destroy();
      }, abortAfterMs);
    });
    req.on('error', (error) => (gaveUp ? undefined : reject(error)));
    req.on('close', () => resolve());
    req.end(JSON.stringify({ model: 'sim-model', stream: true, messages: [{ role: 'user', content: 'hi' }] }));
  });
}

describe('workload SLO events through the proxy', () => {
  it('assigns requests by header, counts slow TTFT as bad, and counts an abandoned slow request as bad', async () => {
    await Promise.all([
      ...Array.from({ length: 3 }, () => chat({ 'x-workload': 'chat' })),
      ...Array.from({ length: 2 }, () => chat({ 'x-workload': 'chat', 'x-sim-ttft-ms': '600' })),
      chat({}),
      abandoned({ 'x-workload': 'rag', 'x-sim-ttft-ms': '5000' }, 500),
    ]);
    const requests = (m: Awaited<ReturnType<typeof scrape>>) => sumValues(m, 'tokentap_requests_total');
    const m = await eventually('all 7 requests recorded', () => scrape(sidecar.adminUrl), (x) => requests(x) === 7, 10_000);
    const events = (workload: string, slo: string, result: string) => sumValues(m, 'tokentap_slo_events_total', { workload, slo, result });

    // TTFT: every chat request has one event; the 600 ms ones are bad whatever the machine's noise,
    // and the good ones are exactly those in bucket{le="0.2"}.
    const chatTtft = histogram(m, 'gen_ai_server_time_to_first_token_seconds', { workload: 'chat' });
    expect(chatTtft.count).toBe(5);
    expect(events('chat', 'ttft', 'good') + events('chat', 'ttft', 'bad')).toBe(5);
    expect(events('chat', 'ttft', 'bad')).toBeGreaterThanOrEqual(2);
    expect(events('chat', 'ttft', 'good')).toBe(chatTtft.buckets.get(0.2));

    // ITL: one event per token after the first (5 requests x 7), good exactly those in bucket{le="0.05"}.
    const chatItl = histogram(m, 'tokentap_inter_token_latency_seconds', { workload: 'chat' });
    expect(chatItl.count).toBe(35);
    expect(events('chat', 'itl', 'good') + events('chat', 'itl', 'bad')).toBe(35);
    expect(events('chat', 'itl', 'good')).toBe(chatItl.buckets.get(0.05));

    // The abandoned RAG request: no token after over 500 ms > 300 ms is a bad TTFT event and no TTFT
    // sample; it left before the 3 s e2e threshold, so no e2e event.
    expect(sumValues(m, 'tokentap_requests_total', { workload: 'rag', outcome: 'client_cancelled' })).toBe(1);
    expect(histogram(m, 'gen_ai_server_time_to_first_token_seconds', { workload: 'rag' }).count).toBe(0);
    expect(events('rag', 'ttft', 'bad')).toBe(1);
    expect(events('rag', 'ttft', 'good')).toBe(0);
    expect(m.get('tokentap_slo_events_total')!.metrics.filter((s) => s.labels['workload'] === 'rag' && s.labels['slo'] !== 'ttft')).toEqual([]);

    // The unmatched request lands in the last workload, which has no SLO.
    expect(sumValues(m, 'tokentap_requests_total', { workload: 'default' })).toBe(1);
    expect(sumValues(m, 'tokentap_slo_events_total', { workload: 'default' })).toBe(0);

    // The thresholds are exact boundaries of the exposed histograms.
    expect(chatTtft.buckets.has(0.3)).toBe(true);
    expect(histogram(m, 'gen_ai_server_request_duration_seconds').buckets.has(3)).toBe(true);
    expect(chatItl.buckets.has(0.1)).toBe(true);
  });
});
