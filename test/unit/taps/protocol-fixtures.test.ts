import { describe, expect, it } from 'vitest';
import { createAnthropicSseTap } from '../../../src/taps/anthropic-sse.js';
import { createLlamaCppSseTap } from '../../../src/taps/llamacpp-sse.js';
import { createOllamaNdjsonTap } from '../../../src/taps/ollama-ndjson.js';
import { createOpenAIResponsesSseTap } from '../../../src/taps/openai-responses-sse.js';
import { createTgiSseTap } from '../../../src/taps/tgi-sse.js';
import { createTritonSseTap } from '../../../src/taps/triton-sse.js';
import type { TapFactory } from '../../../src/taps/tap.js';
import { llamacppStream, randomChunks, splitEvents } from '../../helpers/fixtures.js';
import { runTap } from '../../helpers/tap-harness.js';
import { measurements, splitLines, streamFixture, streamFixtureNames } from './replay.js';

const PROTOCOLS: Array<[dir: string, tap: TapFactory, split: (stream: Buffer) => Buffer[]]> = [
  ['anthropic', createAnthropicSseTap, splitEvents],
  ['openai-responses', createOpenAIResponsesSseTap, splitEvents],
  ['tgi', createTgiSseTap, splitEvents],
  ['ollama', createOllamaNdjsonTap, splitLines],
  ['triton', createTritonSseTap, splitEvents],
];

describe.each(PROTOCOLS)('%s fixtures', (dir, tap, split) => {
  it.each(streamFixtureNames(dir))('%s counts the same tokens whatever the random chunking', (name) => {
    const stream = streamFixture(dir, name);
    const expected = measurements(runTap(tap, split(stream)));
    for (let seed = 1; seed <= 30; seed++) {
      const run = measurements(runTap(tap, randomChunks(stream, seed, 41)));
      expect({ events: run.events, counted: run.counted, output: run.output, input: run.input, terminal: run.terminal }, `seed ${seed}`).toEqual({
        events: expected.events,
        counted: expected.counted,
        output: expected.output,
        input: expected.input,
        terminal: expected.terminal,
      });
      expect(run.problems, `seed ${seed}`).toEqual([]);
    }
  });
});

describe('llama.cpp native /completion capture', () => {
  const stream = llamacppStream('completion-native.sse');

  it('takes tokens per event from tokens_predicted and the usage and timings from the stop event', () => {
    const events = splitEvents(stream);
    // Independently, from the capture: each content event's cumulative tokens_predicted.
    const parsed = events.map((e) => JSON.parse(e.toString('utf8').replace(/^data: /, '')));
    const content = parsed.filter((e) => e.content !== '');
    const last = parsed.at(-1);
    const run = runTap(createLlamaCppSseTap, events);
    expect(run.timeline.contentEvents).toBe(content.length);
    expect(run.timeline.countedTokens).toBe(content.at(-1).tokens_predicted);
    expect(run.gaps.map(([, tokens]) => tokens)).toEqual(content.slice(1).map((e, i) => e.tokens_predicted - content[i].tokens_predicted));
    expect(last.stop).toBe(true);
    expect(run.timeline.terminal).toBe(true);
    expect(run.timeline.outputTokens).toBe(last.tokens_predicted);
    expect(run.timeline.reportedInputTokens).toBe(last.tokens_evaluated);
    expect(run.timeline.serverTimings).toEqual({ promptMs: last.timings.prompt_ms, generationMs: last.timings.predicted_ms });
    expect(run.problems).toEqual([]);
  });
});

