import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readBenchmarkResult } from '../../../src/profile/benchmark-result.js';
import type { BenchmarkShape } from '../../../src/profile/benchmark-shape.js';
import { compareShapes, TOLERANCES } from '../../../src/profile/shape-comparison.js';
import { distribution, workloadProfile } from './workload-profiles.js';

const GUIDELLM_JSON = join(import.meta.dirname, '..', '..', 'fixtures', 'benchmarks', 'guidellm', 'benchmarks_stripped.json');

function bench(overrides: Partial<BenchmarkShape> = {}): BenchmarkShape {
  return {
    tool: 'GuideLLM',
    label: 'benchmark 0 of 1 (poisson)',
    requests: 1000,
    ttft: { p50: 0.1, p99: 0.3 },
    itl: { p50: 0.01, p99: 0.03 },
    inputTokens: { mean: 800, stdev: 640, p50: 600, p99: 3200 },
    outputTokens: { mean: 200, stdev: 150, p50: 160, p99: 700 },
    ratePerSecond: 2,
    interArrivalCv: 1.1,
    ...overrides,
  };
}

/** Production close to bench(): lognormal-like lengths, Poisson-like arrivals, no shared prefixes. */
const PRODUCTION = workloadProfile({
  inputTokens: distribution(3600, 820, 700, 610, 3000),
  outputTokens: distribution(3600, 190, 140, 150, 650),
  arrivals: { ratePerSecond: 1, interArrivalCv: 1.3, gammaShape: 0.59 },
});

