import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { histogram, scrape, sumValues } from '../helpers/prometheus-text.js';
import { exchange } from '../helpers/replay-upstream.js';
import { eventually, startTestSidecar } from '../helpers/sidecar.js';

/**
 * End to end: the simulator reports engine timings the way each engine does (x-sim-engine-*),
 * the sidecar splits the wire TTFT. The simulator's wire TTFT is 180 ms and its engine claims
 * 150 ms, so the outside-engine sample is 30 ms plus whatever the timers and the loopback add:
 * never less, and, on a loaded 2-core machine, generously bounded above.
 */
let simulator: RunningSimulator;
let sidecar: Awaited<ReturnType<typeof startTestSidecar>>;

beforeAll(async () => {
  simulator = await startSimulator({ port: 0, ttftMs: 180, itlMs: 5, outputTokens: 4 });
  sidecar = await startTestSidecar(
    simulator.url,
    ['workloads:', '  - name: chat', '    slo: { objective: 0.99, ttft: 2s, itl: 1s, e2e: 10s }', ''].join('\n'),
  );
});

afterAll(async () => {
  await sidecar?.close();
  await simulator?.close();
});

async function post(path: string, model: string, body: object, headers: Record<string, string>): Promise<void> {
  const response = await exchange(`${sidecar.proxyUrl}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ model, ...body }),
  });
  expect(response.status).toBe(200);
}

const CASES: Array<[string, string, object, Record<string, string>, { engine: number; queue?: number; prefill: number }]> = [
  [
    'vLLM with --enable-per-request-metrics: queue 40 ms + prefill 110 ms on the final usage chunk',
    '/v1/chat/completions',
    { stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'hi' }] },
    { 'x-sim-per-request-metrics': '1', 'x-sim-engine-queue-ms': '40', 'x-sim-engine-prefill-ms': '110' },
    { engine: 0.15, queue: 0.04, prefill: 0.11 },
  ],
  ['llama.cpp /completion: timings.prompt_ms 150', '/completion', { stream: true, prompt: 'hi' }, { 'x-sim-engine-prefill-ms': '150' }, { engine: 0.15, prefill: 0.15 }],
  [
    'Ollama /api/chat: load_duration 20 ms + prompt_eval_duration 130 ms',
    '/api/chat',
    { messages: [{ role: 'user', content: 'hi' }] },
    { 'x-sim-engine-load-ms': '20', 'x-sim-engine-prefill-ms': '130' },
    { engine: 0.15, prefill: 0.13 },
  ],
];

describe('engine timings from the simulator through the sidecar', () => {
  it.each(CASES)('%s', async (what, path, body, headers, expected) => {
    const model = `engine-${CASES.findIndex((c) => c[0] === what)}`;
    await post(path, model, body, headers);
    const labels = { gen_ai_request_model: model };
    const m = await eventually('the request recorded', () => scrape(sidecar.adminUrl), (x) => histogram(x, 'gen_ai_server_request_duration_seconds', labels).count === 1);
    const engine = histogram(m, 'tokentap_engine_time_to_first_token_seconds', labels);
    expect(engine.count).toBe(1);
    expect(engine.sum).toBeCloseTo(expected.engine, 9);
    expect(histogram(m, 'tokentap_engine_prefill_time_seconds', labels).sum).toBeCloseTo(expected.prefill, 9);
    expect(histogram(m, 'tokentap_engine_queue_time_seconds', labels).count).toBe(expected.queue === undefined ? 0 : 1);
    const wire = histogram(m, 'gen_ai_server_time_to_first_token_seconds', labels).sum;
    // Outside the engine only where the engine reports its queue (vLLM); otherwise the queue is in the rest.
    const [restName, otherName] = expected.queue === undefined
      ? ['tokentap_queue_or_outside_engine_time_to_first_token_seconds', 'tokentap_outside_engine_time_to_first_token_seconds']
      : ['tokentap_outside_engine_time_to_first_token_seconds', 'tokentap_queue_or_outside_engine_time_to_first_token_seconds'];
    expect(histogram(m, otherName, labels).count).toBe(0);
    const outside = histogram(m, restName, labels);
    expect(outside.count).toBe(1);
    expect(outside.sum).toBeCloseTo(wire - expected.engine, 9);
    expect(outside.sum).toBeGreaterThanOrEqual(0.0299);
    expect(outside.sum).toBeLessThan(0.5);
    // Goodput: completed within every threshold of the workload.
    expect(sumValues(m, 'tokentap_goodput_requests_total', labels)).toBe(1);
  });

  it('gives no engine sample for vLLM without per-request metrics', async () => {
    await post('/v1/chat/completions', 'engine-none', { stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'hi' }] }, {});
    const labels = { gen_ai_request_model: 'engine-none' };
    const m = await eventually('the request recorded', () => scrape(sidecar.adminUrl), (x) => histogram(x, 'gen_ai_server_request_duration_seconds', labels).count === 1);
    expect(histogram(m, 'gen_ai_server_time_to_first_token_seconds', labels).count).toBe(1);
    expect(histogram(m, 'tokentap_engine_time_to_first_token_seconds', labels).count).toBe(0);
    expect(histogram(m, 'tokentap_outside_engine_time_to_first_token_seconds', labels).count).toBe(0);
  });
});

describe('capacity at SLO end to end', () => {
  it('records 8 concurrent requests under the in-flight bands of their starts: 1, 2, 3-4 twice, 5-8 four times', async () => {
    const requests = 8;
    const body = { stream: true, messages: [{ role: 'user', content: 'hi' }] };
    // Each lasts at least its 2 s TTFT, so all 8 are in flight before the first ends, even on a loaded
    // machine (with the simulator's 180 ms, a CI run under load started the last one after the first ended).
    await Promise.all(Array.from({ length: requests }, () => post('/v1/chat/completions', 'capacity', body, { 'x-sim-ttft-ms': '2000' })));
    const labels = { gen_ai_request_model: 'capacity' };
    const m = await eventually('all recorded', () => scrape(sidecar.adminUrl), (x) => histogram(x, 'gen_ai_server_request_duration_seconds', labels).count === requests);
    const ttft = (band: string) => histogram(m, 'tokentap_time_to_first_token_by_concurrency_seconds', { ...labels, in_flight: band }).count;
    expect({ '1': ttft('1'), '2': ttft('2'), '3-4': ttft('3-4'), '5-8': ttft('5-8') }).toEqual({ '1': 1, '2': 1, '3-4': 2, '5-8': 4 });
    // 4 output tokens: 3 ITL samples per request, each under its request's band.
    expect(histogram(m, 'tokentap_inter_token_latency_by_concurrency_seconds', labels).count).toBe(requests * 3);
    expect(histogram(m, 'tokentap_inter_token_latency_by_concurrency_seconds', { ...labels, in_flight: '5-8' }).count).toBe(4 * 3);
  });
});
