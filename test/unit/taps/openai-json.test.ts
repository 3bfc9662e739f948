import { describe, expect, it } from 'vitest';
import { createOpenAIJsonTap, MAX_JSON_BODY_BYTES } from '../../../src/taps/openai-json.js';
import { runTap } from '../../helpers/tap-harness.js';

/** Non-streamed JSON answers: the usage each API reports, read the same way as its stream's tap reads it. */
function usageOf(body: object | string) {
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  // Split in two to show the body is read whole at the end, not per chunk.
  const bytes = Buffer.from(text);
  const run = runTap(createOpenAIJsonTap, [bytes.subarray(0, 7), bytes.subarray(7)]);
  return { input: run.timeline.reportedInputTokens, output: run.timeline.reportedOutputTokens, problems: run.problems, contentEvents: run.timeline.contentEvents };
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

  it('reports an oversized body once and reads nothing from it; not JSON reads nothing', () => {
    const big = usageOf(`{"pad":"${'x'.repeat(MAX_JSON_BODY_BYTES)}","usage":{"prompt_tokens":1,"completion_tokens":1}}`);
    expect(big).toMatchObject({ problems: ['oversized_body'] });
    expect(Number.isNaN(big.input) && Number.isNaN(big.output)).toBe(true);
    const html = usageOf('<html>not json</html>');
    expect(Number.isNaN(html.input) && Number.isNaN(html.output) && html.problems.length === 0).toBe(true);
  });
});
