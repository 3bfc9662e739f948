import { describe, expect, it } from 'vitest';
import { createAnthropicSseTap } from '../../../src/taps/anthropic-sse.js';
import { createLlamaCppSseTap } from '../../../src/taps/llamacpp-sse.js';
import { createOllamaNdjsonTap } from '../../../src/taps/ollama-ndjson.js';
import { createOpenAIJsonTap } from '../../../src/taps/openai-json.js';
import { createOpenAIResponsesSseTap } from '../../../src/taps/openai-responses-sse.js';
import { createTgiSseTap } from '../../../src/taps/tgi-sse.js';
import { createTritonSseTap } from '../../../src/taps/triton-sse.js';
import { runTap, sse } from '../../helpers/tap-harness.js';

/**
 * What the Anthropic, OpenAI Responses, TGI, llama.cpp and Ollama taps make of events a broken or
 * hostile upstream sends: fields missing, null or of the wrong type, an event's name contradicting
 * its data, events after the end. A tap never throws into the stream (the relay forwards the bytes
 * whatever the tap makes of them) and counts only what the protocol defines.
 */

/** One SSE event with an `event:` name, as Anthropic and the Responses API write them. */
function named(name: string, data: string | object): Buffer {
  return Buffer.from(`event: ${name}\ndata: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`);
}

function ndjson(...lines: object[]): Buffer[] {
  return lines.map((line) => Buffer.from(`${JSON.stringify(line)}\n`));
}

