import { describe, expect, it } from 'vitest';
import { expectedTokens, rawRequest, simulator } from './helpers.js';

const CHAT = { model: 'llama3.2', messages: [{ role: 'user', content: 'Hello there, simulator!' }] };
const PROMPT_TOKENS = 6;
/** Go's RFC 3339 with nanoseconds, trailing zeros trimmed, UTC. */
const GO_TIME = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d*[1-9])?Z$/;

function lines(body: Buffer): Record<string, unknown>[] {
  const text = body.toString('utf8');
  expect(text.endsWith('\n')).toBe(true);
  return text
    .slice(0, -1)
    .split('\n')
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

describe('Ollama /api/chat stream', () => {
  it('streams NDJSON by default: one object per chunk, then done:true with done_reason and the metrics in Go field order', async () => {
    const sim = await simulator({ outputTokens: 3, ttftMs: 60, itlMs: 20 });
    const res = await rawRequest(sim.port, 'POST', '/api/chat', CHAT, { 'x-sim-seed': '7' });
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('application/x-ndjson');
    expect(res.complete).toBe(true);
    const objects = lines(res.body);
    // Each line leaves as its own HTTP chunk.
    expect(res.chunks.map((chunk) => chunk.toString('utf8'))).toEqual(objects.map((object) => `${JSON.stringify(object)}\n`));
    const tokens = expectedTokens(7, 3);
    objects.slice(0, 3).forEach((object, k) => {
      expect(Object.keys(object)).toEqual(['model', 'created_at', 'message', 'done']);
      expect(object).toEqual({ model: 'llama3.2', created_at: object['created_at'], message: { role: 'assistant', content: tokens[k] }, done: false });
      expect(object['created_at']).toMatch(GO_TIME);
    });
    const final = objects[3] ?? {};
    expect(Object.keys(final)).toEqual([
      'model',
      'created_at',
      'message',
      'done_reason',
      'done',
      'total_duration',
      'load_duration',
      'prompt_eval_count',
      'prompt_eval_duration',
      'eval_count',
      'eval_duration',
    ]);
    expect(final).toMatchObject({ message: { role: 'assistant', content: '' }, done_reason: 'stop', done: true, prompt_eval_count: PROMPT_TOKENS, eval_count: 3 });
    // Durations are integer nanoseconds that add up: load and prompt eval end at the first token
    // (due 60 ms after the request), the whole ends with the done object (due at 60 + 3 × 20 ms).
    // Timers only fire late, so these are lower bounds; the upper one only catches unit mistakes.
    const ns = (key: string): number => final[key] as number;
    for (const key of ['total_duration', 'load_duration', 'prompt_eval_duration', 'eval_duration']) expect(Number.isInteger(ns(key))).toBe(true);
    expect(ns('load_duration') + ns('prompt_eval_duration')).toBeGreaterThanOrEqual(59e6);
    expect(ns('total_duration')).toBeGreaterThanOrEqual(119e6);
    expect(Math.abs(ns('total_duration') - ns('load_duration') - ns('prompt_eval_duration') - ns('eval_duration'))).toBeLessThan(1e6);
    expect(ns('total_duration')).toBeLessThan(5e9);
  });

  it('puts done_reason length on the done object when options.num_predict caps the output', async () => {
    const sim = await simulator({ outputTokens: 10 });
    const res = await rawRequest(sim.port, 'POST', '/api/chat', { ...CHAT, options: { num_predict: 2 } });
    const objects = lines(res.body);
    expect(objects).toHaveLength(3);
    expect(objects[2]).toMatchObject({ done: true, done_reason: 'length', eval_count: 2 });
  });

  it('ends with an {"error"} line for x-sim-fault error:<n>', async () => {
    const sim = await simulator({ outputTokens: 10 });
    const res = await rawRequest(sim.port, 'POST', '/api/chat', CHAT, { 'x-sim-fault': 'error:2' });
    const objects = lines(res.body);
    expect(objects).toHaveLength(3);
    expect(objects[2]).toEqual({ error: 'Simulated failure (x-sim-fault: error:2)' });
  });

  it('answers stream:false with the one done object holding the whole message', async () => {
    const sim = await simulator({ outputTokens: 4 });
    const res = await rawRequest(sim.port, 'POST', '/api/chat', { ...CHAT, stream: false }, { 'x-sim-seed': '3' });
    expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
    const body = JSON.parse(res.body.toString('utf8')) as Record<string, unknown>;
    expect(body).toMatchObject({ message: { role: 'assistant', content: expectedTokens(3, 4).join('') }, done: true, done_reason: 'stop', eval_count: 4 });
  });

  it('refuses a request without a model as Ollama does', async () => {
    const sim = await simulator();
    const res = await rawRequest(sim.port, 'POST', '/api/chat', { messages: [] });
    expect(res.status).toBe(400);
    expect(res.body.toString('utf8')).toBe('{"error":"model is required"}');
  });
});

describe('Ollama /api/generate', () => {
  it('streams response fields and ends with done, done_reason, context and the metrics, in GenerateResponse order', async () => {
    const sim = await simulator({ outputTokens: 2 });
    const res = await rawRequest(sim.port, 'POST', '/api/generate', { model: 'llama3.2', prompt: 'abcd' }, { 'x-sim-seed': '11' });
    expect(res.headers['content-type']).toBe('application/x-ndjson');
    const objects = lines(res.body);
    const tokens = expectedTokens(11, 2);
    expect(objects.slice(0, 2).map((object) => [Object.keys(object), object['response'], object['done']])).toEqual([
      [['model', 'created_at', 'response', 'done'], tokens[0], false],
      [['model', 'created_at', 'response', 'done'], tokens[1], false],
    ]);
    const final = objects[2] ?? {};
    expect(Object.keys(final).slice(0, 6)).toEqual(['model', 'created_at', 'response', 'done', 'done_reason', 'context']);
    expect(final).toMatchObject({ response: '', done: true, done_reason: 'stop', prompt_eval_count: 1, eval_count: 2 });
  });
});
