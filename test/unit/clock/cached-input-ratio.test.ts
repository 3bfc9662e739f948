import { describe, expect, it } from 'vitest';
import { TokenTimeline } from '../../../src/clock/token-timeline.js';

const sink = { interToken: () => undefined };

function timeline(): TokenTimeline {
  return new TokenTimeline(0, sink);
}

describe('the cached share of a request\'s input (tokentap_request_cached_input_ratio)', () => {
  it('is cached over input when the server reported both', () => {
    const t = timeline();
    t.usage(10, 5, 4);
    expect(t.reportedCachedInputTokens).toBe(4);
    expect(t.cachedInputRatio).toBe(0.4);
  });

  it('is 1 when the whole prompt came from the cache', () => {
    const t = timeline();
    t.usage(8, 1, 8);
    expect(t.cachedInputRatio).toBe(1);
  });

  it('is unknown when the server reported no cached count, so a request without prompt details is no miss', () => {
    const t = timeline();
    t.usage(10, 5);
    expect(t.reportedCachedInputTokens).toBeNaN();
    expect(t.cachedInputRatio).toBeNaN();
  });

  it('keeps the cached count of an earlier report when a later one carries none (vLLM: details on one chunk, usage on the last)', () => {
    const t = timeline();
    t.usage(10, undefined, 6);
    t.usage(12, 3);
    expect(t.reportedCachedInputTokens).toBe(6);
    expect(t.cachedInputRatio).toBe(0.5);
  });

  it('is unknown for an empty prompt rather than a division by zero', () => {
    const t = timeline();
    t.usage(0, 1, 0);
    expect(t.cachedInputRatio).toBeNaN();
  });

  it('is unknown when reports from separate events put the cached part above the input (a share above 1 is no hit rate)', () => {
    const t = timeline();
    t.usage(10, undefined, 6);
    t.usage(5, 1);
    expect(t.cachedInputRatio).toBeNaN();
  });
});

// Mutation testing (npm run mutate -- src/clock/token-timeline.ts): two survivors in
// cachedInputRatio are equivalent. `input > 0` as `input >= 0` or as `true`: with an input of 0 the
// cached part is at most 0 and 0 / 0 is NaN, the same answer; with no input reported (NaN) the
// comparison `cached <= NaN` is false, so the answer is NaN either way; a negative input never
// reaches the timeline (upstream-numbers.ts bounds counts to 0..1e7).
