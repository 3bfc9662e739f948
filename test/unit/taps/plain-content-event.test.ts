import { describe, expect, it } from 'vitest';
import { chatContentChunk, chatRoleChunk } from '../../../src/simulator/openai-wire.js';
import { createOpenAISseTap } from '../../../src/taps/openai-sse.js';
import { isPlainContentChunk } from '../../../src/taps/plain-content-event.js';
import { llamacppStream, splitEvents } from '../../helpers/fixtures.js';
import { runTap, sse } from '../../helpers/tap-harness.js';

/** What the tap's JSON.parse path reads from an event, computed independently of the tap. */
function parsedReading(data: string): { plainOneToken: boolean } {
  let chunk: unknown;
  try {
    chunk = JSON.parse(data);
  } catch {
    return { plainOneToken: false };
  }
  if (chunk === null || typeof chunk !== 'object' || Array.isArray(chunk)) return { plainOneToken: false };
  const c = chunk as Record<string, unknown>;
  if ('error' in c || c['object'] === 'error' || c['usage'] != null || c['timings'] != null) return { plainOneToken: false };
  const choices = c['choices'];
  if (!Array.isArray(choices) || choices.length !== 1) return { plainOneToken: false };
  const choice = choices[0] as Record<string, unknown>;
  const delta = choice['delta'] as Record<string, unknown> | null | undefined;
  const content = delta?.['content'];
  return { plainOneToken: choice['finish_reason'] == null && typeof content === 'string' && content.length > 0 };
}

const BASE = '{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1764400000,"model":"m","choices":[{"index":0,"delta":{"content":"tok"},"logprobs":null,"finish_reason":null}]}';

/** [event data, recognised without parsing?] */
const CASES: ReadonlyArray<readonly [string, boolean]> = [
  [BASE, true],
  [BASE.replace('"content":"tok"', '"content":"caf\u00e9 \u4e16\u754c \ud83d\ude00"'), true],
  [BASE.replace('"content":"tok"', '"role":"assistant","content":"tok","reasoning_content":null'), true],
  [BASE.replace('"finish_reason":null', '"finish_reason":null,"stop_reason":null,"token_ids":null'), true],
  // Escapes in the content: a token that is a newline, a quote, a backslash, a \u escape.
  [BASE.replace('"content":"tok"', '"content":"say \\"hi\\""'), true],
  [BASE.replace('"content":"tok"', '"content":"\\n"'), true],
  [BASE.replace('"content":"tok"', '"content":"a\\\\b\\/\\b\\f\\r\\t"'), true],
  [BASE.replace('"content":"tok"', '"content":"\\u00e9\\uD83D\\ude00"'), true],
  [BASE.replace('"content":"tok"', '"content":"\\u0000"'), true],
  // Not recognised: each of these is something else to the tap, or needs the parser to tell.
  [BASE.replace('"finish_reason":null', '"finish_reason":"stop"'), false],
  [BASE.replace('"finish_reason":null', '"finish_reason":1'), false],
  [BASE.replace('"content":"tok"', '"content":""'), false],
  [BASE.replace('"content":"tok"', '"content":"a","content":""'), false],
  [BASE.replace('"delta":{"content":"tok"}', '"delta":{"content":"tok"},"delta":null'), false],
  // Not JSON escapes: the parser refuses them.
  [BASE.replace('"content":"tok"', '"content":"\\x41"'), false],
  [BASE.replace('"content":"tok"', '"content":"\\u12"'), false],
  [BASE.replace('"content":"tok"', '"content":"\\u12G4"'), false],
  [BASE.replace('"content":"tok"', '"content":"tok\\"'), false],
  [BASE.replace('"content":"tok"', '"content":"\\"'), false],
  // Escapes anywhere but the content: "object":"error" spelled with an escape is an error to the parser.
  [BASE.replace('"object":"chat.completion.chunk"', '"object":"\\u0065rror"'), false],
  [BASE.replace('"model":"m"', '"model":"\\u006d"'), false],
  [BASE.replace('"content":"tok"', '"role":"assist\\u0061nt","content":"tok"'), false],
  [BASE.replace('"content":"tok"', '"content":"a\u0001b"'), false],
  [BASE.replace('"content":"tok"', '"content":["tok"]'), false],
  [BASE.replace('"content":"tok"', '"content":"tok","tool_calls":[]'), false],
  [BASE.replace('}]}', '},{"index":1,"delta":{"content":"x"},"finish_reason":null}]}'), false],
  [BASE.replace('"model":"m"', '"model":"m","usage":{"prompt_tokens":1,"completion_tokens":2}'), false],
  [BASE.replace('"model":"m"', '"model":"m","usage":null'), false],
  [BASE.replace('"model":"m"', '"model":"m","timings":{"predicted_n":3}'), false],
  [BASE.replace('"model":"m"', '"model":"m","error":null'), false],
  [BASE.replace('"object":"chat.completion.chunk"', '"object":"error"'), false],
  [`${BASE.slice(0, -1)},"choices":[]}`, false],
  [BASE.replace('"created":1764400000', '"created":01764400000'), false],
  [BASE.slice(0, -1), false],
  [`${BASE}x`, false],
  [` ${BASE}`, false],
  [BASE.replace('"index":0,', '"index":0, '), false],
  ['[DONE]', false],
];