const textDelta = (text: string) => named('content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text } });

describe('Anthropic SSE tap: a broken or hostile upstream', () => {
  it('skips ping and content_block start and stop events unparsed: a malformed body there counts no problem, and a type in it changes nothing', () => {
    for (const name of ['ping', 'content_block_start', 'content_block_stop']) {
      const run = runTap(createAnthropicSseTap, [named(name, '{not json'), named(name, { type: 'message_stop' }), named(name, { type: 'error' }), textDelta('a')]);
      expect(run.problems, name).toEqual([]);
      expect(run.timeline.terminal, name).toBe(false);
      expect(run.timeline.errorEvent, name).toBe(false);
      expect(run.timeline.contentEvents, name).toBe(1);
    }
  });

  it('reads the event type from the data, and from the event name only when the data has no string type', () => {
    const byData = runTap(createAnthropicSseTap, [named('message_delta', { type: 'message_stop' })]);
    expect(byData.timeline.terminal).toBe(true);
    for (const type of [undefined, 7]) {
      const byName = runTap(createAnthropicSseTap, [named('message_stop', type === undefined ? {} : { type })]);
      expect(byName.timeline.terminal, String(type)).toBe(true);
    }
  });

  it('reads a message_start or message_delta without usage, or with a null one, and a content_block_delta without a delta, as nothing, without failing', () => {
    const run = runTap(createAnthropicSseTap, [
      named('message_start', { type: 'message_start' }),
      named('message_start', { type: 'message_start', message: null }),
      named('message_start', { type: 'message_start', message: { usage: null } }),
      named('content_block_delta', { type: 'content_block_delta', index: 0 }),
      named('content_block_delta', { type: 'content_block_delta', index: 0, delta: null }),
      textDelta('a'),
      named('message_delta', { type: 'message_delta', delta: { stop_reason: 'end_turn' } }),
      named('message_delta', { type: 'message_delta', usage: null }),
      named('message_stop', { type: 'message_stop' }),
    ]);
    expect(run.problems).toEqual([]);
    expect(run.timeline.contentEvents).toBe(1);
    expect(run.timeline.outputTokenSource).toBe('counted');
    expect(Number.isNaN(run.timeline.reportedInputTokens)).toBe(true);
    expect(run.timeline.terminal).toBe(true);
  });

  it('ignores events after message_stop, counting them once as data after the end', () => {
    const run = runTap(createAnthropicSseTap, [textDelta('a'), named('message_stop', { type: 'message_stop' }), textDelta('b'), textDelta('c')]);
    expect(run.timeline.contentEvents).toBe(1);
    expect(run.problems).toEqual(['data_after_end']);
  });

  it('takes an event named error after message_stop as an upstream error (the SDK reads on and throws there), and no other event after it', () => {
    const stop = named('message_stop', { type: 'message_stop' });
    const failed = runTap(createAnthropicSseTap, [textDelta('a'), stop, named('error', { type: 'error', error: { type: 'overloaded_error' } })]);
    expect(failed.timeline.errorEvent).toBe(true);
    expect(failed.problems).toEqual(['data_after_end']);
    // Only the name counts, as for the SDK: an unnamed error after the end is ignored like any event.
    const unnamed = runTap(createAnthropicSseTap, [textDelta('a'), stop, ...sse({ type: 'error', error: { type: 'overloaded_error' } })]);
    expect(unnamed.timeline.errorEvent).toBe(false);
    // Before the end, an event whose data says it is an error is one, named or not.
    const beforeEnd = runTap(createAnthropicSseTap, [textDelta('a'), ...sse({ type: 'error', error: { type: 'overloaded_error' } })]);
    expect(beforeEnd.timeline.errorEvent).toBe(true);
  });

  it('takes a named event whose data is not JSON as an upstream error besides a malformed one (the SDK throws on it), but not JSON of another type, empty data or an unnamed event', () => {
    const broken = runTap(createAnthropicSseTap, [textDelta('a'), named('content_block_delta', '{"type":"content_block_delta","delta":{"type":"text_'), named('message_stop', { type: 'message_stop' })]);
    expect(broken.problems).toEqual(['malformed_event']);
    expect(broken.timeline.errorEvent).toBe(true);
    expect(broken.timeline.terminal).toBe(true);
    for (const chunks of [[named('content_block_delta', '42')], [named('message_delta', '')], [Buffer.from('data: {not json\n\n')]]) {
      const run = runTap(createAnthropicSseTap, [textDelta('a'), ...chunks]);
      expect(run.timeline.errorEvent, chunks[0]!.toString()).toBe(false);
      expect(run.problems, chunks[0]!.toString()).toEqual(['malformed_event']);
    }
  });

  it('takes any event named error as an upstream error whatever its data: not JSON, or naming another type', () => {
    for (const data of ['upstream overloaded', '', { type: 'message_stop' }]) {
      const run = runTap(createAnthropicSseTap, [textDelta('a'), named('error', data)]);
      expect(run.timeline.errorEvent, JSON.stringify(data)).toBe(true);
      expect(run.timeline.terminal, JSON.stringify(data)).toBe(false);
      expect(run.problems, JSON.stringify(data)).toEqual([]);
    }
  });
});

describe('OpenAI Responses SSE tap: a broken or hostile upstream', () => {
  const completed = (response?: object | null) => named('response.completed', response === undefined ? { type: 'response.completed' } : { type: 'response.completed', response });
  const delta = (text: string) => named('response.output_text.delta', { type: 'response.output_text.delta', delta: text });

  it('skips named events it does not measure unparsed: a malformed body there counts no problem, and a type in it changes nothing', () => {
    const run = runTap(createOpenAIResponsesSseTap, [named('response.created', '{not json'), named('response.in_progress', { type: 'response.completed' }), delta('a')]);
    expect(run.problems).toEqual([]);
    expect(run.timeline.terminal).toBe(false);
    expect(run.timeline.contentEvents).toBe(1);
  });

  it('reads the event type from the data, and from the event name only when the data has no string type', () => {
    expect(runTap(createOpenAIResponsesSseTap, [named('response.output_text.delta', { type: 'response.completed' })]).timeline.terminal).toBe(true);
    for (const data of [{}, { type: 7 }]) {
      expect(runTap(createOpenAIResponsesSseTap, [named('response.completed', data)]).timeline.terminal, JSON.stringify(data)).toBe(true);
    }
    // Neither: an event with no type at all is nothing, not a failure.
    const untyped = runTap(createOpenAIResponsesSseTap, [...sse({ delta: 'a' }), delta('b')]);
    expect(untyped.problems).toEqual([]);
    expect(untyped.timeline.contentEvents).toBe(1);
  });

  it('takes an event whose data has a truthy error as an upstream error, whatever its name or type (the SDK throws on it); a null or false one is none', () => {
    for (const event of [Buffer.from('data: {"error":{"message":"boom"}}\n\n'), named('response.output_text.delta', { type: 'response.output_text.delta', delta: 'a', error: 'boom' })]) {
      const run = runTap(createOpenAIResponsesSseTap, [delta('a'), event]);
      expect(run.timeline.errorEvent).toBe(true);
      expect(run.timeline.contentEvents).toBe(1);
    }
    for (const error of [null, false, '']) {
      const run = runTap(createOpenAIResponsesSseTap, [delta('a'), named('response.output_text.delta', { type: 'response.output_text.delta', delta: 'b', error })]);
      expect(run.timeline.errorEvent, JSON.stringify(error)).toBe(false);
      expect(run.timeline.contentEvents, JSON.stringify(error)).toBe(2);
    }
  });

  it('takes a read event whose data is not JSON as an upstream error besides a malformed one (the SDK throws on it), but not [DONE], JSON of another type or an event it skips by name', () => {
    const broken = runTap(createOpenAIResponsesSseTap, [delta('a'), named('response.output_text.delta', '{"type":"response.output_text.delta","delta":"b'), completed()]);
    expect(broken.problems).toEqual(['malformed_event']);
    expect(broken.timeline.errorEvent).toBe(true);
    expect(broken.timeline.terminal).toBe(true);
    for (const chunk of [Buffer.from('data: [DONE]\n\n'), named('response.output_text.delta', '[1]'), named('response.output_text.done', '{not json')]) {
      const run = runTap(createOpenAIResponsesSseTap, [delta('a'), chunk]);
      expect(run.timeline.errorEvent, chunk.toString()).toBe(false);
    }
  });

  it('ends the stream at response.incomplete, a response cut short (max_output_tokens), with its usage', () => {
    const run = runTap(createOpenAIResponsesSseTap, [delta('a'), named('response.incomplete', { type: 'response.incomplete', response: { usage: { input_tokens: 5, output_tokens: 1 } } })]);
    expect(run.timeline.terminal).toBe(true);
    expect(run.timeline.outputTokens).toBe(1);
    expect(run.timeline.reportedInputTokens).toBe(5);
  });

  it('ends the stream at a response.completed without a response or usage, or with null ones, without failing', () => {
    for (const response of [undefined, null, {}, { usage: null }]) {
      const run = runTap(createOpenAIResponsesSseTap, [delta('a'), completed(response)]);
      expect(run.timeline.terminal, JSON.stringify(response)).toBe(true);
      expect(run.timeline.outputTokenSource).toBe('counted');
      expect(run.problems).toEqual([]);
    }
  });
});

describe('TGI SSE tap: a broken or hostile upstream', () => {
  const token = (text: string) => ({ token: { id: 1, text, logprob: -0.1, special: false }, generated_text: null, details: null });

  it('counts no token for an event whose token is missing, null or not an object, without failing', () => {
    const run = runTap(createTgiSseTap, sse({ generated_text: null, details: null }, { token: null, generated_text: null }, { token: 5 }, { token: 'x' }, token('a')));
    expect(run.problems).toEqual([]);
    expect(run.timeline.contentEvents).toBe(1);
    expect(run.timeline.countedTokens).toBe(1);
  });

  it('takes an event whose data is not JSON as an upstream error besides a malformed one (huggingface_hub raises on it), but not [DONE] or JSON of another type', () => {
    const broken = runTap(createTgiSseTap, sse(token('a'), '{"token":{"id":1,"text":"b', { ...token('c'), generated_text: 'abc' }));
    expect(broken.problems).toEqual(['malformed_event']);
    expect(broken.timeline.errorEvent).toBe(true);
    expect(broken.timeline.terminal).toBe(true);
    for (const data of ['[DONE]', '[1]', '"text"']) {
      expect(runTap(createTgiSseTap, sse(token('a'), data)).timeline.errorEvent, data).toBe(false);
    }
  });

  it('ends the stream at an event with details even when its generated_text is null', () => {
    const run = runTap(createTgiSseTap, sse(token('a'), { ...token('b'), details: { finish_reason: 'length', generated_tokens: 2, input_length: 4 } }));
    expect(run.timeline.terminal).toBe(true);
    expect(run.timeline.outputTokens).toBe(2);
    expect(run.timeline.reportedInputTokens).toBe(4);
  });
});

describe('llama.cpp native SSE tap: a broken or hostile upstream', () => {
  const content = (text: string, predicted?: number) => ({ content: text, stop: false, ...(predicted === undefined ? {} : { tokens_predicted: predicted }) });

  it('counts one token for a content event without tokens_predicted, or whose tokens_predicted did not grow, not zero and not an implausible value', () => {
    const run = runTap(createLlamaCppSseTap, sse(content('a'), content('b'), content('c', 3), content('d', 3), content('e', 2)));
    expect(run.problems).toEqual([]);
    expect([1, ...run.gaps.map(([, tokens]) => tokens)]).toEqual([1, 1, 3, 1, 1]);
  });

  it('goes on reading the cumulative count after a content event without one', () => {
    const run = runTap(createLlamaCppSseTap, sse(content('a', 1), content('b'), content('c', 5)));
    expect(run.gaps.map(([, tokens]) => tokens)).toEqual([1, 4]);
    expect(run.timeline.countedTokens).toBe(6);
  });

  it('ignores events after the stop event, counting them once as data after the end', () => {
    const run = runTap(createLlamaCppSseTap, sse(content('a', 1), { content: '', stop: true, tokens_predicted: 1, tokens_evaluated: 3 }, content('b', 2), content('c', 3)));
    expect(run.timeline.contentEvents).toBe(1);
    expect(run.timeline.outputTokens).toBe(1);
    expect(run.problems).toEqual(['data_after_end']);
  });
});

describe('Ollama NDJSON tap: a broken or hostile upstream', () => {
  const chat = (message: unknown) => ({ model: 'm', message, done: false });

  it('counts no token for a line whose message is null or holds an empty tool_calls list, without failing', () => {
    const run = runTap(createOllamaNdjsonTap, ndjson(chat(null), chat({ role: 'assistant', content: '', tool_calls: [] }), chat({ role: 'assistant', content: 'a' })));
    expect(run.problems).toEqual([]);
    expect(run.timeline.contentEvents).toBe(1);
  });

  it('counts a line longer than the 1 MiB cap as an oversized event, and reads the next line', () => {
    const long = Buffer.from(`${JSON.stringify(chat({ role: 'assistant', content: 'x'.repeat(1 << 20) }))}\n`);
    const run = runTap(createOllamaNdjsonTap, [long, ...ndjson(chat({ role: 'assistant', content: 'a' }))]);
    expect(run.problems).toEqual(['oversized_event']);
    expect(run.timeline.contentEvents).toBe(1);
  });

  it('ignores every line after done: true, content, usage and error alike (the ollama client stops reading there), counting them once as data after the end', () => {
    const done = { model: 'm', message: { role: 'assistant', content: '' }, done: true, prompt_eval_count: 4, eval_count: 1 };
    const run = runTap(createOllamaNdjsonTap, ndjson(chat({ role: 'assistant', content: 'a' }), done, chat({ role: 'assistant', content: 'b' }), { ...done, eval_count: 9 }, { error: 'boom' }));
    expect(run.timeline.contentEvents).toBe(1);
    expect(run.timeline.outputTokens).toBe(1);
    expect(run.timeline.errorEvent).toBe(false);
    expect(run.problems).toEqual(['data_after_end']);
  });

  it('reads a last line without its line end when the body ends (the done line with the usage)', () => {
    const done = Buffer.from(JSON.stringify({ model: 'm', message: { role: 'assistant', content: '' }, done: true, prompt_eval_count: 4, eval_count: 1 }));
    const run = runTap(createOllamaNdjsonTap, [...ndjson(chat({ role: 'assistant', content: 'a' })), done]);
    expect(run.timeline.terminal).toBe(true);
    expect(run.timeline.outputTokens).toBe(1);
    expect(run.timeline.reportedInputTokens).toBe(4);
  });
});

describe('every tap that reads event objects: a broken or hostile upstream', () => {
  const sseTaps = [
    ['Anthropic', createAnthropicSseTap],
    ['Responses', createOpenAIResponsesSseTap],
    ['TGI', createTgiSseTap],
    ['llama.cpp', createLlamaCppSseTap],
    ['Triton', createTritonSseTap],
  ] as const;

  it('counts an event that is JSON but not an object (null, a number, a string, a list) as malformed, and goes on', () => {
    for (const [name, tap] of sseTaps) {
      const run = runTap(tap, sse('null', '5', '"x"', '[]'));
      expect(run.problems, name).toEqual(['malformed_event', 'malformed_event', 'malformed_event', 'malformed_event']);
    }
    const lines = ['null', '5', '"x"', '[]'].map((line) => Buffer.from(`${line}\n`));
    expect(runTap(createOllamaNdjsonTap, lines).problems).toEqual(['malformed_event', 'malformed_event', 'malformed_event', 'malformed_event']);
  });

  it('counts an SSE event longer than the 1 Mi-character cap as an oversized event, and reads the next one', () => {
    const big = Buffer.from(`data: {"token":{"text":"${'x'.repeat(1 << 20)}"}}\n\n`);
    const run = runTap(createTgiSseTap, [big, ...sse({ token: { text: 'a', special: false } })]);
    expect(run.problems).toEqual(['oversized_event']);
    expect(run.timeline.contentEvents).toBe(1);
  });

  it('counts an unterminated SSE event as oversized when the replacement for a truncated last character at the body\'s end takes it past the buffer cap', () => {
    // The decoder's buffer holds 2 Mi + 1024 characters for the default 1 Mi cap; the line fills it exactly.
    const line = Buffer.from(`data: ${'y'.repeat(2 * (1 << 20) + 1024 - 6)}`);
    const run = runTap(createTgiSseTap, [line, Buffer.from('☕').subarray(0, 1)]);
    expect(run.problems).toEqual(['oversized_event']);
  });

  it('reads a null llama.cpp timings or vLLM metrics as no server timings, without failing', () => {
    const stop = runTap(createLlamaCppSseTap, sse({ content: 'a', stop: false }, { content: '', stop: true, timings: null }));
    expect(stop.timeline.terminal).toBe(true);
    expect(stop.timeline.serverTimings).toBeUndefined();
    for (const answer of [{ timings: null }, { metrics: null }, { metrics: null, timings: { prompt_ms: 5, predicted_ms: 9 } }]) {
      const run = runTap(createOpenAIJsonTap, [Buffer.from(JSON.stringify({ object: 'chat.completion', choices: [], ...answer }))]);
      expect(run.problems, JSON.stringify(answer)).toEqual([]);
      expect(run.timeline.serverTimings, JSON.stringify(answer)).toEqual(answer.timings ? { promptMs: 5, generationMs: 9 } : undefined);
    }
  });

  it('keeps reported durations from 0 ms (an already loaded Ollama model) to an hour-long generation, none counted implausible', () => {
    const ns = (ms: number) => ms * 1e6;
    const answer = { model: 'm', done: true, load_duration: 0, prompt_eval_duration: ns(150), eval_duration: ns(3_600_000), total_duration: ns(3_600_150) };
    const run = runTap(createOpenAIJsonTap, [Buffer.from(JSON.stringify(answer))]);
    expect(run.problems).toEqual([]);
    expect(run.timeline.serverTimings).toEqual({ loadMs: 0, promptMs: 150, generationMs: 3_600_000, totalMs: 3_600_150 });
  });
});

/*
 * Mutants of these taps that change no behaviour (npm run mutate, each also applied by hand with these
 * tests passing):
 * - the `typeof x === 'object'` half of a guard made true where the other half already refuses null:
 *   Anthropic's message_start and message_delta usage, its delta (`typeof delta !== 'object'` false),
 *   the Responses usage, TGI's details, Ollama's message. A number or a string read as an object has
 *   none of the fields, so nothing is read, as when the field is missing.
 * - anthropic-sse.ts: `event.delta?.type` without `?.` (isContent() was true, so delta is an object);
 *   isContent()'s `default: return false` dropped (it then returns undefined, read as false).
 * - llamacpp-sse.ts: `predicted !== undefined` made true before `predicted > this.predicted`
 *   (undefined > n is false, the same one token); `timings !== undefined` made true (the stop event,
 *   once, is the only place serverTimings is written, so writing undefined leaves it as it was).
 * - event-json.ts: the JSON.parse `catch` emptied: the value stays undefined, which the next check
 *   counts as the same one malformed_event.
 */
