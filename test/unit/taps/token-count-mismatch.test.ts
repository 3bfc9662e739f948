import { describe, expect, it } from 'vitest';
import { createOpenAISseTap } from '../../../src/taps/openai-sse.js';
import { llamacppStream, splitEvents, vllmStream } from '../../helpers/fixtures.js';
import { chatChunk, runTap, sse } from '../../helpers/tap-harness.js';

/**
 * tokentap_token_count_mismatches_total counts real disagreements only (issue 23 item 9): a stream
 * that carried more tokens than the server reports. Against a healthy llama.cpp it counted 2-7
 * streams in 800, every one a token held back inside a multi-byte UTF-8 character, which a healthy
 * server sends that way.
 */

const usageChunk = (completionTokens: number) => ({ id: 'chatcmpl-1', object: 'chat.completion.chunk', model: 'm', choices: [], usage: { prompt_tokens: 3, completion_tokens: completionTokens, total_tokens: 3 + completionTokens } });

describe('token count mismatches', () => {
  it('are not counted for llama.cpp holding a token inside a multi-byte character (real capture: 127 content events, usage 128)', () => {
    const run = runTap(createOpenAISseTap, splitEvents(llamacppStream('chat-completions-held-utf8-token.sse')));
    expect({ events: run.timeline.contentEvents, output: run.timeline.outputTokens }).toEqual({ events: 127, output: 128 });
    expect(run.timeline.tokenCountMismatch).toBe(false);
  });

  it("are not counted for vLLM's empty deltas with a final usage (real capture: 22 content events, 24 tokens)", () => {
    const events = splitEvents(vllmStream('chat.sse'));
    const done = events.pop() as Buffer;
    expect(done.toString().trim()).toBe('data: [DONE]');
    const run = runTap(createOpenAISseTap, [...events, ...sse(usageChunk(24)), done]);
    expect({ events: run.timeline.contentEvents, counted: run.timeline.countedTokens, output: run.timeline.outputTokens }).toEqual({ events: 22, counted: 22, output: 24 });
    expect(run.timeline.tokenCountMismatch).toBe(false);
  });

  it('are counted when the stream carried more tokens than the usage reports (three content events, usage 2)', () => {
    const run = runTap(createOpenAISseTap, sse(chatChunk({ content: 'a' }), chatChunk({ content: 'b' }), chatChunk({ content: 'c' }), chatChunk({}, {}, 'stop'), usageChunk(2), '[DONE]'));
    expect(run.timeline.tokenCountMismatch).toBe(true);
  });

  it('are counted when per-chunk cumulative counts exceed the final usage (llama.cpp timings_per_token, predicted_n 5, usage 4)', () => {
    const timed = (content: string, predicted: number) => chatChunk({ content }, { timings: { prompt_n: 3, prompt_ms: 1, predicted_n: predicted, predicted_ms: 1 } });
    const final = chatChunk({}, { usage: { prompt_tokens: 3, completion_tokens: 4, total_tokens: 7 }, timings: { prompt_n: 3, prompt_ms: 1, predicted_n: 4, predicted_ms: 1 } }, 'stop');
    const run = runTap(createOpenAISseTap, sse(timed('a', 1), timed('b', 3), timed('c', 5), final, '[DONE]'));
    expect(run.timeline.countedTokens).toBe(5);
    expect(run.timeline.tokenCountMismatch).toBe(true);
  });
});
