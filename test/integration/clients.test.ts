import Anthropic from '@anthropic-ai/sdk';
import { Ollama } from 'ollama';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { histogram, scrape, sumValues } from '../helpers/prometheus-text.js';
import { eventually, startTestSidecar } from '../helpers/sidecar.js';

/**
 * The real client libraries against the built-in simulator, once directly and once through the
 * tokentap proxy: each must get exactly the same result (content, usage, event sequence), and the
 * proxy must measure what the client received. Ids and timestamps are random or wall-clock per
 * response, so the comparisons leave them out; everything else is fixed by `x-sim-seed`.
 */

let simulator: RunningSimulator;
let sidecar: Awaited<ReturnType<typeof startTestSidecar>>;

beforeAll(async () => {
  simulator = await startSimulator({ port: 0, ttftMs: 20, itlMs: 2, outputTokens: 12 });
  sidecar = await startTestSidecar(simulator.url);
});

afterAll(async () => {
  await sidecar?.close();
  await simulator?.close();
});

const SIM_HEADERS = { 'x-sim-seed': '42' };
const OUTPUT_TOKENS = 12;

/** Runs `collect` directly and through the proxy, in that order. */
async function bothWays<T>(collect: (baseUrl: string) => Promise<T>): Promise<{ direct: T; proxied: T }> {
  const direct = await collect(simulator.url);
  const proxied = await collect(sidecar.proxyUrl);
  return { direct, proxied };
}

/**
 * What the proxy recorded for one model: one streamed request with a first token, the output
 * tokens the stream reported, and the outcome `completed`.
 */
async function expectMeasured(model: string, outputTokens: number): Promise<void> {
  const labels = { gen_ai_request_model: model };
  const metrics = await eventually(
    `${model} recorded`,
    () => scrape(sidecar.adminUrl),
    (m) => sumValues(m, 'tokentap_requests_total', labels) === 1,
  );
  expect(sumValues(metrics, 'tokentap_requests_total', { ...labels, outcome: 'completed' })).toBe(1);
  expect(histogram(metrics, 'gen_ai_server_time_to_first_token_seconds', labels).count).toBe(1);
  expect(histogram(metrics, 'gen_ai_client_token_usage', { ...labels, gen_ai_token_type: 'output' }).sum).toBe(outputTokens);
}

const openai = (baseUrl: string): OpenAI => new OpenAI({ baseURL: `${baseUrl}/v1`, apiKey: 'sk-test', maxRetries: 0 });

describe('openai client', () => {
  it('streams chat completions with the same chunks directly and through the proxy', async () => {
    const model = 'clients-chat';
    const { direct, proxied } = await bothWays(async (baseUrl) => {
      const stream = await openai(baseUrl).chat.completions.create(
        { model, stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'hello' }] },
        { headers: SIM_HEADERS },
      );
      const chunks: unknown[] = [];
      for await (const chunk of stream) {
        chunks.push({ object: chunk.object, model: chunk.model, choices: chunk.choices, usage: chunk.usage });
      }
      return chunks;
    });
    expect(proxied).toEqual(direct);
    // Role prelude, 12 content chunks, the stop chunk, the usage chunk.
    expect(direct).toHaveLength(OUTPUT_TOKENS + 3);
    expect(direct.at(-1)).toMatchObject({ usage: { completion_tokens: OUTPUT_TOKENS } });
    await expectMeasured(model, OUTPUT_TOKENS);
  });

  it('streams completions with the same chunks directly and through the proxy', async () => {
    const model = 'clients-completions';
    const { direct, proxied } = await bothWays(async (baseUrl) => {
      const stream = await openai(baseUrl).completions.create(
        { model, prompt: 'Once upon a time', stream: true, max_tokens: 8, stream_options: { include_usage: true } },
        { headers: SIM_HEADERS },
      );
      const chunks: unknown[] = [];
      for await (const chunk of stream) chunks.push({ choices: chunk.choices, usage: chunk.usage });
      return chunks;
    });
    expect(proxied).toEqual(direct);
    // 8 text chunks, the last with finish_reason length, then the usage chunk.
    expect(direct).toHaveLength(9);
    expect(direct.at(-1)).toMatchObject({ usage: { completion_tokens: 8 } });
    await expectMeasured(model, 8);
  });

  it('streams a Responses API call (responses.create stream:true) with the same events and final response', async () => {
    const model = 'clients-responses';
    const { direct, proxied } = await bothWays(async (baseUrl) => {
      const stream = await openai(baseUrl).responses.create({ model, input: 'Tell me a story', stream: true }, { headers: SIM_HEADERS });
      const events: unknown[] = [];
      let text = '';
      let usage: unknown;
      for await (const event of stream) {
        if (event.type === 'response.output_text.delta') text += event.delta;
        if (event.type === 'response.completed') usage = event.response.usage;
        events.push({ type: event.type, sequence: event.sequence_number, ...('delta' in event ? { delta: event.delta } : {}) });
      }
      return { events, text, usage };
    });
    expect(proxied).toEqual(direct);
    expect(direct.events).toHaveLength(2 + 2 + OUTPUT_TOKENS + 4);
    expect(direct.usage).toMatchObject({ output_tokens: OUTPUT_TOKENS, total_tokens: (direct.usage as { input_tokens: number }).input_tokens + OUTPUT_TOKENS });
    await expectMeasured(model, OUTPUT_TOKENS);
  });

  it('accumulates the same final response with the responses.stream helper', async () => {
    const { direct, proxied } = await bothWays(async (baseUrl) => {
      const stream = openai(baseUrl).responses.stream({ model: 'clients-responses-helper', input: 'hi' }, { headers: SIM_HEADERS });
      const final = await stream.finalResponse();
      return { status: final.status, text: final.output_text, usage: final.usage };
    });
    expect(proxied).toEqual(direct);
    expect(direct.status).toBe('completed');
    expect(direct.text.length).toBeGreaterThan(0);
  });
});

