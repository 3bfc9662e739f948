import { describe, expect, it } from 'vitest';
import { createOpenAISseTap } from '../../../src/taps/openai-sse.js';
import { randomChunks, splitEvents, vllmStream, withContinuousUsage } from '../../helpers/fixtures.js';
import { runTap, sse, chatChunk } from '../../helpers/tap-harness.js';

/** The capture's chunks, parsed, with whether each is a content event (non-empty delta.content or text). */
function chunksOf(stream: Buffer) {
  return splitEvents(stream)
    .map((e) => e.toString('utf8').replace(/^data: /, '').trim())
    .filter((data) => data.startsWith('{'))
    .map((data) => JSON.parse(data) as { choices: Array<{ delta?: { content?: string }; text?: string }>; usage?: { completion_tokens: number } })
    .map((chunk) => ({ chunk, content: chunk.choices.some((c) => (c.delta?.content ?? c.text ?? '') !== '') }));
}

describe('OpenAI SSE tap on real vLLM captures', () => {
  it('counts one token per content event in chat.sse, whose empty deltas are not content', () => {
    const stream = vllmStream('chat.sse');
    const contentEvents = chunksOf(stream).filter((c) => c.content).length;
    const run = runTap(createOpenAISseTap, splitEvents(stream));
    expect(contentEvents).toBe(22);
    expect(run.timeline.contentEvents).toBe(contentEvents);
    expect(run.timeline.countedTokens).toBe(contentEvents);
    expect(run.timeline.terminal).toBe(true);
    expect(run.problems).toEqual([]);
  });

  it('carries the token of an empty delta to the next content event with continuous usage stats: no mismatch, per-token samples = tokens - first', () => {
    const stream = withContinuousUsage(vllmStream('chat.sse'), 11);
    const chunks = chunksOf(stream);
    const total = chunks.at(-1)?.chunk.usage?.completion_tokens as number;
    const firstContent = chunks.find((c) => c.content)?.chunk.usage?.completion_tokens as number;
    const run = runTap(createOpenAISseTap, splitEvents(stream));
    expect(total).toBe(24);
    expect(run.timeline.contentEvents).toBe(22);
    expect(run.timeline.countedTokens).toBe(total);
    expect(run.timeline.outputTokens).toBe(total);
    expect(run.timeline.tokenCountMismatch).toBe(false);
    // Two content events carry 2 tokens: the empty delta's and their own.
    expect(run.gaps.filter(([, tokens]) => tokens === 2)).toHaveLength(2);
    const perTokenSamples = run.gaps.reduce((sum, [, tokens]) => sum + tokens, 0);
    expect(perTokenSamples).toBe(total - firstContent);
    expect(run.problems).toEqual([]);
  });

  it('measures the captured continuous-usage stream exactly: 24 tokens, 24 content events, no mismatch', () => {
    const stream = vllmStream('chat-continuous-usage.sse');
    const run = runTap(createOpenAISseTap, splitEvents(stream));
    expect(run.timeline.contentEvents).toBe(24);
    expect(run.timeline.countedTokens).toBe(24);
    expect(run.timeline.outputTokens).toBe(24);
    expect(run.timeline.reportedInputTokens).toBe(16);
    expect(run.timeline.tokenCountMismatch).toBe(false);
    expect(run.gaps.reduce((sum, [, tokens]) => sum + tokens, 0)).toBe(23);
  });

  it('counts the completions capture: 16 tokens', () => {
    const run = runTap(createOpenAISseTap, splitEvents(vllmStream('completions.sse')));
    expect(run.timeline.contentEvents).toBe(chunksOf(vllmStream('completions.sse')).filter((c) => c.content).length);
    expect(run.timeline.countedTokens).toBe(16);
    expect(run.timeline.terminal).toBe(true);
  });

  it('counts the same tokens whatever the random chunking', () => {
    const stream = withContinuousUsage(vllmStream('chat.sse'), 11);
    for (let seed = 1; seed <= 30; seed++) {
      const run = runTap(createOpenAISseTap, randomChunks(stream, seed, 53));
      expect({ events: run.timeline.contentEvents, counted: run.timeline.countedTokens, mismatch: run.timeline.tokenCountMismatch }, `seed ${seed}`).toEqual({ events: 22, counted: 24, mismatch: false });
    }
  });
});

describe('OpenAI SSE tap: nothing after [DONE] is the answer', () => {
  it('ignores content after [DONE] and counts it once as data_after_end', () => {
    const run = runTap(createOpenAISseTap, sse(chatChunk({ content: 'a' }), chatChunk({ content: 'b' }), '[DONE]', chatChunk({ content: 'c' }), chatChunk({ content: 'd' })));
    expect(run.timeline.contentEvents).toBe(2);
    expect(run.timeline.countedTokens).toBe(2);
    expect(run.problems).toEqual(['data_after_end']);
  });
});
