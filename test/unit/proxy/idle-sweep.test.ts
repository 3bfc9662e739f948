import { once } from 'node:events';
import { type AddressInfo, connect, createServer, type Socket } from 'node:net';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { IdleSweep, type IdleWatched } from '../../../src/proxy/idle-sweep.js';

function watched(): IdleWatched & { timedOutAtMs: number[]; waitingForClient: boolean } {
  const item = {
    upstreamActivity: 0,
    waitingForClient: false,
    timedOutAtMs: [] as number[],
    upstreamTimeout: () => item.timedOutAtMs.push(performance.now()),
  };
  return item;
}

describe('upstream idle sweep', () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval', 'performance'] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('cuts an exchange silent for the timeout, within one interval after it, once', () => {
    const sweep = new IdleSweep(400);
    const exchange = watched();
    const start = performance.now();
    sweep.watch(exchange);
    vi.advanceTimersByTime(399);
    expect(exchange.timedOutAtMs).toEqual([]);
    vi.advanceTimersByTime(101);
    expect(exchange.timedOutAtMs).toHaveLength(1);
    const after = exchange.timedOutAtMs[0]! - start;
    expect(after).toBeGreaterThanOrEqual(400);
    expect(after).toBeLessThanOrEqual(500);
    vi.advanceTimersByTime(5_000);
    expect(exchange.timedOutAtMs).toHaveLength(1);
  });

  it('does not time the upstream while it waits for the rest of the client\'s request body, and counts silence from then', () => {
    const sweep = new IdleSweep(400);
    const exchange = watched();
    exchange.waitingForClient = true;
    sweep.watch(exchange);
    vi.advanceTimersByTime(5_000);
    expect(exchange.timedOutAtMs).toEqual([]);
    // The body has all arrived: from now the upstream's silence is its own.
    exchange.waitingForClient = false;
    const bodyEnded = performance.now();
    vi.advanceTimersByTime(1_000);
    expect(exchange.timedOutAtMs).toHaveLength(1);
    expect(exchange.timedOutAtMs[0]! - bodyEnded).toBeGreaterThanOrEqual(400);
  });

  it('keeps an exchange whose upstream keeps sending, and counts silence from its last read', () => {
    const sweep = new IdleSweep(400);
    const exchange = watched();
    sweep.watch(exchange);
    for (let i = 0; i < 20; i++) {
      vi.advanceTimersByTime(300);
      exchange.upstreamActivity++;
    }
    expect(exchange.timedOutAtMs).toEqual([]);
    const lastRead = performance.now();
    vi.advanceTimersByTime(1_000);
    expect(exchange.timedOutAtMs).toHaveLength(1);
    // The read is noticed at the next sweep, so the cut comes at most two intervals past the timeout.
    expect(exchange.timedOutAtMs[0]! - lastRead).toBeGreaterThanOrEqual(400);
    expect(exchange.timedOutAtMs[0]! - lastRead).toBeLessThanOrEqual(600);
  });

  it('runs no timer once nothing is watched', () => {
    const sweep = new IdleSweep(400);
    const exchange = watched();
    sweep.watch(exchange);
    expect(vi.getTimerCount()).toBe(1);
    sweep.unwatch(exchange);
    expect(vi.getTimerCount()).toBe(0);
    vi.advanceTimersByTime(1_000);
    expect(exchange.timedOutAtMs).toEqual([]);
  });
});

describe('upstream idle sweep, when the event loop stalls', () => {
  let cleanups: Array<() => Promise<unknown>> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup();
    cleanups = [];
  });

  /** Blocks the event loop, as a long GC pause or a CPU-throttled container does. */
  function stall(ms: number): void {
    const until = performance.now() + ms;
    while (performance.now() < until);
  }

  it('does not cut an exchange whose read arrived during the stall (timers run before it), and still cuts a silence after it', async () => {
    // An upstream connection on loopback, whose reads are the exchange's activity.
    const server = createServer();
    cleanups.push(() => new Promise((resolve) => server.close(resolve)));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const upstream = connect((server.address() as AddressInfo).port, '127.0.0.1');
    const [proxySide] = (await once(server, 'connection')) as [Socket];
    cleanups.push(async () => {
      upstream.destroy();
      proxySide.destroy();
    });
    const sweep = new IdleSweep(200);
    const exchange = watched();
    proxySide.on('data', () => exchange.upstreamActivity++);
    sweep.watch(exchange);
    // The upstream sends while the loop is blocked: the read is polled after the next turn's timers.
    upstream.write('data: {}\n\n');
    stall(600);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(exchange.upstreamActivity).toBe(1);
    expect(exchange.timedOutAtMs).toEqual([]);
    // Silent from here on: cut as before.
    const deadline = performance.now() + 5_000;
    while (exchange.timedOutAtMs.length === 0 && performance.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(exchange.timedOutAtMs).toHaveLength(1);
  });
});