describe('@anthropic-ai/sdk client', () => {
  it('streams messages (messages.stream) with the same events and final message directly and through the proxy', async () => {
    const model = 'clients-anthropic';
    const { direct, proxied } = await bothWays(async (baseUrl) => {
      const client = new Anthropic({ baseURL: baseUrl, apiKey: 'sk-ant-test', maxRetries: 0 });
      const stream = client.messages.stream(
        { model, max_tokens: 1024, messages: [{ role: 'user', content: 'Hello, Claude' }] },
        { headers: SIM_HEADERS },
      );
      const events: unknown[] = [];
      for await (const event of stream) {
        events.push(event.type === 'message_start' ? { type: event.type, usage: event.message.usage } : event);
      }
      const final = await stream.finalMessage();
      return { events, content: final.content, stopReason: final.stop_reason, usage: final.usage };
    });
    expect(proxied).toEqual(direct);
    expect(direct.stopReason).toBe('end_turn');
    expect(direct.usage.output_tokens).toBe(OUTPUT_TOKENS);
    expect((direct.events as { type: string }[]).map((event) => event.type)).toEqual([
      'message_start',
      'content_block_start',
      ...Array<string>(OUTPUT_TOKENS).fill('content_block_delta'),
      'content_block_stop',
      'message_delta',
      'message_stop',
    ]);
    await expectMeasured(model, OUTPUT_TOKENS);
  });
});

describe('@anthropic-ai/sdk client meeting an in-stream error', () => {
  it('raises the same overloaded_error directly and through the proxy, which records an upstream error', async () => {
    const model = 'clients-anthropic-error';
    const { direct, proxied } = await bothWays(async (baseUrl) => {
      const client = new Anthropic({ baseURL: baseUrl, apiKey: 'sk-ant-test', maxRetries: 0 });
      const stream = client.messages.stream(
        { model, max_tokens: 1024, messages: [{ role: 'user', content: 'Hello, Claude' }] },
        { headers: { ...SIM_HEADERS, 'x-sim-fault': 'error:3' } },
      );
      let text = '';
      stream.on('text', (delta) => (text += delta));
      const error = await stream.finalMessage().then(
        () => undefined,
        (thrown: unknown) => thrown,
      );
      return { text, error: error instanceof Anthropic.APIError ? { name: error.name, error: error.error } : error };
    });
    expect(proxied).toEqual(direct);
    expect(direct.error).toEqual({ name: 'APIError', error: { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } } });
    expect(direct.text.length).toBeGreaterThan(0);
    const labels = { gen_ai_request_model: model };
    const metrics = await eventually(`${model} recorded`, () => scrape(sidecar.adminUrl), (m) => sumValues(m, 'tokentap_requests_total', labels) === 1);
    expect(sumValues(metrics, 'tokentap_requests_total', { ...labels, outcome: 'upstream_error' })).toBe(1);
  });
});

describe('ollama client', () => {
  it('streams chat with the same parts directly and through the proxy', async () => {
    const model = 'clients-ollama';
    const { direct, proxied } = await bothWays(async (host) => {
      const client = new Ollama({ host, headers: SIM_HEADERS });
      const stream = await client.chat({ model, messages: [{ role: 'user', content: 'Why is the sky blue?' }], stream: true });
      const parts: unknown[] = [];
      for await (const part of stream) {
        // Durations and created_at are measured per response; everything else must match.
        parts.push({
          model: part.model,
          message: part.message,
          done: part.done,
          done_reason: part.done_reason,
          prompt_eval_count: part.prompt_eval_count,
          eval_count: part.eval_count,
        });
      }
      return parts;
    });
    expect(proxied).toEqual(direct);
    expect(direct).toHaveLength(OUTPUT_TOKENS + 1);
    expect(direct.at(-1)).toMatchObject({ done: true, done_reason: 'stop', eval_count: OUTPUT_TOKENS });
    await expectMeasured(model, OUTPUT_TOKENS);
  });
});
