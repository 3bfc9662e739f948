import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { VOCABULARY } from '../../../src/simulator/vocabulary.js';
import { expectedTokens, rawRequest, simulator, sseBlocks } from './helpers.js';

/** The real llama.cpp b4747 capture the wire module is modelled on. */
const CAPTURE = readFileSync(new URL('../../fixtures/streams/llamacpp/completion-native.sse', import.meta.url), 'utf8');

function keysOf(data: string | undefined): string[] {
  return Object.keys(JSON.parse(data ?? '{}') as object);
}

describe('llama.cpp native /completion stream', () => {
  it('sends partial results with content and token ids, then one stop:true event with timings, and no [DONE]', async () => {
    const sim = await simulator({ outputTokens: 3, ttftMs: 40, itlMs: 10 });
    const res = await rawRequest(sim.port, 'POST', '/completion', { prompt: 'Once upon a time', stream: true }, { 'x-sim-seed': '7' });
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('text/event-stream');
    const blocks = sseBlocks(res.body);
    expect(res.body.toString('utf8')).not.toContain('[DONE]');
    const tokens = expectedTokens(7, 3);
    // 'Once upon a time' is 16 bytes: 4 prompt tokens.
    expect(blocks.slice(0, 3).map((block) => block.data)).toEqual(
      tokens.map(
        (text, k) =>
          `{"index":0,"content":${JSON.stringify(text)},"tokens":[${1000 + VOCABULARY.indexOf(text)}],"stop":false,"id_slot":-1,"tokens_predicted":${k + 1},"tokens_evaluated":4}`,
      ),
    );
    const final = JSON.parse(blocks[3]?.data ?? '{}') as Record<string, unknown> & { timings: Record<string, number> };
    expect(blocks).toHaveLength(4);
    expect(final).toMatchObject({ index: 0, content: '', tokens: [], stop: true, tokens_predicted: 3, tokens_evaluated: 4, stop_type: 'eos', tokens_cached: 7 });
    expect(final.timings.prompt_n).toBe(4);
    expect(final.timings.predicted_n).toBe(3);
    // prompt_ms runs to the first token (due at 40 ms), predicted_ms from there to the final
    // event (due at 40 + 3 × 10 ms); timers only fire late, so these are lower bounds.
    expect(final.timings.prompt_ms).toBeGreaterThanOrEqual(39);
    expect((final.timings.prompt_ms ?? 0) + (final.timings.predicted_ms ?? 0)).toBeGreaterThanOrEqual(69);
    expect(final.timings.predicted_per_second).toBeCloseTo((1e3 * 3) / (final.timings.predicted_ms ?? 1), 6);
  });

  it('writes the same fields, in the same order, as the real llama.cpp capture', async () => {
    const captured = sseBlocks(CAPTURE);
    const sim = await simulator({ outputTokens: 2 });
    const res = await rawRequest(sim.port, 'POST', '/completion', { prompt: 'Once upon a time', stream: true, n_predict: 2 });
    const simulated = sseBlocks(res.body);
    expect(keysOf(simulated[0]?.data)).toEqual(keysOf(captured[0]?.data));
    const finalSim = JSON.parse(simulated.at(-1)?.data ?? '{}') as Record<string, Record<string, unknown>>;
    const finalCapture = JSON.parse(captured.at(-1)?.data ?? '{}') as Record<string, Record<string, unknown>>;
    expect(Object.keys(finalSim)).toEqual(Object.keys(finalCapture));
    expect(Object.keys(finalSim['timings'] ?? {})).toEqual(Object.keys(finalCapture['timings'] ?? {}));
    expect(Object.keys(finalSim['generation_settings'] ?? {})).toEqual(Object.keys(finalCapture['generation_settings'] ?? {}));
    expect(finalSim['stop_type']).toBe('limit');
  });

  it('answers stream:false with the final object holding the whole content', async () => {
    const sim = await simulator({ outputTokens: 3 });
    const res = await rawRequest(sim.port, 'POST', '/completion', { prompt: 'x' }, { 'x-sim-seed': '5' });
    expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(JSON.parse(res.body.toString('utf8'))).toMatchObject({ content: expectedTokens(5, 3).join(''), stop: true, tokens_predicted: 3 });
  });

  it('sends an SSE event named error for x-sim-fault error:<n>', async () => {
    const sim = await simulator({ outputTokens: 5 });
    const res = await rawRequest(sim.port, 'POST', '/completion', { prompt: 'x', stream: true }, { 'x-sim-fault': 'error:1' });
    expect(res.body.toString('utf8').split('\n\n').at(-2)).toBe(
      'error: {"error":{"code":500,"message":"Simulated failure (x-sim-fault: error:1)","type":"server_error"}}',
    );
  });
});