describe('plain content events, recognised without JSON.parse', () => {
  it('accepts exactly the events the parser reads as one content token and nothing else', () => {
    for (const [data, expected] of CASES) {
      expect(isPlainContentChunk(data), data).toBe(expected);
      // Whatever is recognised must mean exactly that to the parser.
      if (expected) expect(parsedReading(data).plainOneToken, data).toBe(true);
    }
  });

  it('recognises the simulator token chunks and llama.cpp content events, not their role or finish chunks', () => {
    const identity = { id: 'chatcmpl-9', created: 1764400000, model: 'sim-model' };
    expect(isPlainContentChunk(chatContentChunk(identity, 'tok ', null, undefined))).toBe(true);
    expect(isPlainContentChunk(chatContentChunk(identity, 'tok ', 'stop', undefined))).toBe(false);
    expect(isPlainContentChunk(chatRoleChunk(identity, undefined))).toBe(false);
    const dataLines = splitEvents(llamacppStream('chat-completions.sse'))
      .map((b) => b.toString('utf8'))
      .filter((e) => e.startsWith('data: {'))
      .map((e) => e.slice('data: '.length).trimEnd());
    const recognised = dataLines.filter(isPlainContentChunk);
    expect(recognised.length).toBeGreaterThan(10);
    // Not every one-token content event is recognised (escapes go to the parser); every recognised one is one.
    for (const data of recognised) expect(parsedReading(data).plainOneToken, data).toBe(true);
    expect(recognised.length).toBeLessThan(dataLines.length);
  });

  it('leaves the tap reading what it read before, recognised events among parsed ones', () => {
    const run = runTap(createOpenAISseTap, sse(...CASES.map(([data]) => data)));
    // Content events: the 9 recognised; parsed: finish "stop", finish 1, the escaped model and
    // role, content with empty tool_calls, two choices (2 tokens), usage (completion_tokens 2: 2
    // tokens), usage null, timings (predicted_n 3 after 2: 1 token), leading space, space after a comma.
    expect(run.timeline.contentEvents).toBe(20);
    expect(run.timeline.countedTokens).toBe(22);
    expect(run.timeline.reportedOutputTokens).toBe(2);
    // Five bad escapes, raw control character, leading zero, truncated, trailing garbage.
    expect(run.problems).toEqual(Array(9).fill('malformed_event'));
    expect(run.timeline.terminal).toBe(true);
    expect(run.timeline.errorEvent).toBe(true);
  });
});
