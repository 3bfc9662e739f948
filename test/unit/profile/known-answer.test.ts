import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../../src/clock/clock.js';
import { ProfileStore } from '../../../src/profile/profile-store.js';
import type { WorkloadProfile } from '../../../src/profile/workload-profile.js';
import { SeededRandom } from '../../helpers/seeded-random.js';

/**
 * Known answer: requests drawn from known distributions (seeded, under a manual clock) go through
 * the same path the request monitor takes (fingerprint of the parsed body, then record), and the
 * fitted profile must give back each parameter within the tolerance stated beside it. The
 * tolerances are several standard errors wide at these sample sizes, so the seed does not matter.
 */
const T0 = 1_800_000_000_000;
const REQUESTS = 3000;
const RATE = 5;
const ARRIVAL_SHAPE = 0.5;
const INPUT = { mu: 7, sigma: 0.35 };
const OUTPUT = { shape: 2, scale: 80 };
const SHARED = 0.6;
const SYSTEM_PROMPTS = 4;

interface Drawn {
  readonly profile: WorkloadProfile;
  readonly sharedWithFullBlock: number;
  readonly cachedShare: number;
  readonly meanDurationMs: number;
}

function drive(seed: number): Drawn {
  const random = new SeededRandom(seed);
  const clock = new ManualClock(0);
  const store = new ProfileStore({ maxRequestsPerWorkload: REQUESTS, blockTokens: 512, workloads: ['chat'] }, clock, { nowUnixMs: T0 });
  // 512 tokens at the simulator's 4 bytes a token (src/simulator/protocol.ts countPromptTokens): one block.
  const systems = Array.from({ length: SYSTEM_PROMPTS }, () => random.letters(2048));
  let startMs = 0;
  let sharedWithFullBlock = 0;
  let cachedReported = 0;
  let cachedAny = 0;
  let durationSum = 0;
  for (let i = 0; i < REQUESTS; i++) {
    startMs += random.gamma(ARRIVAL_SHAPE, 1000 / (RATE * ARRIVAL_SHAPE));
    const inputTokens = Math.max(1, Math.round(random.lognormal(INPUT.mu, INPUT.sigma)));
    const outputTokens = Math.max(1, Math.round(random.gamma(OUTPUT.shape, OUTPUT.scale)));
    const shared = random.next() < SHARED;
    const system = shared ? (systems[Math.floor(random.next() * SYSTEM_PROMPTS)] as string) : undefined;
    const user = random.letters(Math.max(1, inputTokens * 4 - (system?.length ?? 0)));
    const body = { model: 'm', messages: [...(system === undefined ? [] : [{ role: 'system', content: system }]), { role: 'user', content: user }] };
    if (shared && inputTokens >= 512) sharedWithFullBlock++;
    const cachedDraw = random.next();
    const cachedInputTokens = cachedDraw < 0.3 ? 100 : cachedDraw < 0.5 ? 0 : Number.NaN;
    if (!Number.isNaN(cachedInputTokens)) cachedReported++;
    if (cachedInputTokens > 0) cachedAny++;
    const durationMs = 200 + 5 * outputTokens;
    durationSum += durationMs;
    const blocks = store.fingerprint('chat', body);
    store.record('chat', { startMs, durationMs, inputTokens, outputTokens, cachedInputTokens, outcome: 'completed', blocks });
  }
  clock.advance(startMs + 1);
  return { profile: store.profile('chat', startMs) as WorkloadProfile, sharedWithFullBlock: sharedWithFullBlock / REQUESTS, cachedShare: cachedAny / cachedReported, meanDurationMs: durationSum / REQUESTS };
}

describe('the fitted profile of traffic with known distributions', () => {
  const drawn = drive(20261201);
  const { profile } = drawn;

  it('counts every request, with its outcome', () => {
    expect(profile.requests).toBe(REQUESTS);
    expect(profile.outcomes).toEqual({ completed: REQUESTS });
  });

  it('fits lognormal input lengths as lognormal, mu and sigma within 0.03', () => {
    expect(profile.inputTokens.count).toBe(REQUESTS);
    expect(profile.inputTokens.fit?.family).toBe('lognormal');
    expect(profile.inputTokens.fit?.params['mu']).toBeCloseTo(INPUT.mu, 1);
    expect(Math.abs((profile.inputTokens.fit?.params['mu'] as number) - INPUT.mu)).toBeLessThan(0.03);
    expect(Math.abs((profile.inputTokens.fit?.params['sigma'] as number) - INPUT.sigma)).toBeLessThan(0.03);
    // The lognormal's median is e^mu: the sample's p50 within 5 %.
    expect(Math.abs((profile.inputTokens.p50 as number) / Math.exp(INPUT.mu) - 1)).toBeLessThan(0.05);
  });

  it('fits gamma output lengths as gamma, shape within 10 % and mean within 5 %', () => {
    expect(profile.outputTokens.fit?.family).toBe('gamma');
    expect(Math.abs((profile.outputTokens.fit?.params['shape'] as number) / OUTPUT.shape - 1)).toBeLessThan(0.1);
    expect(Math.abs((profile.outputTokens.mean as number) / (OUTPUT.shape * OUTPUT.scale) - 1)).toBeLessThan(0.05);
  });

  it('recovers the arrival rate within 5 % and the gamma shape of bursty arrivals within 15 %', () => {
    expect(Math.abs(profile.arrivals.ratePerSecond / RATE - 1)).toBeLessThan(0.05);
    expect(Math.abs((profile.arrivals.gammaShape as number) / ARRIVAL_SHAPE - 1)).toBeLessThan(0.15);
    expect(Math.abs((profile.arrivals.interArrivalCv as number) - 1 / Math.sqrt(ARRIVAL_SHAPE))).toBeLessThan(0.15);
  });

  it("recovers the share of requests sharing a system prompt within 0.02, and no sharing among the others' unique text", () => {
    expect(Math.abs(profile.prefixSharing.sharedPrefixShare - drawn.sharedWithFullBlock)).toBeLessThan(0.02);
    expect(profile.prefixSharing.sharedPrefixShare).toBeGreaterThan(0.5);
    // Each shared request repeats one block of its ~2 (e^7 / 512); the first user of each prompt shares nothing.
    expect(profile.prefixSharing.sharedBlockShare).toBeGreaterThan(0.15);
    expect(profile.prefixSharing.sharedBlockShare).toBeLessThan(drawn.sharedWithFullBlock);
  });

  it('gives the share of requests with cached input among those that reported it, and the concurrency by Little\'s law within 10 %', () => {
    expect(profile.cachedInputShare).toBeCloseTo(drawn.cachedShare, 10);
    expect(Math.abs(profile.concurrency.mean / ((RATE * drawn.meanDurationMs) / 1000) - 1)).toBeLessThan(0.1);
    expect(profile.concurrency.max).toBeGreaterThanOrEqual(Math.ceil(profile.concurrency.mean));
  });

  it('recovers the same parameters from another seed', () => {
    const other = drive(7).profile;
    expect(Math.abs((other.inputTokens.fit?.params['mu'] as number) - INPUT.mu)).toBeLessThan(0.03);
    expect(Math.abs((other.arrivals.gammaShape as number) / ARRIVAL_SHAPE - 1)).toBeLessThan(0.15);
  });
});
