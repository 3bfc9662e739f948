import { describe, expect, it } from 'vitest';
import { createOpenAISseTap } from '../../../src/taps/openai-sse.js';
import { llamacppStream, randomChunks, splitEvents } from '../../helpers/fixtures.js';
import { chatChunk, runTap, sse } from '../../helpers/tap-harness.js';

describe('OpenAI SSE tap: what counts as the first token', () => {
  it('records TTFT at the first content delta, not the role prelude or an empty delta', () => {
    const run = runTap(
      createOpenAISseTap,
      sse(
        chatChunk({ role: 'assistant', content: '' }),
        chatChunk({ content: '' }),
        chatChunk({ content: 'Hello' }),
        chatChunk({ content: ' world' }),
        chatChunk({}, {}, 'stop'),
        '[DONE]',
      ),
    );
    // Chunks arrive at 100, 110, 120...: the first content is the third chunk.
    expect(run.timeline.ttftMs).toBe(120);
    expect(run.timeline.contentEvents).toBe(2);
    expect(run.gaps).toEqual([[10, 1]]);
    expect(run.timeline.terminal).toBe(true);
  });

  it('counts reasoning_content, reasoning and tool_calls deltas as content', () => {
    const toolCall = { tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'f', arguments: '' } }] };
    for (const delta of [{ reasoning_content: 'think' }, { reasoning: 'think' }, toolCall]) {
      const run = runTap(createOpenAISseTap, sse(chatChunk({ role: 'assistant' }), chatChunk(delta), '[DONE]'));
      expect(run.timeline.ttftMs, JSON.stringify(delta)).toBe(110);
    }
  });

  it('does not count an empty tool_calls list or a comment as content', () => {
    const run = runTap(createOpenAISseTap, [
      ...sse(chatChunk({ tool_calls: [] })),
      Buffer.from(': keep-alive\n\n'),
      ...sse(chatChunk({ content: 'x' })),
    ]);
    expect(run.timeline.ttftMs).toBe(120);
  });

  it('counts completions text, not an empty text', () => {
    const completion = (text: string) => ({ id: 'cmpl-1', object: 'text_completion', choices: [{ index: 0, text, logprobs: null, finish_reason: null }] });
    const run = runTap(createOpenAISseTap, sse(completion(''), completion('Once'), completion(' upon'), '[DONE]'));
    expect(run.timeline.ttftMs).toBe(110);
    expect(run.timeline.countedTokens).toBe(2);
  });
});

