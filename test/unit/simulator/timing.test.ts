import { describe, expect, it } from 'vitest';
import { CHAT_BODY, simulator, streamRequest } from './helpers.js';

/**
 * Real-time behaviour, with generous tolerances: this runs on a noisy 2-core machine. Lower bounds
 * are tight (a timer never fires meaningfully early); upper bounds are loose.
 */

const STREAM = { ...CHAT_BODY, stream: true };
/** Node timers may fire up to about a millisecond before performance.now() reaches the target. */
const EARLY_MS = 2;

describe('timing', () => {
  it('sends the role prelude on the headers and the first content token after ttft', async () => {
    const sim = await simulator({ ttftMs: 150, itlMs: 10, outputTokens: 3 });
    const result = await streamRequest(sim.url, '/v1/chat/completions', STREAM);
    const [prelude, first] = result.events;
    expect(JSON.parse(prelude?.data ?? '{}')).toMatchObject({ choices: [{ delta: { role: 'assistant', content: '' } }] });
    // At once, not after the TTFT (150 ms): the bound leaves room for a loaded machine's stalls.
    expect((prelude?.atMs ?? Infinity) - result.sentMs).toBeLessThan(140);
    expect((first?.atMs ?? 0) - result.sentMs).toBeGreaterThanOrEqual(150 - EARLY_MS);
    expect((first?.atMs ?? Infinity) - result.sentMs).toBeLessThan(150 + 500);
  });

  it('spaces content chunks by itl from the start of the stream', async () => {
    const sim = await simulator({ ttftMs: 20, itlMs: 15, outputTokens: 10 });
    const result = await streamRequest(sim.url, '/v1/chat/completions', STREAM);
    const content = result.events.slice(1, 11);
    content.forEach((event, k) => {
      expect(event.atMs - result.sentMs, `token ${k}`).toBeGreaterThanOrEqual(20 + k * 15 - EARLY_MS);
    });
    expect((content.at(-1)?.atMs ?? Infinity) - result.sentMs).toBeLessThan(20 + 9 * 15 + 400);
  });

  it('catches up after a stalled event loop instead of shifting every later chunk', async () => {
    const sim = await simulator({ ttftMs: 20, itlMs: 20, outputTokens: 20 });
    const result = await streamRequest(sim.url, '/v1/chat/completions', STREAM, {
      onEvent: (events) => {
        if (events.length !== 2) return;
        // Block this process (client and simulator alike) for 300 ms after the first token.
        const until = performance.now() + 300;
        while (performance.now() < until);
      },
    });
    const lastMs = (result.events[20]?.atMs ?? Infinity) - result.sentMs;
    // Targets run to 20 + 19 × 20 = 400 ms. Delays chained from chunk to chunk would push the end
    // to about 320 + 19 × 20 = 700 ms.
    expect(lastMs).toBeGreaterThanOrEqual(400 - EARLY_MS);
    expect(lastMs).toBeLessThan(650);
  });

  it('applies per-request timing headers', async () => {
    const sim = await simulator({ ttftMs: 1_000, outputTokens: 2 });
    const result = await streamRequest(sim.url, '/v1/chat/completions', STREAM, {
      headers: { 'x-sim-ttft-ms': '30', 'x-sim-itl-ms': '0' },
    });
    expect((result.events.at(-1)?.atMs ?? Infinity) - result.sentMs).toBeLessThan(600);
    expect((result.events[1]?.atMs ?? 0) - result.sentMs).toBeGreaterThanOrEqual(30 - EARLY_MS);
  });

  it('delays a non-streaming response by the whole generation', async () => {
    const sim = await simulator({ ttftMs: 40, itlMs: 20, outputTokens: 5 });
    const result = await streamRequest(sim.url, '/v1/chat/completions', CHAT_BODY);
    // ttft + 4 gaps to the last token + 1 for the stop step.
    expect(result.headMs - result.sentMs).toBeGreaterThanOrEqual(40 + 5 * 20 - EARLY_MS);
    expect(result.headMs - result.sentMs).toBeLessThan(40 + 5 * 20 + 500);
  });
});
