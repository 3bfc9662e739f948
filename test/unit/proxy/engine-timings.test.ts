import { Writable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../../src/clock/clock.js';
import { engineSplit } from '../../../src/clock/engine-timings.js';
import { loadSettings } from '../../../src/config/load.js';
import { createLogger } from '../../../src/log/logger.js';
import { RequestLineWriter } from '../../../src/log/request-line.js';
import { ModelLabels } from '../../../src/metrics/model-labels.js';
import { Recorder } from '../../../src/metrics/recorder.js';
import { Telemetry } from '../../../src/metrics/telemetry.js';
import { RequestMonitor } from '../../../src/proxy/request-monitor.js';
import { WorkloadMatcher } from '../../../src/slo/workload-matcher.js';
import { histogram, parsePrometheusText } from '../../helpers/prometheus-text.js';
import { chatChunk, sse } from '../../helpers/tap-harness.js';

const telemetries: Telemetry[] = [];
afterEach(async () => {
  await Promise.all(telemetries.splice(0).map((t) => t.shutdown()));
});

/**
 * Runs one request through a monitor on a fake clock: each event arrives at its `atMs` after the
 * request reached the proxy; returns the scraped metrics and the request's log line.
 */
async function run(path: string, contentType: string, events: ReadonlyArray<readonly [atMs: number, body: Buffer]>) {
  const clock = new ManualClock(1000);
  const telemetry = new Telemetry();
  telemetries.push(telemetry);
  const settings = loadSettings({ flags: {}, env: {} });
  const lines: string[] = [];
  const logger = createLogger('info', new Writable({ write: (c: Buffer, _e, cb) => (lines.push(c.toString()), cb()) }));
  const deps = { clock, recorder: new Recorder(telemetry.meter, settings.buckets), models: new ModelLabels(8), logger, requestLines: new RequestLineWriter(logger), workloads: new WorkloadMatcher(settings.workloads) };
  const monitor = new RequestMonitor(deps, 'POST', path, {});
  monitor.requestBody('m');
  monitor.response(200, contentType);
  let nowMs = 0;
  for (const [atMs, body] of events) {
    clock.advance(atMs - nowMs);
    nowMs = atMs;
    monitor.body(body);
  }
  monitor.bodyEnd();
  monitor.delivered();
  const metrics = parsePrometheusText(await telemetry.scrape());
  const h = (name: string) => histogram(metrics, name, { workload: 'default', gen_ai_request_model: 'm' });
  const log = JSON.parse(lines.find((l) => l.includes('"msg":"request"')) as string) as Record<string, unknown>;
  return { h, log };
}

const at = (atMs: number, ...bodies: Buffer[]): Array<readonly [number, Buffer]> => bodies.map((b) => [atMs, b] as const);
const ndjson = (...lines: object[]): Buffer[] => lines.map((l) => Buffer.from(`${JSON.stringify(l)}\n`));

describe('engine timings split the wire TTFT (fake clock: wire TTFT 180 ms, engine reports 150 ms)', () => {
  it('vLLM per-request metrics: queue 40 ms + prefill 110 ms is the engine TTFT, 30 ms lies outside the engine', async () => {
    const usage = { prompt_tokens: 5, completion_tokens: 2, total_tokens: 7 };
    const metrics = { time_to_first_token_ms: 110, generation_time_ms: 20, queue_time_ms: 40, mean_itl_ms: 20, tokens_per_second: 15.4 };
    const { h, log } = await run('/v1/chat/completions', 'text/event-stream', [
      ...at(10, ...sse(chatChunk({ role: 'assistant', content: '' }))),
      ...at(180, ...sse(chatChunk({ content: 'a' }))),
      ...at(200, ...sse(chatChunk({ content: 'b' }), chatChunk({}, {}, 'stop'))),
      ...at(201, ...sse({ id: 'chatcmpl-1', object: 'chat.completion.chunk', model: 'm', choices: [], usage, metrics }, '[DONE]')),
    ]);
    expect(h('gen_ai_server_time_to_first_token_seconds')).toMatchObject({ count: 1, sum: 0.18 });
    expect(h('tokentap_engine_time_to_first_token_seconds')).toMatchObject({ count: 1, sum: 0.15 });
    expect(h('tokentap_outside_engine_time_to_first_token_seconds')).toMatchObject({ count: 1, sum: 0.03 });
    expect(h('tokentap_engine_queue_time_seconds')).toMatchObject({ count: 1, sum: 0.04 });
    expect(h('tokentap_engine_prefill_time_seconds')).toMatchObject({ count: 1, sum: 0.11 });
    expect(log['outside_engine_ttft_ms']).toBe(30);
    expect(log['server_timings']).toEqual({ queueMs: 40, promptMs: 110, generationMs: 20 });
  });

  it('llama.cpp OpenAI-compatible stream: timings.prompt_ms 150 on the finish chunk is the engine TTFT; with no queue reported, the 30 ms rest is queue or outside, not outside', async () => {
    const final = chatChunk({}, { usage: { prompt_tokens: 4, completion_tokens: 2, total_tokens: 6 }, timings: { prompt_n: 4, prompt_ms: 150, predicted_n: 2, predicted_ms: 20 } }, 'stop');
    const { h, log } = await run('/v1/chat/completions', 'text/event-stream', [
      ...at(180, ...sse(chatChunk({ content: 'a' }))),
      ...at(200, ...sse(chatChunk({ content: 'b' }), final, '[DONE]')),
    ]);
    expect(h('tokentap_engine_time_to_first_token_seconds')).toMatchObject({ count: 1, sum: 0.15 });
    expect(h('tokentap_queue_or_outside_engine_time_to_first_token_seconds')).toMatchObject({ count: 1, sum: 0.03 });
    expect(h('tokentap_outside_engine_time_to_first_token_seconds').count).toBe(0);
    expect(log['queue_or_outside_engine_ttft_ms']).toBe(30);
    expect(log).not.toHaveProperty('outside_engine_ttft_ms');
    expect(h('tokentap_engine_prefill_time_seconds')).toMatchObject({ count: 1, sum: 0.15 });
    expect(h('tokentap_engine_queue_time_seconds').count).toBe(0);
  });

  it('llama.cpp timings_per_token: the cumulative timings of a content chunk are not read, only the final one', async () => {
    const timings = (promptMs: number) => ({ prompt_n: 4, prompt_ms: promptMs, predicted_n: 1, predicted_ms: 1 });
    const { h } = await run('/v1/chat/completions', 'text/event-stream', [
      ...at(180, ...sse(chatChunk({ content: 'a' }, { timings: timings(999) }))),
      ...at(200, ...sse(chatChunk({}, { timings: timings(150) }, 'stop'), '[DONE]')),
    ]);
    expect(h('tokentap_engine_time_to_first_token_seconds')).toMatchObject({ count: 1, sum: 0.15 });
  });

  it('llama.cpp native /completion: the stop event timings.prompt_ms 150', async () => {
    const { h } = await run('/completion', 'text/event-stream', [
      ...at(180, ...sse({ content: 'a', stop: false, tokens_predicted: 1 })),
      ...at(200, ...sse({ content: '', stop: true, tokens_predicted: 1, tokens_evaluated: 4, timings: { prompt_ms: 150, predicted_ms: 20 } })),
    ]);
    expect(h('tokentap_engine_time_to_first_token_seconds')).toMatchObject({ count: 1, sum: 0.15 });
    expect(h('tokentap_queue_or_outside_engine_time_to_first_token_seconds')).toMatchObject({ count: 1, sum: 0.03 });
    expect(h('tokentap_outside_engine_time_to_first_token_seconds').count).toBe(0);
  });

  it('Ollama: load_duration 20 ms + prompt_eval_duration 130 ms (nanoseconds) is the engine TTFT', async () => {
    const { h } = await run('/api/chat', 'application/x-ndjson', [
      ...at(180, ...ndjson({ model: 'm', message: { role: 'assistant', content: 'a' }, done: false })),
      ...at(200, ...ndjson({ model: 'm', message: { role: 'assistant', content: '' }, done: true, total_duration: 200_000_000, load_duration: 20_000_000, prompt_eval_count: 4, prompt_eval_duration: 130_000_000, eval_count: 1, eval_duration: 20_000_000 })),
    ]);
    expect(h('tokentap_engine_time_to_first_token_seconds')).toMatchObject({ count: 1, sum: 0.15 });
    expect(h('tokentap_queue_or_outside_engine_time_to_first_token_seconds')).toMatchObject({ count: 1, sum: 0.03 });
    expect(h('tokentap_outside_engine_time_to_first_token_seconds').count).toBe(0);
    expect(h('tokentap_engine_prefill_time_seconds')).toMatchObject({ count: 1, sum: 0.13 });
  });

  it('llama.cpp non-streamed chat answer: its timings.prompt_ms 150 is the engine TTFT and prefill, as in a stream (no streamed token, so no rest)', async () => {
    // The shape of llama-server's non-streamed /v1/chat/completions answer (tools/server/README.md): usage plus timings.
    const answer = {
      choices: [{ finish_reason: 'stop', index: 0, message: { role: 'assistant', content: 'ab' } }],
      created: 1795960309,
      model: 'm',
      object: 'chat.completion',
      usage: { completion_tokens: 2, prompt_tokens: 4, total_tokens: 6 },
      timings: { prompt_n: 4, prompt_ms: 150, prompt_per_token_ms: 37.5, prompt_per_second: 26.7, predicted_n: 2, predicted_ms: 20, predicted_per_token_ms: 10, predicted_per_second: 100 },
    };
    const { h, log } = await run('/v1/chat/completions', 'application/json; charset=utf-8', at(200, Buffer.from(JSON.stringify(answer))));
    expect(h('tokentap_engine_time_to_first_token_seconds')).toMatchObject({ count: 1, sum: 0.15 });
    expect(h('tokentap_engine_prefill_time_seconds')).toMatchObject({ count: 1, sum: 0.15 });
    expect(h('tokentap_queue_or_outside_engine_time_to_first_token_seconds').count).toBe(0);
    expect(log['server_timings']).toEqual({ promptMs: 150, generationMs: 20 });
  });

  it('llama.cpp native /completion non-streamed: tokens and timings from the JSON answer', async () => {
    const answer = { content: 'ab', stop: true, tokens_predicted: 2, tokens_evaluated: 4, timings: { prompt_n: 4, prompt_ms: 150, predicted_n: 2, predicted_ms: 20 } };
    const { h, log } = await run('/completion', 'application/json; charset=utf-8', at(200, Buffer.from(JSON.stringify(answer))));
    expect(h('tokentap_engine_prefill_time_seconds')).toMatchObject({ count: 1, sum: 0.15 });
    expect(log).toMatchObject({ input_tokens: 4, output_tokens: 2, token_source: 'usage' });
  });

  it('Ollama non-streamed answer: load_duration + prompt_eval_duration are the engine TTFT', async () => {
    const answer = { model: 'm', message: { role: 'assistant', content: 'ab' }, done: true, total_duration: 200_000_000, load_duration: 20_000_000, prompt_eval_count: 4, prompt_eval_duration: 130_000_000, eval_count: 2, eval_duration: 20_000_000 };
    const { h } = await run('/api/chat', 'application/json; charset=utf-8', at(200, Buffer.from(JSON.stringify(answer))));
    expect(h('tokentap_engine_time_to_first_token_seconds')).toMatchObject({ count: 1, sum: 0.15 });
    expect(h('tokentap_engine_prefill_time_seconds')).toMatchObject({ count: 1, sum: 0.13 });
  });

  it('records no engine sample at all for a stream whose engine reports nothing (vLLM without the flag, TGI)', async () => {
    const vllm = await run('/v1/chat/completions', 'text/event-stream', [
      ...at(180, ...sse(chatChunk({ content: 'a' }))),
      ...at(200, ...sse(chatChunk({}, { usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } }, 'stop'), '[DONE]')),
    ]);
    const tgi = await run('/generate_stream', 'text/event-stream', [
      ...at(180, ...sse({ index: 1, token: { id: 1, text: 'a', logprob: 0, special: false }, generated_text: null, details: null })),
      ...at(200, ...sse({ index: 2, token: { id: 2, text: '</s>', logprob: 0, special: true }, generated_text: 'a', details: { finish_reason: 'eos_token', generated_tokens: 2, seed: null, input_length: 3 } })),
    ]);
    for (const { h, log } of [vllm, tgi]) {
      expect(h('gen_ai_server_time_to_first_token_seconds').count).toBe(1);
      for (const name of ['engine_time_to_first_token', 'outside_engine_time_to_first_token', 'queue_or_outside_engine_time_to_first_token', 'engine_queue_time', 'engine_prefill_time']) {
        expect(h(`tokentap_${name}_seconds`).count).toBe(0);
      }
      expect(log).not.toHaveProperty('outside_engine_ttft_ms');
    }
  });
});