describe('OpenAI SSE tap: tokens, ITL and TPOT', () => {
  it('takes per-chunk token counts from continuous usage stats: an n-token chunk gives n per-token samples', () => {
    const usage = (completion: number) => ({ usage: { prompt_tokens: 7, completion_tokens: completion, total_tokens: 7 + completion } });
    const run = runTap(
      createOpenAISseTap,
      sse(
        chatChunk({ role: 'assistant', content: '' }, usage(0)),
        chatChunk({ content: 'a' }, usage(1)),
        chatChunk({ content: 'bcd' }, usage(4)),
        chatChunk({ content: 'ef' }, usage(6)),
        chatChunk({}, usage(6), 'stop'),
        '[DONE]',
      ),
      20,
    );
    expect(run.gaps).toEqual([
      [20, 3],
      [20, 2],
    ]);
    expect(run.timeline.outputTokens).toBe(6);
    expect(run.timeline.outputTokenSource).toBe('usage');
    expect(run.timeline.reportedInputTokens).toBe(7);
    // First token at 120, last at 160, 6 tokens: (160 - 120) / 5.
    expect(run.timeline.tpotMs).toBe(8);
  });

  it('counts one token per content event when the stream reports no usage', () => {
    const run = runTap(createOpenAISseTap, sse(chatChunk({ content: 'a' }), chatChunk({ content: 'b' }), chatChunk({ content: 'c' }), '[DONE]'));
    expect(run.timeline.outputTokenSource).toBe('counted');
    expect(run.timeline.outputTokens).toBe(3);
    expect(Number.isNaN(run.timeline.reportedInputTokens)).toBe(true);
    expect(run.timeline.tpotMs).toBe(10);
  });

  it('replaces the counted total with the final usage chunk', () => {
    const run = runTap(
      createOpenAISseTap,
      sse(chatChunk({ content: 'a' }), chatChunk({ content: 'b' }), { id: 'x', choices: [], usage: { prompt_tokens: 3, completion_tokens: 5, total_tokens: 8 } }, '[DONE]'),
    );
    expect(run.timeline.countedTokens).toBe(2);
    expect(run.timeline.outputTokens).toBe(5);
    expect(run.timeline.outputTokenSource).toBe('usage');
  });

  it('flags an error event inside a 2xx stream', () => {
    const run = runTap(createOpenAISseTap, sse(chatChunk({ content: 'a' }), { object: 'error', message: 'out of memory', code: 500 }));
    expect(run.timeline.errorEvent).toBe(true);
  });

  it('counts a malformed event and goes on with the next one', () => {
    const run = runTap(createOpenAISseTap, [Buffer.from('data: {not json\n\n'), ...sse(chatChunk({ content: 'a' }), '[DONE]')]);
    expect(run.problems).toEqual(['malformed_event']);
    expect(run.timeline.ttftMs).toBe(110);
  });

  it('with n > 1, sees the end only when every choice has finished (a client leaving after the first is not served)', () => {
    const choice = (index: number, content: string | undefined, finish: string | null) => ({
      id: 'chatcmpl-1',
      object: 'chat.completion.chunk',
      choices: [{ index, delta: content === undefined ? {} : { content }, logprobs: null, finish_reason: finish }],
    });
    const firstDone = runTap(createOpenAISseTap, sse(choice(0, 'a', null), choice(1, 'b', null), choice(0, undefined, 'stop'), choice(1, 'c', null)));
    expect(firstDone.timeline.contentEvents).toBe(3);
    expect(firstDone.timeline.terminal).toBe(false);
    const bothDone = runTap(createOpenAISseTap, sse(choice(0, 'a', null), choice(1, 'b', null), choice(0, undefined, 'stop'), choice(1, undefined, 'length')));
    expect(bothDone.timeline.terminal).toBe(true);
  });

  it('sees the end at the finish_reason of a single-choice stream without [DONE] (a server that never sends it is not read as truncated)', () => {
    const run = runTap(createOpenAISseTap, sse(chatChunk({ role: 'assistant', content: '' }), chatChunk({ content: 'a' }), chatChunk({ content: 'b' }), chatChunk({}, {}, 'stop')));
    expect(run.timeline.terminal).toBe(true);
    expect(run.timeline.contentEvents).toBe(2);
  });

  it('counts a content event whose cumulative usage did not grow as one token per content choice, not zero (no infinite per-token gap, no lost token)', () => {
    const usage = (completion: number) => ({ usage: { prompt_tokens: 7, completion_tokens: completion, total_tokens: 7 + completion } });
    const run = runTap(
      createOpenAISseTap,
      sse(chatChunk({ content: 'a' }, usage(1)), chatChunk({ content: 'b' }, usage(2)), chatChunk({ content: 'c' }, usage(2)), chatChunk({ content: 'd' }, usage(3)), '[DONE]'),
    );
    expect(run.gaps).toEqual([
      [10, 1],
      [10, 1],
      [10, 1],
    ]);
    expect(run.timeline.countedTokens).toBe(4);
    expect(run.problems).toEqual([]);
  });

  it('sees no terminal event in a stream that just stops', () => {
    const run = runTap(createOpenAISseTap, sse(chatChunk({ content: 'a' }), chatChunk({ content: 'b' })));
    expect(run.timeline.terminal).toBe(false);
  });
});

