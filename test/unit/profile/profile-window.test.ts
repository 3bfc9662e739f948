import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../../src/clock/clock.js';
import { ProfileStore } from '../../../src/profile/profile-store.js';

const T0 = 1_800_000_000_000;

/** A sidecar up for a minute, one request a second, asked for a 30-minute window (docs/workload-profiles.md's own command). */
function minuteOld(): ProfileStore {
  const clock = new ManualClock(5_000);
  const store = new ProfileStore({ maxRequestsPerWorkload: 1000, blockTokens: 512, workloads: ['chat', 'rag'] }, clock, { nowUnixMs: T0 });
  for (let i = 0; i < 60; i++) {
    store.record('chat', { startMs: 5_000 + i * 1000, durationMs: 200, inputTokens: 100, outputTokens: 20, cachedInputTokens: Number.NaN, outcome: 'completed', blocks: undefined });
  }
  clock.advance(60_000);
  return store;
}

describe('the profile window of a sidecar younger than the window asked', () => {
  it('starts when the sidecar started, so the rate is over the minute it saw, not diluted over 30 minutes it did not (newcomer run: 0.017/s exported for 0.5/s)', () => {
    const profile = minuteOld().profile('chat', 30 * 60_000);
    expect(profile?.window.startUnixMs).toBe(T0);
    expect(profile?.window.seconds).toBe(60);
    expect(profile?.arrivals.ratePerSecond).toBe(1);
  });

  it('starts there for every workload of the profile set too', () => {
    const set = minuteOld().profileSet(30 * 60_000);
    expect(set.window.seconds).toBe(60);
    expect(set.workloads.find((w) => w.workload === 'chat')?.arrivals.ratePerSecond).toBe(1);
  });

  it('is the window asked once the sidecar is older than it', () => {
    const profile = minuteOld().profile('chat', 30_000);
    expect(profile?.window.seconds).toBe(30);
    expect(profile?.requests).toBe(30);
  });
});
