import type { Distribution, WorkloadProfile } from '../../../src/profile/workload-profile.js';

/** A length distribution as the profile reports one. */
export function distribution(count: number, mean: number, stdev: number, p50: number, p99: number): Distribution {
  return { count, mean, stdev, min: Math.max(1, mean - 3 * stdev), max: mean + 5 * stdev, p50, p90: (p50 + p99) / 2, p99 };
}

/** A workload's profile over the last hour, with the figures a test sets and plain ones elsewhere. */
export function workloadProfile(overrides: Partial<WorkloadProfile> = {}): WorkloadProfile {
  const endUnixMs = Date.UTC(2026, 11, 1, 12, 0, 0);
  return {
    workload: 'chat',
    window: { startUnixMs: endUnixMs - 3_600_000, endUnixMs, seconds: 3600 },
    requests: 3600,
    inputTokens: distribution(3600, 257, 0.4, 257, 258),
    outputTokens: distribution(3600, 128, 0, 128, 128),
    arrivals: { ratePerSecond: 1, interArrivalCv: 1, gammaShape: 1 },
    concurrency: { mean: 1, max: 4 },
    prefixSharing: { blockTokens: 512, sharedPrefixShare: 0, sharedBlockShare: 0 },
    outcomes: { completed: 3600 },
    ...overrides,
  };
}
