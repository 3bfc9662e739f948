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

/**
 * Ten requests a second for a minute, every other one a 30-second stream and the rest answered in
 * 100 ms, into a record of 200 requests. The record keeps requests in the order they finish, so by
 * the end it has dropped short requests that started after long ones it still holds.
 */
function mixedDurationsEvicting() {
  const clock = new ManualClock(0);
  const store = new ProfileStore({ maxRequestsPerWorkload: 200, blockTokens: 512, workloads: ['chat'] }, clock, { nowUnixMs: T0 });
  const requests = Array.from({ length: 600 }, (_, i) => ({ startMs: i * 100, durationMs: i % 2 === 0 ? 30_000 : 100, inputTokens: i % 2 === 0 ? 4000 : 100 }));
  const finished = requests.filter((r) => r.startMs + r.durationMs <= 60_000).sort((a, b) => a.startMs + a.durationMs - (b.startMs + b.durationMs));
  for (const r of finished) store.record('chat', { ...r, outputTokens: 20, cachedInputTokens: Number.NaN, outcome: 'completed', blocks: undefined });
  clock.advance(60_000);
  return { store, finished };
}

describe('the profile window of a record that dropped requests', () => {
  it('holds every finished request that started in it: it starts after the last dropped request started (was: 200 of the 348 in its 50 s, a rate of 4/s for 7/s, half of them long for 3 in 10)', () => {
    const { store, finished } = mixedDurationsEvicting();
    const profile = store.profile('chat', 10 * 60_000);
    expect(store.evicted('chat')).toBeGreaterThan(0);
    const windowStartMs = (profile?.window.startUnixMs as number) - T0;
    // The window starts where the last dropped request started: every request that started after it.
    const inWindow = finished.filter((r) => r.startMs > windowStartMs);
    expect(profile?.requests).toBe(inWindow.length);
    expect(profile?.arrivals.ratePerSecond).toBeCloseTo(inWindow.length / (profile?.window.seconds as number), 9);
    expect(profile?.inputTokens.mean).toBe(inWindow.reduce((sum, r) => sum + r.inputTokens, 0) / inWindow.length);
  });

  it('starts there for the profile set and the merged arrivals too', () => {
    const { store } = mixedDurationsEvicting();
    expect(store.profileSet(10 * 60_000).window).toEqual(store.profile('chat', 10 * 60_000)?.window);
  });
});
