import { describe, expect, it } from 'vitest';
import { TokenTimeline } from '../../../src/clock/token-timeline.js';

/** A timeline started at 1000 ms whose inter-token samples are collected as [gap, tokens]. */
function timeline() {
  const gaps: Array<[number, number]> = [];
  const t = new TokenTimeline(1000, { interToken: (gapMs, tokens) => gaps.push([gapMs, tokens]) });
  return { t, gaps };
}

describe('token timeline: TPOT', () => {
  it('is measured for a 2-token answer: the one gap between its two tokens', () => {
    const { t } = timeline();
    t.content(1120, 1);
    t.content(1150, 1);
    expect(t.tpotMs).toBe(30);
  });

  it('is measured for one content event carrying 2 tokens by the usage: no time between them, 0 ms', () => {
    const { t } = timeline();
    t.content(1120, 2);
    expect(t.tpotMs).toBe(0);
  });

  it('is not measured for a 1-token answer, nor for an answer with no streamed token', () => {
    const one = timeline().t;
    one.content(1120, 1);
    expect(one.tpotMs).toBeNaN();
    const none = timeline().t;
    none.usage(3, 40);
    expect(none.tpotMs).toBeNaN();
  });

  it('is not measured when the server reports fewer than 2 output tokens for a streamed answer (no negative or infinite TPOT)', () => {
    for (const reported of [0, 1]) {
      const { t } = timeline();
      t.content(1100, 1);
      t.content(1200, 1);
      t.usage(3, reported);
      expect(t.tpotMs, `usage ${reported}`).toBeNaN();
    }
  });

  it('divides by the reported output tokens when the server reports usage, not by the counted ones', () => {
    const { t } = timeline();
    t.content(1100, 1);
    t.content(1200, 1);
    t.usage(3, 5);
    expect(t.tpotMs).toBe(25);
  });
});

describe('token timeline: token count mismatch (counted > reported)', () => {
  it('is not judged for a non-streamed answer with usage (no content events)', () => {
    const { t } = timeline();
    t.usage(3, 40);
    expect(t.tokenCountMismatch).toBe(false);
  });

  it('is not judged for a stream whose only tokens carried no content, whatever the usage says', () => {
    const { t } = timeline();
    t.contentlessTokens(1);
    t.usage(3, 0);
    expect(t.tokenCountMismatch).toBe(false);
  });

  it('is not counted when the counted tokens equal the reported ones, and is when they exceed them by one', () => {
    const { t } = timeline();
    t.content(1100, 1);
    t.content(1110, 2);
    t.usage(3, 3);
    expect(t.tokenCountMismatch).toBe(false);
    t.usage(undefined, 2);
    expect(t.tokenCountMismatch).toBe(true);
  });

  it('is not judged without a usage report', () => {
    const { t } = timeline();
    t.content(1100, 5);
    expect(t.tokenCountMismatch).toBe(false);
    expect(t.outputTokenSource).toBe('counted');
    expect(t.outputTokens).toBe(5);
  });
});

describe('token timeline: times from the request start and token counts', () => {
  it('measures TTFB, TTFT and the time to the first answer token from the start, reasoning before the answer', () => {
    const { t, gaps } = timeline();
    t.bytes(1050);
    t.bytes(1060);
    t.content(1100, 1, true);
    t.content(1180, 2);
    expect({ ttfb: t.ttfbMs, ttft: t.ttftMs, answer: t.ttftAnswerMs }).toEqual({ ttfb: 50, ttft: 100, answer: 180 });
    expect(gaps).toEqual([[80, 2]]);
  });

  it('keeps the reported input tokens when a later usage report carries only the output, and the reverse', () => {
    const { t } = timeline();
    t.usage(7, 3);
    t.usage(undefined, 5);
    expect({ input: t.reportedInputTokens, output: t.reportedOutputTokens }).toEqual({ input: 7, output: 5 });
    t.usage(9, undefined);
    expect({ input: t.reportedInputTokens, output: t.reportedOutputTokens }).toEqual({ input: 9, output: 5 });
  });

  it("adds tokens without content (TGI's end-of-sequence token) to the counted output, without a content event", () => {
    const { t, gaps } = timeline();
    t.content(1100, 1);
    t.content(1110, 1);
    t.contentlessTokens(1);
    expect({ counted: t.countedTokens, events: t.contentEvents, output: t.outputTokens, source: t.outputTokenSource }).toEqual({ counted: 3, events: 2, output: 3, source: 'counted' });
    expect(gaps).toEqual([[10, 1]]);
    // A server reporting 2 generated tokens for these 3 undercounts.
    t.usage(1, 2);
    expect(t.tokenCountMismatch).toBe(true);
  });
});

/*
 * The one mutant Stryker reports surviving in src/clock/token-timeline.ts changes no behaviour:
 * tpotMs's `this.contentEvents === 0` made false. Without a content event the first and last token
 * times are NaN, so the formula gives NaN as the guard does.
 */