describe('comparing a benchmark with production', () => {
  it('flags nothing when every dimension is within tolerance (the rate may differ: benchmarks sweep it), and counts the three both sides report', () => {
    // Prefix sharing is not among them: the result reports no cached tokens and production shares none.
    expect(compareShapes(PRODUCTION, bench({ ratePerSecond: 40 }))).toEqual({ flags: [], unknown: [], compared: 3 });
  });

  it("flags the real GuideLLM run's fixed 257/128-token requests against production's long-tailed lengths, each with its reason", async () => {
    const [guidellm] = await readBenchmarkResult(GUIDELLM_JSON);
    const { flags, unknown } = compareShapes(PRODUCTION, guidellm as BenchmarkShape);
    expect(flags.map((f) => f.dimension)).toEqual(['input length mean', 'input length p99', 'input length spread', 'output length mean', 'output length p99', 'output length spread']);
    expect(flags[0]?.reason).toBe('benchmark 257 tokens, production 820 tokens (−69 %, tolerance ±20 %)');
    expect(flags[2]?.reason).toMatch(/^stdev\/mean 0\.00 in the benchmark, 0\.85 in production \(tolerance ±0\.5\): the benchmark's lengths vary far less than production's$/);
    // One request sample in the file: burstiness is not guessed.
    expect(unknown.map((u) => u.dimension)).toEqual(['burstiness']);
    expect(unknown[0]?.reason).toMatch(/fewer than 3 per-request start times .*production's CV is 1\.30/);
  });

  it.each([
    ['mean 21 % longer', { mean: 820 * 1.21 }, true],
    ['mean 19 % longer', { mean: 820 * 1.19 }, false],
    ['mean 21 % shorter', { mean: 820 * 0.79 }, true],
  ])('holds the mean input length to ±20 %%: %s', (_name, input, flagged) => {
    const result = compareShapes(PRODUCTION, bench({ inputTokens: { ...bench().inputTokens, ...input, stdev: 0.85 * (input.mean as number) } }));
    expect(result.flags.some((f) => f.dimension === 'input length mean')).toBe(flagged);
  });

  it('flags burstiness beyond 0.5 of CV and says what each side means: Poisson-like against bursty', () => {
    const bursty = workloadProfile({ ...PRODUCTION, arrivals: { ratePerSecond: 1, interArrivalCv: 2.4, gammaShape: 0.17 } });
    const { flags } = compareShapes(bursty, bench({ interArrivalCv: 1.0 }));
    expect(flags).toEqual([{ dimension: 'burstiness', reason: 'inter-arrival CV 1.00 in the benchmark (Poisson-like), 2.40 in production (bursty; tolerance ±0.5)' }]);
    expect(compareShapes(bursty, bench({ interArrivalCv: 2.4 - TOLERANCES.arrivalCv + 0.01 })).flags).toEqual([]);
  });

  it('flags prefix sharing absent from the benchmark while production shares, and says when the result cannot tell', () => {
    const sharing = workloadProfile({ ...PRODUCTION, cachedInputShare: 0.6, prefixSharing: { blockTokens: 512, sharedPrefixShare: 0.7, sharedBlockShare: 0.4 } });
    expect(compareShapes(sharing, bench({ cachedInputShare: 0 })).flags).toEqual([
      { dimension: 'prefix sharing', reason: 'absent from the benchmark, while 60 % of production requests had cached input tokens (tolerance ±20 points)' },
    ]);
    expect(compareShapes(sharing, bench({ cachedInputShare: 0.55 })).flags).toEqual([]);
    const unknown = compareShapes(sharing, bench()).unknown;
    expect(unknown).toEqual([{ dimension: 'prefix sharing', reason: 'the result reports no cached tokens, while 60 % of production requests had cached input tokens; check the benchmark sent shared prefixes' }]);
  });

  it("gives the result's own reason when it says why it has no burstiness (a GuideLLM sample)", () => {
    const { unknown, compared } = compareShapes(PRODUCTION, bench({ interArrivalCv: undefined, interArrivalNote: 'GuideLLM kept 20 of its 210 requests' }));
    expect(unknown).toEqual([{ dimension: 'burstiness', reason: "GuideLLM kept 20 of its 210 requests; production's CV is 1.30" }]);
    expect(compared).toBe(2);
  });

  it('says production lengths are unknown when no request in the window reported usage, rather than flagging', () => {
    const noUsage = workloadProfile({ ...PRODUCTION, inputTokens: { count: 0 }, outputTokens: { count: 0 } });
    const result = compareShapes(noUsage, bench());
    expect(result.flags).toEqual([]);
    expect(result.unknown.map((u) => u.reason)).toEqual(['no production request in the window reported its token usage', 'no production request in the window reported its token usage']);
    expect(result.compared).toBe(1);
  });

  it('flags a benchmark whose lengths vary far more than production\'s, and a tail off by more than half', () => {
    const steady = workloadProfile({ ...PRODUCTION, inputTokens: distribution(3600, 800, 80, 790, 1000) });
    const { flags } = compareShapes(steady, bench({ inputTokens: { mean: 800, stdev: 640, p50: 600, p99: 3200 } }));
    expect(flags).toEqual([
      { dimension: 'input length p99', reason: "benchmark 3200 tokens, production 1000 tokens (+220 %, tolerance ±50 %): the tail is not production's" },
      { dimension: 'input length spread', reason: "stdev/mean 0.80 in the benchmark, 0.10 in production (tolerance ±0.5): the benchmark's lengths vary far more than production's" },
    ]);
    // Within ±50 % on the tail: not flagged.
    expect(compareShapes(steady, bench({ inputTokens: { mean: 800, stdev: 80, p50: 790, p99: 1490 } })).flags).toEqual([]);
  });

  it('says evenly spaced for a CV under 0.5, and that production burstiness is unknown with too few arrivals', () => {
    const even = compareShapes(PRODUCTION, bench({ interArrivalCv: 0.2 })).flags;
    expect(even).toEqual([{ dimension: 'burstiness', reason: 'inter-arrival CV 0.20 in the benchmark (evenly spaced), 1.30 in production (Poisson-like; tolerance ±0.5)' }]);
    const few = workloadProfile({ ...PRODUCTION, arrivals: { ratePerSecond: 0.001 } });
    expect(compareShapes(few, bench()).unknown).toEqual([{ dimension: 'burstiness', reason: 'fewer than 3 production arrivals in the window' }]);
  });

  it("compares prefix sharing with production's fingerprint share when the server reports no cached tokens", () => {
    const fingerprinted = workloadProfile({ ...PRODUCTION, prefixSharing: { blockTokens: 512, sharedPrefixShare: 0.7, sharedBlockShare: 0.5 } });
    expect(compareShapes(fingerprinted, bench({ cachedInputShare: 0.3 })).flags).toEqual([
      { dimension: 'prefix sharing', reason: '30 % of benchmark requests had cached input tokens, while 70 % of production requests share a leading block with another request (tolerance ±20 points)' },
    ]);
    // Production sharing nothing and a result without cached tokens: nothing to say.
    expect(compareShapes(PRODUCTION, bench()).unknown).toEqual([]);
  });

  it('says the mean is missing from the result rather than comparing, and reports a production mean of 0 as such', () => {
    expect(compareShapes(PRODUCTION, bench({ outputTokens: { p50: 160 } })).unknown).toEqual([{ dimension: 'output length', reason: 'the result file has no mean for it' }]);
    const empty = workloadProfile({ ...PRODUCTION, outputTokens: { count: 10, mean: 0, stdev: 0, p50: 0, p99: 0 } });
    const flag = compareShapes(empty, bench()).flags.find((f) => f.dimension === 'output length mean');
    expect(flag?.reason).toBe('benchmark 200 tokens, production 0 tokens (production is 0, tolerance ±20 %)');
    expect(compareShapes(empty, bench({ outputTokens: { mean: 0, stdev: 0, p50: 0, p99: 0 } })).flags).toEqual([]);
  });

  it('flags exactly past the tolerance, not at it', () => {
    const at = compareShapes(PRODUCTION, bench({ inputTokens: { mean: 820 * 1.2, stdev: 0.85 * 820 * 1.2, p50: 600, p99: 3000 } }));
    expect(at.flags.map((f) => f.dimension)).not.toContain('input length mean');
  });
});
