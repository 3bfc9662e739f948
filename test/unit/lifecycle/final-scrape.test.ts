import { describe, expect, it } from 'vitest';
import { FinalScrape } from '../../../src/lifecycle/final-scrape.js';

/**
 * The shutdown's wait for a scrape of the final counts: only an exposition whose computation began
 * after the wait did (so after every request was recorded) ends it; a scrape shared from an earlier
 * computation (admin-limits.ts sharedWhileComputing) would show counts from before.
 */
describe('FinalScrape', () => {
  it('ends the wait at the first exposition computed after it began', async () => {
    const finalScrape = new FinalScrape();
    const waiting = finalScrape.waitFromNow(60_000);
    finalScrape.served(performance.now());
    expect(await waiting).toBe(true);
  });

  it('does not take an exposition computed before the wait began, and gives up after maxMs', async () => {
    const finalScrape = new FinalScrape();
    const computedFromMs = performance.now();
    await new Promise((resolve) => setTimeout(resolve, 5));
    const waiting = finalScrape.waitFromNow(200);
    finalScrape.served(computedFromMs);
    expect(await waiting).toBe(false);
  });

  it('is not ended by expositions sent while no shutdown waits', async () => {
    const finalScrape = new FinalScrape();
    finalScrape.served(performance.now());
    expect(await finalScrape.waitFromNow(100)).toBe(false);
  });
});
