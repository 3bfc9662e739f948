import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { histogram, scrape, sumValues } from '../helpers/prometheus-text.js';
import { exchange, startReplayUpstream } from '../helpers/replay-upstream.js';
import { eventually, startTestSidecar } from '../helpers/sidecar.js';

/** Health checks, model listings and tokenizer calls are not generations: counted apart, outside every latency, token and SLO series. */
let upstream: Awaited<ReturnType<typeof startReplayUpstream>>;
let sidecar: Awaited<ReturnType<typeof startTestSidecar>>;

beforeAll(async () => {
  upstream = await startReplayUpstream((req) => {
    if (req.url === '/v1/chat/completions') return { chunks: [Buffer.from('data: {"choices":[{"delta":{"content":"hi"}}]}\n\n'), Buffer.from('data: [DONE]\n\n')] };
    if (req.url === '/health') return { status: 200, headers: { 'content-type': 'application/json' }, chunks: [Buffer.from('{"status":"ok"}')] };
    if (req.url === '/tokenize') return { status: 200, headers: { 'content-type': 'application/json' }, chunks: [Buffer.from('{"tokens":[1,2]}')] };
    return { status: 200, headers: { 'content-type': 'application/json' }, chunks: [Buffer.from('{"object":"list","data":[{"id":"tiny"}]}')] };
  });
  sidecar = await startTestSidecar(upstream.url, 'workloads:\n  - name: chat\n    slo: { objective: 0.99, ttft: 1s, e2e: 5s }\n');
});

afterAll(async () => {
  await sidecar?.close();
  await upstream?.close();
});

describe('requests that are not generations', () => {
  it('counts GET /health, GET /v1/models and a tokenizer call as operation="other", and a chat stream as a generation', async () => {
    for (const path of ['/health', '/v1/models']) expect((await exchange(`${sidecar.proxyUrl}${path}`)).status).toBe(200);
    expect((await exchange(`${sidecar.proxyUrl}/tokenize`, { method: 'POST', headers: { 'content-type': 'text/plain' }, body: 'hi' })).status).toBe(200);
    const chat = await exchange(`${sidecar.proxyUrl}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"model":"tiny","stream":true}' });
    expect(chat.status).toBe(200);
    const lines = await eventually('four request lines', () => sidecar.logs.filter((l) => l.msg === 'request'), (l) => l.length === 4);
    expect(lines.map((l) => [l.path, l.operation])).toEqual([
      ['/health', 'other'],
      ['/v1/models', 'other'],
      ['/tokenize', 'other'],
      ['/v1/chat/completions', undefined],
    ]);
    const metrics = await scrape(sidecar.adminUrl);
    expect(sumValues(metrics, 'tokentap_requests_total', { operation: 'other' })).toBe(3);
    expect(sumValues(metrics, 'tokentap_requests_total', { operation: 'generation' })).toBe(1);
    // Only the generation is in the latency histograms and the SLO events.
    expect(histogram(metrics, 'gen_ai_server_request_duration_seconds').count).toBe(1);
    expect(histogram(metrics, 'tokentap_time_to_first_byte_seconds').count).toBe(1);
    expect(sumValues(metrics, 'tokentap_slo_events_total', { slo: 'e2e' })).toBe(1);
    expect(sumValues(metrics, 'tokentap_requests_in_flight')).toBe(0);
  });
});