describe('OpenAI SSE tap on real llama.cpp captures', () => {
  it('measures the 128-token capture: usage from the last chunk, 128 content events', () => {
    const run = runTap(createOpenAISseTap, splitEvents(llamacppStream('chat-completions.sse')));
    expect(run.timeline.contentEvents).toBe(128);
    expect(run.timeline.outputTokens).toBe(128);
    expect(run.timeline.reportedInputTokens).toBe(36);
    expect(run.timeline.terminal).toBe(true);
    expect(run.problems).toEqual([]);
  });

  it('keeps usage (128) when a held UTF-8 token makes 127 content events', () => {
    const events = splitEvents(llamacppStream('chat-completions-held-utf8-token.sse'));
    const run = runTap(createOpenAISseTap, events);
    expect(run.timeline.contentEvents).toBe(127);
    expect(run.timeline.countedTokens).toBe(127);
    expect(run.timeline.outputTokens).toBe(128);
    expect(run.timeline.outputTokenSource).toBe('usage');
    // TPOT divides the first-to-last span by the reported 128 - 1, as vLLM does.
    expect(run.timeline.tpotMs).toBeCloseTo((run.timeline.lastTokenMs - run.timeline.firstTokenMs) / 127, 12);
  });

  it('uses the cumulative timings.predicted_n of timings_per_token for per-chunk counts', () => {
    const events = splitEvents(llamacppStream('chat-completions-timings-per-token.sse'));
    // Independently: predicted_n of each content event, as the capture states it.
    const predicted = events
      .map((e) => e.toString('utf8').replace(/^data: /, '').trim())
      .filter((data) => data.startsWith('{'))
      .map((data) => JSON.parse(data))
      .filter((chunk) => chunk.choices?.[0]?.delta?.content)
      .map((chunk) => chunk.timings.predicted_n as number);
    const expectedTokens = predicted.slice(1).map((n, i) => n - (predicted[i] as number));

    const run = runTap(createOpenAISseTap, events);
    expect(run.gaps.map(([, tokens]) => tokens)).toEqual(expectedTokens);
    expect(run.timeline.countedTokens).toBe(predicted.at(-1));
  });

  it('counts the same tokens whatever the random chunking', () => {
    const stream = llamacppStream('chat-completions-held-utf8-token.sse');
    for (let seed = 1; seed <= 50; seed++) {
      const run = runTap(createOpenAISseTap, randomChunks(stream, seed));
      expect(run.timeline.contentEvents, `seed ${seed}`).toBe(127);
      expect(run.timeline.outputTokens, `seed ${seed}`).toBe(128);
    }
  });
});