describe('what each fixture measures (one event or line per chunk, 10 ms apart from 100 ms)', () => {
  it('Anthropic basic: first token at the first text delta after message_start, content_block_start and ping', () => {
    const m = measurements(runTap(createAnthropicSseTap, splitEvents(streamFixture('anthropic', 'messages-basic.sse'))));
    expect(m).toMatchObject({ ttft: 130, events: 2, counted: 2, output: 15, input: 25, source: 'usage', terminal: true, error: false, mismatch: false });
  });

  it('Anthropic tool use: text and non-empty input_json deltas are content, the empty opening one is not', () => {
    const m = measurements(runTap(createAnthropicSseTap, splitEvents(streamFixture('anthropic', 'messages-tool-use.sse'))));
    expect(m).toMatchObject({ ttft: 130, events: 13 + 7, output: 89, input: 472, terminal: true });
  });

  it('Anthropic thinking: thinking and text deltas are content, the signature is not', () => {
    const m = measurements(runTap(createAnthropicSseTap, splitEvents(streamFixture('anthropic', 'messages-thinking.sse'))));
    expect(m).toMatchObject({ ttft: 120, events: 3, output: 3, source: 'counted', terminal: true, mismatch: false });
    expect(Number.isNaN(m.input)).toBe(true);
  });

  it('Anthropic error event: an upstream error, not a terminal', () => {
    const m = measurements(runTap(createAnthropicSseTap, splitEvents(streamFixture('anthropic', 'messages-overloaded-error.sse'))));
    expect(m).toMatchObject({ events: 1, error: true, terminal: false });
  });

  it('Responses text: first token after created, in_progress and the added events; usage from response.completed', () => {
    const m = measurements(runTap(createOpenAIResponsesSseTap, splitEvents(streamFixture('openai-responses', 'text.sse'))));
    expect(m).toMatchObject({ ttft: 140, events: 10, output: 10, input: 37, source: 'usage', terminal: true, mismatch: false });
  });

  it('Responses reasoning then function call: both kinds of delta are content', () => {
    const m = measurements(runTap(createOpenAIResponsesSseTap, splitEvents(streamFixture('openai-responses', 'reasoning-function-call.sse'))));
    expect(m).toMatchObject({ ttft: 140, events: 3 + 7, output: 154, input: 62, terminal: true, mismatch: false });
  });

  it('TGI: every non-special token is content; the special EOS token counts toward the total, which matches details', () => {
    const m = measurements(runTap(createTgiSseTap, splitEvents(streamFixture('tgi', 'generate-stream.sse'))));
    expect(m).toMatchObject({ ttft: 100, events: 16, counted: 17, output: 17, input: 9, source: 'usage', terminal: true, mismatch: false });
    // The keep-alive after token 8 is its own chunk: token 9 arrives 20 ms after token 8.
    expect(m.gaps[7]).toEqual([20, 1]);
  });

  it('TGI without details: the keep-alive and the leading special token are not the first token; generated_text ends it', () => {
    const m = measurements(runTap(createTgiSseTap, splitEvents(streamFixture('tgi', 'generate-stream-no-details.sse'))));
    expect(m).toMatchObject({ ttft: 120, events: 6, counted: 8, source: 'counted', terminal: true });
  });

  it('Ollama chat: one token per line, eval counts as usage, durations in ms', () => {
    const m = measurements(runTap(createOllamaNdjsonTap, splitLines(streamFixture('ollama', 'chat.ndjson'))));
    expect(m).toMatchObject({ ttft: 100, events: 18, output: 18, input: 26, source: 'usage', terminal: true, mismatch: false });
    expect(m.serverTimings?.loadMs).toBeCloseTo(1.334875, 9);
    expect(m.serverTimings?.promptMs).toBeCloseTo(342.546, 9);
    expect(m.serverTimings?.generationMs).toBeCloseTo(4535.599, 9);
    expect(m.serverTimings?.totalMs).toBeCloseTo(4883.583458, 9);
  });

  it('Ollama generate: response pieces are content', () => {
    const m = measurements(runTap(createOllamaNdjsonTap, splitLines(streamFixture('ollama', 'generate.ndjson'))));
    expect(m).toMatchObject({ events: 11, output: 11, input: 26, terminal: true });
  });

  it('Ollama thinking and tool call: thinking pieces and the tool call are content', () => {
    const m = measurements(runTap(createOllamaNdjsonTap, splitLines(streamFixture('ollama', 'chat-thinking-tool-call.ndjson'))));
    expect(m).toMatchObject({ ttft: 100, events: 9, output: 29, input: 161, terminal: true, mismatch: false });
  });

  it('Triton: every text_output is a token, and the clean end is the terminal event', () => {
    const trt = measurements(runTap(createTritonSseTap, splitEvents(streamFixture('triton', 'generate-stream-trtllm.sse'))));
    expect(trt).toMatchObject({ ttft: 100, events: 15, output: 15, source: 'counted', terminal: true });
    const vllm = measurements(runTap(createTritonSseTap, splitEvents(streamFixture('triton', 'generate-stream-vllm.sse'))));
    expect(vllm).toMatchObject({ events: 4, terminal: true });
  });
});
