import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../../src/clock/clock.js';
import { BLOCK_HASHES_PER_REQUEST, ProfileStore } from '../../../src/profile/profile-store.js';
import { mooncakeRows } from '../../../src/profile/mooncake-export.js';
import { BYTES_PER_BLOCK_HASH, BYTES_PER_REQUEST } from '../../../src/profile/request-shape-ring.js';
import { readDoc } from '../../helpers/docs.js';
import { SeededRandom } from '../../helpers/seeded-random.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

function heapAfterGc(): { heap: number; buffers: number } {
  gc();
  gc();
  const usage = process.memoryUsage();
  return { heap: usage.heapUsed, buffers: usage.arrayBuffers };
}

/**
 * The soak: 100,000 finished requests fed to the record, the monitor's one call per request
 * (request-monitor.ts record()), with prompts of 1 to 64 blocks. The record is the only state the
 * workload shape keeps across requests (a request's fingerprint lives in its monitor until it
 * ends), so this is the whole of what traffic can make grow.
 */
describe('the workload-shape record under 100,000 requests', () => {
  it('stays within the cap docs/workload-profiles.md states, dropping (and counting) the oldest', () => {
    const clock = new ManualClock(0);
    const maxRequests = 10_000;
    const store = new ProfileStore({ maxRequestsPerWorkload: maxRequests, blockTokens: 512, workloads: ['chat', 'rag'] }, clock, { nowUnixMs: 1_800_000_000_000 });
    const perWorkload = maxRequests * BYTES_PER_REQUEST + maxRequests * BLOCK_HASHES_PER_REQUEST * BYTES_PER_BLOCK_HASH;
    expect(BYTES_PER_REQUEST).toBe(31);
    expect(store.bytes).toBe(2 * perWorkload);
    // The documented figures, as the page states them.
    const doc = readDoc('docs/workload-profiles.md');
    expect(doc).toContain(`${perWorkload.toLocaleString('en-US')} bytes`);
    expect(doc).toContain('31 bytes');

    const random = new SeededRandom(5);
    const feed = (count: number): void => {
      for (let i = 0; i < count; i++) {
        clock.advance(10);
        const blocks = 1 + Math.floor(random.next() * 64);
        const hashes = Array.from({ length: blocks }, () => Math.floor(random.next() * 2 ** 48));
        store.record(i % 4 === 0 ? 'rag' : 'chat', {
          startMs: clock.nowMs() - 500,
          durationMs: 500,
          inputTokens: blocks * 512,
          outputTokens: 100,
          cachedInputTokens: 0,
          outcome: 'completed',
          blocks: { hashes, promptBytes: blocks * 2048 },
        });
      }
    };
    // The exports and fits read the record without keeping anything: run at both points, so the
    // code they compile is in both measurements.
    const read = (): void => {
      store.profileSet(3_600_000);
      mooncakeRows(store.shapes('chat', 3_600_000)?.shapes ?? [], 512);
    };
    feed(20_000);
    read();
    const after20k = heapAfterGc();
    feed(80_000);
    read();
    const after100k = heapAfterGc();

    expect(store.bytes).toBe(2 * perWorkload);
    const held = store.shapes('chat', 24 * 3_600_000)?.shapes.length ?? 0;
    expect(held).toBeGreaterThan(0);
    expect(held).toBeLessThanOrEqual(maxRequests);
    expect(store.evicted('chat') + held).toBe(75_000);
    // No typed array allocated after start-up, and the heap flat within 2 MB (80,000 more requests, ~2.6 M hashes).
    expect(after100k.buffers - after20k.buffers).toBeLessThan(1 << 20);
    expect(after100k.heap - after20k.heap).toBeLessThan(2 << 20);
  });
});
