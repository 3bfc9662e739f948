import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../../src/clock/clock.js';
import { interArrivalCv, lengthSummary, mean, percentile, rateOfStarts, stdev } from '../../../src/profile/benchmark-shape.js';
import { ProfileStore } from '../../../src/profile/profile-store.js';

describe('the statistics of a benchmark sample', () => {
  it('takes percentiles with linear interpolation between closest ranks (numpy.percentile), whatever the order given', () => {
    // numpy.percentile([1, 2, 3, 4, 10], [50, 90, 99]) = 3, 7.6, 9.76
    const values = [10, 3, 1, 4, 2];
    expect(percentile(values, 0.5)).toBe(3);
    expect(percentile(values, 0.9)).toBeCloseTo(7.6, 12);
    expect(percentile(values, 0.99)).toBeCloseTo(9.76, 12);
    expect(percentile([], 0.5)).toBeUndefined();
    expect(values).toEqual([10, 3, 1, 4, 2]);
  });

  it('gives mean and population stdev (ddof 0, as GuideLLM and AIPerf report), undefined without values', () => {
    expect(mean([2, 4, 9])).toBe(5);
    expect(stdev([2, 4, 9])).toBeCloseTo(Math.sqrt(26 / 3), 12);
    expect(mean([])).toBeUndefined();
    expect(stdev([])).toBeUndefined();
    expect(lengthSummary([])).toEqual({ mean: undefined, stdev: undefined, p50: undefined, p99: undefined });
  });

  it('measures burstiness on the gaps between starts in time order, not in the order the file lists them', () => {
    // Starts 0, 1, 3, 6 listed out of order: gaps 1, 2, 3, mean 2, sample stdev 1.
    expect(interArrivalCv([6, 0, 3, 1])).toBeCloseTo(1 / 2, 12);
    // Three starts are enough (two gaps); two are not. Gaps 1, 2: sample stdev sqrt(1/2).
    expect(interArrivalCv([0, 1, 3])).toBeCloseTo(Math.sqrt(1 / 2) / 1.5, 12);
    expect(interArrivalCv([0, 1])).toBeUndefined();
    // Every request at once: no gap to measure.
    expect(interArrivalCv([5, 5, 5, 5])).toBeUndefined();
  });

  it('gives the CV the production profile gives for the same starts, so profile compare sets like against like (was: population stdev here, sample stdev there: 0.41 against 0.5)', () => {
    const clock = new ManualClock(0);
    const store = new ProfileStore({ maxRequestsPerWorkload: 10, blockTokens: 512, workloads: ['chat'] }, clock, { nowUnixMs: 1_800_000_000_000 });
    for (const startMs of [0, 1000, 3000, 6000]) store.record('chat', { startMs, durationMs: 10, inputTokens: 10, outputTokens: 1, cachedInputTokens: Number.NaN, outcome: 'completed', blocks: undefined });
    clock.advance(7000);
    expect(interArrivalCv([0, 1, 3, 6])).toBeCloseTo(store.profile('chat', 60_000)?.arrivals.interArrivalCv as number, 12);
  });

  it('gives the rate over the span of the starts, undefined with one start or none apart', () => {
    expect(rateOfStarts([30, 10, 20])).toBeCloseTo(0.1, 12);
    expect(rateOfStarts([10, 11])).toBe(1);
    expect(rateOfStarts([10])).toBeUndefined();
    expect(rateOfStarts([7, 7])).toBeUndefined();
  });
});
