import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { histogram, inBucket, scrape, sumValues } from '../helpers/prometheus-text.js';
import { exchange } from '../helpers/replay-upstream.js';
import { eventually, startTestSidecar } from '../helpers/sidecar.js';

/** End to end: the built-in simulator as upstream, the sidecar in front, real clients. */
let simulator: RunningSimulator;
let sidecar: Awaited<ReturnType<typeof startTestSidecar>>;

beforeAll(async () => {
  simulator = await startSimulator({ port: 0, ttftMs: 150, itlMs: 20, outputTokens: 16 });
  sidecar = await startTestSidecar(simulator.url);
});

afterAll(async () => {
  await sidecar?.close();
  await simulator?.close();
});

describe('measurements end to end', () => {
  it('puts every TTFT sample in the bucket holding 150 ms and the ITL samples in the bucket holding 20 ms', async () => {
    const requests = 6;
    await Promise.all(
      Array.from({ length: requests }, () =>
        exchange(`${sidecar.proxyUrl}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'timing', stream: true, messages: [{ role: 'user', content: 'hi' }] }),
        }),
      ),
    );
    const m = await eventually('all requests recorded', () => scrape(sidecar.adminUrl), (x) => histogram(x, 'gen_ai_server_time_to_first_token_seconds', { gen_ai_request_model: 'timing' }).count === requests);
    const labels = { gen_ai_request_model: 'timing' };
    // The bucket that holds the configured value (TTFT: (0.1, 0.2], ITL: (0.01, 0.025]) must hold
    // every TTFT sample and nearly every gap; a noisy 2-core machine may delay a few.
    const ttft = inBucket(histogram(m, 'gen_ai_server_time_to_first_token_seconds', labels), 0.15);
    expect(ttft.count).toBe(requests);
    const itlHistogram = histogram(m, 'tokentap_inter_token_latency_seconds', labels);
    expect(itlHistogram.count).toBe(requests * 15);
    const itl = inBucket(itlHistogram, 0.02);
    expect(itl.count / itlHistogram.count).toBeGreaterThan(0.8);
    // And the mean gap is 20 ms within 25 %.
    expect(itlHistogram.sum / itlHistogram.count).toBeGreaterThan(0.015);
    expect(itlHistogram.sum / itlHistogram.count).toBeLessThan(0.025);
    const tpot = histogram(m, 'gen_ai_server_time_per_output_token_seconds', labels);
    expect(tpot.count).toBe(requests);
  });
});

describe('real OpenAI client through the proxy', () => {
  const client = (baseURL: string) => new OpenAI({ baseURL: `${baseURL}/v1`, apiKey: 'sk-test', maxRetries: 0 });
  const fast = { 'x-sim-ttft-ms': '5', 'x-sim-itl-ms': '1', 'x-sim-seed': '42' };

  it('streams chat completions with exactly the content it gets directly', async () => {
    const collect = async (baseURL: string) => {
      const stream = await client(baseURL).chat.completions.create(
        { model: 'sim-model', stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'hello' }] },
        { headers: fast },
      );
      const parts: unknown[] = [];
      for await (const chunk of stream) parts.push({ content: chunk.choices[0]?.delta?.content, finish: chunk.choices[0]?.finish_reason, usage: chunk.usage });
      return parts;
    };
    const direct = await collect(simulator.url);
    const proxied = await collect(sidecar.proxyUrl);
    expect(proxied).toEqual(direct);
    expect(direct.length).toBeGreaterThan(10);
  });

  it('streams completions and gets non-streaming chat responses unchanged', async () => {
    const completions = async (baseURL: string) => {
      const stream = await client(baseURL).completions.create({ model: 'sim-model', prompt: 'Once', stream: true, max_tokens: 12 }, { headers: fast });
      let text = '';
      for await (const chunk of stream) text += chunk.choices[0]?.text ?? '';
      return text;
    };
    expect(await completions(sidecar.proxyUrl)).toBe(await completions(simulator.url));
    const chat = async (baseURL: string) =>
      (await client(baseURL).chat.completions.create({ model: 'sim-model', messages: [{ role: 'user', content: 'hi' }] }, { headers: fast })).choices[0]?.message.content;
    expect(await chat(sidecar.proxyUrl)).toBe(await chat(simulator.url));
  });
});

describe('failures end to end', () => {
  it('closes the simulator request within 100 ms of the client aborting, and counts client_cancelled', async () => {
    const before = sumValues(await scrape(sidecar.adminUrl), 'tokentap_requests_total', { outcome: 'client_cancelled' });
    const closed = new Promise<{ atMs: number; completed: boolean }>((resolve) => simulator.events.once('request-closed', resolve));
    const abortAtMs = performance.now() + 250;
    await exchange(`${sidecar.proxyUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-sim-ttft-ms': '10', 'x-sim-output-tokens': '500' },
      body: JSON.stringify({ model: 'sim-model', stream: true, messages: [{ role: 'user', content: 'hi' }] }),
      abortAfterMs: 250,
    });
    const event = await closed;
    expect(event.completed).toBe(false);
    expect(event.atMs - abortAtMs).toBeLessThan(100);
    await eventually('client_cancelled', async () => sumValues(await scrape(sidecar.adminUrl), 'tokentap_requests_total', { outcome: 'client_cancelled' }), (n) => n === before + 1);
  });

  it.each([
    ['truncate:3', 'truncated'],
    ['reset:3', 'upstream_error'],
    ['status:500', 'upstream_error'],
  ])('counts the simulator fault %s as %s', async (fault, outcome) => {
    const before = sumValues(await scrape(sidecar.adminUrl), 'tokentap_requests_total', { outcome });
    await exchange(`${sidecar.proxyUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-sim-fault': fault, 'x-sim-ttft-ms': '5', 'x-sim-itl-ms': '1' },
      body: JSON.stringify({ model: 'sim-model', stream: true, messages: [{ role: 'user', content: 'hi' }] }),
    });
    await eventually(outcome, async () => sumValues(await scrape(sidecar.adminUrl), 'tokentap_requests_total', { outcome }), (n) => n === before + 1);
  });
});