describe('OpenAI SSE tap: a broken or hostile upstream', () => {
  const chunk = (fields: object) => ({ id: 'chatcmpl-1', object: 'chat.completion.chunk', model: 'm', ...fields });
  const choice = (fields: object) => ({ index: 0, logprobs: null, finish_reason: null, ...fields });

  it('counts an event that is JSON but not an object (null, a number, a string) as malformed, and goes on', () => {
    const run = runTap(createOpenAISseTap, sse('null', '5', '"text"', chatChunk({ content: 'a' }), '[DONE]'));
    expect(run.problems).toEqual(['malformed_event', 'malformed_event', 'malformed_event']);
    expect(run.timeline.contentEvents).toBe(1);
  });

  it('ignores choices, deltas, usage and timings that are not objects, without failing the request', () => {
    const run = runTap(
      createOpenAISseTap,
      sse(
        chunk({ choices: 5 }),
        chunk({ choices: 'ab' }),
        chunk({ choices: { 0: choice({ delta: { content: 'x' } }) } }),
        chunk({ choices: [null, 5, 'x'] }),
        chunk({ choices: [choice({ delta: null })], usage: null, timings: null }),
        chunk({ choices: [choice({ delta: { content: 'a' } })], usage: null, timings: null }),
        chunk({ choices: [choice({ delta: {}, finish_reason: 'stop' })], usage: null }),
      ),
    );
    expect(run.problems).toEqual([]);
    expect(run.timeline.contentEvents).toBe(1);
    expect(run.timeline.terminal).toBe(true);
    expect(run.timeline.outputTokenSource).toBe('counted');
  });

  it('counts a malformed or out-of-range choice index (-1, 1.5, "1", 256) as choice 0, so its finish_reason ends a single-choice stream', () => {
    for (const index of [-1, 1.5, '1', 256, 1e9]) {
      const run = runTap(createOpenAISseTap, sse(chunk({ choices: [choice({ index, delta: { content: 'a' } })] }), chunk({ choices: [choice({ index, delta: {}, finish_reason: 'stop' })] })));
      expect(run.timeline.terminal, JSON.stringify(index)).toBe(true);
    }
  });

  it('with n = 2, does not end the stream when choice 0 repeats its finish_reason while choice 1 still runs', () => {
    const finish = (index: number) => chunk({ choices: [choice({ index, delta: {}, finish_reason: 'stop' })] });
    const content = (index: number) => chunk({ choices: [choice({ index, delta: { content: 'a' } })] });
    const run = runTap(createOpenAISseTap, sse(content(0), content(1), finish(0), finish(0), content(1)));
    expect(run.timeline.terminal).toBe(false);
  });

  it('ignores events after [DONE]', () => {
    const run = runTap(createOpenAISseTap, sse(chatChunk({ content: 'a' }), '[DONE]', chatChunk({ content: 'b' }), chunk({ choices: [], usage: { prompt_tokens: 1, completion_tokens: 99 } })));
    expect(run.timeline.contentEvents).toBe(1);
    expect(run.timeline.outputTokens).toBe(1);
  });

  it('reads llama.cpp timings from the final chunks only: per-token timings on a content chunk are not the request\'s', () => {
    const timings = (predictedMs: number) => ({ timings: { prompt_n: 3, prompt_ms: 5, predicted_n: 1, predicted_ms: predictedMs } });
    const run = runTap(createOpenAISseTap, sse(chunk({ choices: [choice({ delta: { content: 'a' } })], ...timings(7) }), chunk({ choices: [choice({ delta: {}, finish_reason: 'stop' })] })));
    expect(run.timeline.serverTimings).toBeUndefined();
    const kept = runTap(createOpenAISseTap, sse(chunk({ choices: [choice({ delta: { content: 'a' } })] }), chunk({ choices: [choice({ delta: {}, finish_reason: 'stop' })], ...timings(9) }), chunk({ choices: [], usage: { prompt_tokens: 3, completion_tokens: 1 } })));
    expect(kept.timeline.serverTimings).toEqual({ promptMs: 5, generationMs: 9 });
    // A choice that is not an object finishes nothing, so its chunk's timings are not read either.
    const junk = runTap(createOpenAISseTap, sse(chunk({ choices: [choice({ delta: { content: 'a' } })] }), chunk({ choices: [null], ...timings(3) })));
    expect(junk.timeline.serverTimings).toBeUndefined();
  });

  it('does not read a content chunk\'s per-token timings as the request\'s when its usage is a number or a string: only a usage object marks the final chunk', () => {
    const timings = { timings: { prompt_n: 3, prompt_ms: 5, predicted_n: 1, predicted_ms: 7 } };
    for (const usage of [5, 'x']) {
      const run = runTap(createOpenAISseTap, sse(chunk({ choices: [choice({ delta: { content: 'a' } })], usage, ...timings })));
      expect(run.timeline.serverTimings, JSON.stringify(usage)).toBeUndefined();
      expect(run.timeline.contentEvents).toBe(1);
    }
  });

  it('carries cumulative-usage growth on an empty delta to the next content event, and starts from a chunk without usage', () => {
    const usage = (completion: number | null) => ({ usage: completion === null ? null : { prompt_tokens: 7, completion_tokens: completion } });
    const run = runTap(
      createOpenAISseTap,
      sse(
        chunk({ choices: [choice({ delta: { content: 'a' } })], ...usage(null) }),
        chunk({ choices: [choice({ delta: { content: 'b' } })], ...usage(3) }),
        chunk({ choices: [choice({ delta: { content: '' } })], ...usage(4) }),
        chunk({ choices: [choice({ delta: { content: 'c' } })], ...usage(5) }),
      ),
    );
    expect(run.gaps).toEqual([
      [10, 3],
      [20, 2],
    ]);
  });
});

/*
 * Mutants Stryker reports as surviving in src/taps/openai-sse.ts that change no behaviour:
 * - choiceEnded(): `choice.index >= 0` -> `> 0`: index 0 is choice 0 either way.
 * - onEvent(): the isPlainContentChunk() shortcut disabled: the same chunk then goes through
 *   JSON.parse and counts the same one token (plain-content-event.test.ts checks the two agree).
 * - onEvent(): `answerChoices++` -> `--`: only `answerChoices === 0` is read, and -1 is not 0 either.
 * - onEvent(): `contentChoices <= MAX_TOKENS_PER_EVENT` as `<` or false: it only saves a call, as
 *   eventTokens() gives back a count within the bound unchanged.
 * - onEvent(): the JSON.parse `catch` emptied: `chunk` stays undefined and the next check counts the
 *   same malformed_event.
 * - the `typeof x === 'object'` halves of the choice, delta and timings guards made true or false:
 *   null is still caught by the other half, and reading a field of a number or a string gives
 *   undefined, which reads as no content, no index and no count (the hostile-upstream tests above).
 */
