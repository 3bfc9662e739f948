import { describe, expect, it } from 'vitest';
import { createOpenAIJsonTap, MAX_JSON_BODY_BYTES } from '../../../src/taps/openai-json.js';
import { runTap } from '../../helpers/tap-harness.js';

/** Non-streamed JSON answers: the usage each API reports, read the same way as its stream's tap reads it. */
function usageOf(body: object | string) {
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  // Split in two to show the body is read whole at the end, not per chunk.
  const bytes = Buffer.from(text);
  const run = runTap(createOpenAIJsonTap, [bytes.subarray(0, 7), bytes.subarray(7)]);
  return {
    input: run.timeline.reportedInputTokens,
    output: run.timeline.reportedOutputTokens,
    problems: run.problems,
    contentEvents: run.timeline.contentEvents,
    errorEvent: run.timeline.errorEvent,
    serverTimings: run.timeline.serverTimings,
  };
}

describe('the JSON (non-streamed) tap', () => {
  it('reads OpenAI chat and completions usage', () => {
    expect(usageOf({ object: 'chat.completion', choices: [], usage: { prompt_tokens: 11, completion_tokens: 13, total_tokens: 24 } })).toMatchObject({ input: 11, output: 13, contentEvents: 0 });
  });

  it('reads the Responses API usage (input_tokens already includes the cached ones)', () => {
    expect(usageOf({ object: 'response', usage: { input_tokens: 30, input_tokens_details: { cached_tokens: 20 }, output_tokens: 5, total_tokens: 35 } })).toMatchObject({ input: 30, output: 5 });
  });

  it('counts Anthropic cache reads and writes as input, as the Messages stream tap does', () => {
    const usage = { input_tokens: 4, cache_creation_input_tokens: 100, cache_read_input_tokens: 900, output_tokens: 7 };
    expect(usageOf({ type: 'message', role: 'assistant', content: [], usage })).toMatchObject({ input: 1004, output: 7 });
  });

  it("reads Ollama's top-level counts", () => {
    expect(usageOf({ model: 'm', done: true, prompt_eval_count: 26, eval_count: 290 })).toMatchObject({ input: 26, output: 290 });
  });

  it('reports an oversized body once and reads nothing from it, the request not failed for it', () => {
    const big = usageOf(`{"pad":"${'x'.repeat(MAX_JSON_BODY_BYTES)}","usage":{"prompt_tokens":1,"completion_tokens":1}}`);
    expect(big).toMatchObject({ problems: ['oversized_body'], errorEvent: false });
    expect(Number.isNaN(big.input) && Number.isNaN(big.output)).toBe(true);
  });

  it('counts a body that is not JSON (a page, an answer cut short) as malformed and as an upstream error: its client cannot parse it', () => {
    for (const body of ['<html>not json</html>', '{"usage":{"prompt_tokens":1,"completion_tokens":1}']) {
      const read = usageOf(body);
      expect(read, body).toMatchObject({ problems: ['malformed_event'], errorEvent: true });
      expect(Number.isNaN(read.input) && Number.isNaN(read.output), body).toBe(true);
    }
  });

  it('counts a 2xx answer carrying an error object as an upstream error, and a null error (a Responses object that succeeded) as none', () => {
    expect(usageOf({ error: { message: 'CUDA out of memory', type: 'InternalServerError' } })).toMatchObject({ errorEvent: true, problems: [] });
    expect(usageOf({ type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } })).toMatchObject({ errorEvent: true });
    expect(usageOf({ object: 'response', status: 'completed', error: null, usage: { input_tokens: 3, output_tokens: 2 } })).toMatchObject({ errorEvent: false, input: 3, output: 2 });
  });

  it('reads a body of exactly the size cap, and refuses one a byte longer', () => {
    const sized = (bytes: number) => {
      const tail = '","usage":{"prompt_tokens":1,"completion_tokens":2}}';
      return `{"pad":"${'x'.repeat(bytes - tail.length - 8)}${tail}`;
    };
    expect(Buffer.byteLength(sized(MAX_JSON_BODY_BYTES))).toBe(MAX_JSON_BODY_BYTES);
    expect(usageOf(sized(MAX_JSON_BODY_BYTES))).toMatchObject({ input: 1, output: 2, problems: [] });
    expect(usageOf(sized(MAX_JSON_BODY_BYTES + 1))).toMatchObject({ problems: ['oversized_body'] });
  });

  it('reads nothing, without failing, from a JSON body that is null, a number or a string', () => {
    for (const body of ['null', '5', '"text"']) {
      const read = usageOf(body);
      expect(Number.isNaN(read.input) && Number.isNaN(read.output), body).toBe(true);
      expect(read.problems, body).toEqual([]);
      expect(read.errorEvent, body).toBe(false);
    }
  });

  it("reads llama.cpp's or Ollama's counts when usage is null or not an object, without failing", () => {
    for (const usage of [null, 5, 'x']) {
      expect(usageOf({ usage, tokens_evaluated: 3, tokens_predicted: 2 }), JSON.stringify(usage)).toMatchObject({ input: 3, output: 2, problems: [] });
      expect(usageOf({ usage, done: true, prompt_eval_count: 4, eval_count: 6 }), JSON.stringify(usage)).toMatchObject({ input: 4, output: 6, problems: [] });
    }
  });

  it('records no server timings for an answer that reports none (an OpenAI chat answer is not an Ollama one with its durations missing)', () => {
    expect(usageOf({ object: 'chat.completion', choices: [], usage: { prompt_tokens: 1, completion_tokens: 1 } }).serverTimings).toBeUndefined();
    expect(usageOf({ model: 'm', done: true, total_duration: 2_000_000 }).serverTimings).toMatchObject({ totalMs: 2 });
  });
});

/*
 * Mutants of src/taps/openai-json.ts that change no behaviour (npm run mutate, each also applied by hand):
 * - the `typeof completion !== 'object'` half of the body guard made false: a number or a string
 *   read as an object has none of the fields, so nothing is read, as for a body that is not one;
 * - `timings !== undefined` made true: the tap is the only writer of serverTimings, once, at the end,
 *   so writing undefined leaves it as it was.
 * Of src/taps/bounded-body.ts (the body this tap keeps):
 * - push()'s `if (this.oversized) return` made false: the size only grows, so the chunk is dropped
 *   by the cap check instead;
 * - json()'s `oversized || size === 0` test made false, or `&&`: what is left is no bytes, which
 *   JSON.parse refuses, giving the same undefined (and end() checks `oversized` first);
 * - json()'s `catch` emptied: it then returns undefined anyway; its `finally` emptied: the chunks
 *   are then released with the tap, dropped with its request just after end() reads them once.
 */
