import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import { ProfileWorkBudget, registerProfileRoutes } from '../../../src/admin/profile-routes.js';
import { LimitCounters } from '../../../src/metrics/limit-counters.js';
import { ProfileStore } from '../../../src/profile/profile-store.js';

/**
 * /profile fits and exports on the event loop that relays every stream: a client asking it in a
 * loop must not take the relay's time: past a burst of 500 ms, the routes take at most a tenth of it.
 */
let fakeNowMs = 0;
function fullRecord(): ProfileStore {
  const store = new ProfileStore({ maxRequestsPerWorkload: 10_000, blockTokens: 512, workloads: ['chat'] }, { nowMs: () => fakeNowMs }, { nowUnixMs: 1_700_000_000_000 });
  for (let i = 0; i < 10_000; i++) {
    fakeNowMs += 10;
    // 16 blocks each (8,192 tokens): the record's default hash room, full; the first 4 blocks shared.
    const hashes = Array.from({ length: 16 }, (_, k) => (k < 4 ? k + 1 : 1e9 + i * 100 + k));
    store.record('chat', { startMs: fakeNowMs, durationMs: 500, inputTokens: 8192, outputTokens: 200, cachedInputTokens: 0, outcome: 'completed', blocks: { hashes, promptBytes: 32_768 } });
  }
  return store;
}

describe('the /profile work budget', () => {
  it('holds the routes back once 500 ms of work is spent, until a tenth of the time since pays it back, then lets them answer', () => {
    let clockMs = 0;
    const budget = new ProfileWorkBudget(() => clockMs);
    expect(budget.waitMs()).toBe(0);
    // One answer of 600 ms with a full credit of 500 (nothing more to earn while it ran): 100 owed, 1,000 ms to earn it back.
    budget.run(() => (clockMs += 600));
    expect(budget.lastMs).toBe(600);
    expect(budget.waitMs()).toBeCloseTo(1000, 9);
    clockMs += 999;
    expect(budget.waitMs()).toBeGreaterThan(0);
    clockMs += 1;
    expect(budget.waitMs()).toBe(0);
  });

  it('never holds back answers of a small record asked one after the other', () => {
    let clockMs = 0;
    const budget = new ProfileWorkBudget(() => clockMs);
    // 1,000 answers of 4 ms, one every 40 ms: a tenth of the time, for 40 s; 4 ms a cycle from 500 without earning would last 125.
    for (let i = 0; i < 1000; i++) {
      expect(budget.waitMs()).toBe(0);
      budget.run(() => (clockMs += 4));
      clockMs += 36;
    }
  });

  it('answers a client asking for a full record in a loop 429 once the burst is spent, taking at most the burst and a tenth of the time since, and counts each 429', async () => {
    const app = Fastify();
    const counters = new LimitCounters();
    registerProfileRoutes(app, fullRecord(), counters);
    const statuses: number[] = [];
    let computingMs = 0;
    let longestMs = 0;
    const loopStarted = performance.now();
    // Bounded: 40 requests, one after the other, as fast as the client can send them.
    for (let i = 0; i < 40; i++) {
      const started = performance.now();
      const answer = await app.inject('/profile/chat?format=mooncake&window=24h');
      statuses.push(answer.statusCode);
      if (answer.statusCode === 200) {
        const took = performance.now() - started;
        computingMs += took;
        longestMs = Math.max(longestMs, took);
        continue;
      }
      expect(answer.statusCode).toBe(429);
      expect(Number(answer.headers['retry-after'])).toBeGreaterThanOrEqual(1);
      expect(answer.json<{ error: string }>().error).toMatch(/^the last \/profile answer took \d+ ms of the process's time, which it shares with the relay; ask again in \d+ s \(at most 10 % of its time goes to \/profile\)$/);
    }
    const loopMs = performance.now() - loopStarted;
    expect(statuses[0]).toBe(200);
    expect(statuses).toContain(429);
    expect(counters.count('profile_time_share')).toBe(statuses.filter((status) => status === 429).length);
    // The burst, the answer that overdrew it, and a tenth of the loop's time; on main every answer was computed.
    expect(computingMs).toBeLessThanOrEqual(500 + longestMs + 0.1 * loopMs + 50);
    await app.close();
  });
});
