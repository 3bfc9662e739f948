import { describe, expect, it } from 'vitest';
import { MIN_FIT_SAMPLES, summarize } from '../../../src/profile/distribution-fit.js';

describe('summarize', () => {
  it('offers no fit when every length is the same (demo reproduction: 11-token prompts shown as "best fit exponential (KS 0.632)")', () => {
    const summary = summarize(new Array<number>(50).fill(11));
    expect(summary).toMatchObject({ count: 50, mean: 11, stdev: 0, p50: 11, p99: 11 });
    expect(summary.fit).toBeUndefined();
  });

  it('still fits lengths that vary, from MIN_FIT_SAMPLES of them', () => {
    const lengths = Array.from({ length: MIN_FIT_SAMPLES }, (_, i) => 100 + 10 * i);
    expect(summarize(lengths).fit?.family).toBeDefined();
    expect(summarize(lengths.slice(1)).fit).toBeUndefined();
  });
});
