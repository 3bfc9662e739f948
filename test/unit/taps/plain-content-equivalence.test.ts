import { describe, expect, it, vi } from 'vitest';
import { createOpenAISseTap } from '../../../src/taps/openai-sse.js';
import { runTap, sse } from '../../helpers/tap-harness.js';
import { SeededRandom } from '../../helpers/seeded-random.js';

/** When false, the tap never takes the no-parse path: every event goes through JSON.parse. */
const mode = vi.hoisted(() => ({ fast: true }));
vi.mock('../../../src/taps/plain-content-event.js', async (importOriginal) => {
  const real = await importOriginal<typeof import('../../../src/taps/plain-content-event.js')>();
  return { isPlainContentChunk: (data: string) => mode.fast && real.isPlainContentChunk(data) };
});
const { isPlainContentChunk } = await vi.importActual<typeof import('../../../src/taps/plain-content-event.js')>('../../../src/taps/plain-content-event.js');

/** A deterministic source (mulberry32, test/helpers/seeded-random.ts), so a failing case can be found again by its seed. */
function random(seed: number): () => number {
  const source = new SeededRandom(seed);
  return () => source.next();
}

const KEYS = ['id', 'object', 'created', 'model', 'choices', 'usage', 'timings', 'metrics', 'error', 'index', 'delta', 'content', 'role', 'reasoning_content', 'reasoning', 'tool_calls', 'text', 'finish_reason', 'logprobs', 'stop_reason', '__proto__', 'constructor'];
const SCALARS = ['null', 'true', 'false', '0', '1', '-0', '1e999', '-1.5e-3', '""', '"x"', '"error"', '"\\u0065rror"', '"stop"', '"\\n"', '"\\""', '"\\u0000"', '"\\ud800"', '"a\\\\"', '{}', '[]', '{"queue_time_ms":5}', '[{"index":0}]', '{"completion_tokens":3}'];

function pick<T>(next: () => number, values: readonly T[]): T {
  return values[Math.floor(next() * values.length)] as T;
}

/** A compact object of a few fields, one of them (usually) the expected one. */
function object(next: () => number, fields: string[]): string {
  const out: string[] = [];
  const n = Math.floor(next() * next() * 4);
  for (let i = 0; i < n; i++) out.push(`"${pick(next, KEYS)}":${pick(next, SCALARS)}`);
  for (const field of fields) out.splice(Math.floor(next() * (out.length + 1)), 0, field);
  return `{${out.join(',')}}`;
}

function event(next: () => number): string {
  const content = next() < 0.8 ? `"content":${pick(next, ['"tok"', '"\\n"', '"\\""', '"\\u0000"', '"\\ud83d\\ude00"', '"a\\\\b"', '""', 'null', '"\\\\"'])}` : '';
  const delta = object(next, content === '' ? [] : [content]);
  const choice = object(next, [`"delta":${delta}`, ...(next() < 0.7 ? ['"index":0'] : [])]);
  const choices = next() < 0.9 ? `[${choice}]` : `[${choice},${choice}]`;
  return object(next, [`"choices":${choices}`]);
}

const ALPHABET = ['"', '\\', 'u', '0', '0065', ',', ':', '{', '}', '[', ']', 'e', 'n', 'null', ' ', '\n', 'x'];

function mutate(next: () => number, text: string): string {
  const at = Math.floor(next() * (text.length + 1));
  const r = next();
  if (r < 0.4) return text.slice(0, at) + pick(next, ALPHABET) + text.slice(at);
  if (r < 0.7) return text.slice(0, at) + text.slice(at + 1);
  return text.slice(0, at) + pick(next, ALPHABET) + text.slice(at + 1);
}

/** Everything the tap left on the timeline and reported, as comparable data. */
function reading(events: string[]): unknown {
  const run = runTap(createOpenAISseTap, sse(...events));
  const t = run.timeline;
  return {
    gaps: run.gaps,
    problems: run.problems,
    contentEvents: t.contentEvents,
    countedTokens: t.countedTokens,
    terminal: t.terminal,
    errorEvent: t.errorEvent,
    reportedOutputTokens: t.reportedOutputTokens,
    reportedInputTokens: t.reportedInputTokens,
    ttftMs: t.ttftMs,
    ttftAnswerMs: t.ttftAnswerMs,
    serverTimings: t.serverTimings,
  };
}

const FINISH = '{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}';

describe('review 27: the no-parse path reads exactly what JSON.parse reads', () => {
  it('gives the same timeline with and without the fast path for every recognised generated or mutated event', () => {
    const next = random(27);
    let recognised = 0;
    for (let i = 0; i < 300_000; i++) {
      let data = event(next);
      const mutations = Math.floor(next() * 3);
      for (let m = 0; m < mutations; m++) data = mutate(next, data);
      if (!isPlainContentChunk(data)) continue;
      recognised++;
      // Before: a reasoning event (first token not an answer); after: a finish for choice 0.
      const stream = ['{"choices":[{"index":0,"delta":{"reasoning_content":"r"}}]}', data, data, FINISH];
      mode.fast = true;
      const fast = reading(stream);
      mode.fast = false;
      const parsed = reading(stream);
      mode.fast = true;
      expect(fast, data).toEqual(parsed);
    }
    expect(recognised).toBeGreaterThan(5000);
  });
});