describe('engineSplit', () => {
  it('has no outside-engine sample when the engine claims more than the wire TTFT', () => {
    expect(engineSplit({ promptMs: 200 }, 180)).toMatchObject({ engineTtftMs: 200, outsideEngineTtftMs: Number.NaN });
  });

  it('has no engine TTFT from a queue time alone, but keeps the queue time', () => {
    expect(engineSplit({ queueMs: 40 }, 180)).toMatchObject({ engineTtftMs: Number.NaN, queueMs: 40, outsideEngineTtftMs: Number.NaN });
  });

  it('has an engine TTFT but no outside-engine time for a request without a streamed token', () => {
    expect(engineSplit({ promptMs: 150 }, Number.NaN)).toMatchObject({ engineTtftMs: 150, outsideEngineTtftMs: Number.NaN, queueOrOutsideEngineTtftMs: Number.NaN });
  });

  it('calls the rest outside the engine only when the engine reported its queue: llama.cpp, 2 slots, 8 streams (1,844 ms wire TTFT, 35 ms prefill)', () => {
    // The reproduction of issue 23 item 8: 1,809 of 1,844 ms were the wait for a slot, not the network.
    expect(engineSplit({ promptMs: 35 }, 1844)).toMatchObject({ engineTtftMs: 35, outsideEngineTtftMs: Number.NaN, queueOrOutsideEngineTtftMs: 1809 });
    expect(engineSplit({ queueMs: 1800, promptMs: 35 }, 1844)).toMatchObject({ engineTtftMs: 1835, outsideEngineTtftMs: 9, queueOrOutsideEngineTtftMs: Number.NaN });
  });
});
