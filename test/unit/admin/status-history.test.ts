import { afterEach, describe, expect, it, vi } from 'vitest';
import { StatusHistory } from '../../../src/admin/status-history.js';
import { emptyWorkloadCounts, type StatusCounts } from '../../../src/admin/status-counts.js';
import { eventWindow, statusReport } from '../../../src/admin/status-report.js';
import { ManualClock } from '../../../src/clock/clock.js';
import { loadSettings } from '../../../src/config/load.js';

/** Totals where workload "chat" finished `completed` requests and had `bad` of `events` TTFT events bad. */
function counts(completed: number, events = 0, bad = 0): StatusCounts {
  const chat = emptyWorkloadCounts();
  chat.requests.set('completed', completed);
  chat.slo.ttft.good = events - bad;
  chat.slo.ttft.bad = bad;
  return { workloads: new Map([['chat', chat]]), gpus: [] };
}

afterEach(() => vi.useRealTimers());

describe('status history', () => {
  it('runs no timer until someone asks, and stops it once nobody asked for the retention time', async () => {
    vi.useFakeTimers();
    const clock = new ManualClock(1_000);
    let collections = 0;
    const history = new StatusHistory({ collect: async () => (collections++, counts(0)), clock, retainMs: 300_000, everyMs: 5_000 });
    expect(history.sampling).toBe(false);
    await vi.advanceTimersByTimeAsync(60_000);
    expect(collections).toBe(0);
    await history.current();
    expect(history.sampling).toBe(true);
    for (let i = 0; i < 61; i++) {
      clock.advance(5_000);
      await vi.advanceTimersByTimeAsync(5_000);
    }
    expect(history.sampling).toBe(false);
    const after = collections;
    await vi.advanceTimersByTimeAsync(60_000);
    expect(collections).toBe(after);
  });

  it('takes the newest snapshot at least a window old as the baseline, the process start while younger', async () => {
    const clock = new ManualClock(0);
    let completed = 0;
    const history = new StatusHistory({ collect: async () => counts(completed), clock, retainMs: 300_000, everyMs: 5_000 });
    clock.advance(40_000);
    completed = 10;
    const early = await history.current();
    expect(history.baseline(early.atMs, 60_000).atMs).toBe(0);
    clock.advance(30_000);
    completed = 25;
    const later = await history.current();
    // 70 s in: the 60 s window starts at the 40 s snapshot's time or before, so at the start.
    expect(history.baseline(later.atMs, 60_000).atMs).toBe(0);
    clock.advance(40_000);
    completed = 31;
    const now = await history.current();
    const base = history.baseline(now.atMs, 60_000);
    expect(base.atMs).toBe(40_000);
    expect(base.counts.workloads.get('chat')?.requests.get('completed')).toBe(10);
    history.stop();
  });
});

describe('status report', () => {
  const settings = loadSettings({
    flags: { config: 'test.yaml' },
    env: {},
    readFile: () => 'workloads:\n  - name: chat\n    match: { path: /v1/chat/completions }\n    slo: { objective: 0.99, ttft: 200ms }\n  - name: default\n',
  });

  it('computes rates over the rate window, attainment and burn over the SLO window, and marks a fast burn', () => {
    const report = statusReport({
      settings,
      version: '9.9.9',
      generatedAt: new Date(0),
      startedAtMs: 0,
      refreshS: 5,
      now: { atMs: 400_000, counts: counts(200, 1000, 250) },
      rateBaseline: { atMs: 340_000, counts: counts(170, 900, 200) },
      sloBaseline: { atMs: 100_000, counts: counts(50, 500, 50) },
      upstream: { url: 'http://127.0.0.1:8000/', ready: true, detail: 'HTTP 200' },
      notice: null,
      trendEveryS: 60,
      trend: new Map(),
    });
    expect(report.windows).toEqual({ rate_s: 60, slo_s: 300 });
    expect(report.uptime_s).toBe(400);
    const chat = report.workloads[0]!;
    expect(chat.requests_per_s.completed).toBe(0.5);
    expect(chat.requests_total.completed).toBe(200);
    const ttft = chat.slos[0]!;
    // Window: 500 events, 200 bad: 40 % bad against a 1 % budget.
    expect([ttft.window.good, ttft.window.bad]).toEqual([300, 200]);
    expect(ttft.window.burn_rate).toBeCloseTo(40, 9);
    expect(ttft.state).toBe('fast_burn');
    expect(chat.state).toBe('fast_burn');
    expect(ttft.lifetime.attainment).toBe(0.75);
    expect(report.workloads[1]!.state).toBe('no_slo');
    expect(report.gpus).toBeNull();
    // A workload with an SLO has a goodput (here none of its requests counted as generations); one without has none.
    expect(chat.goodput_per_s).toBe(0);
    expect(report.workloads[1]!.goodput_per_s).toBeNull();
  });

  it('calls a burn at or below 1 within budget, above it burning, and no events no data', () => {
    expect(eventWindow(99, 1, 0.99).burn_rate).toBeCloseTo(1, 9);
    expect(eventWindow(0, 0, 0.99)).toEqual({ good: 0, bad: 0, attainment: null, burn_rate: null, error_budget_remaining: null });
    expect(eventWindow(90, 10, 0.95).error_budget_remaining).toBeCloseTo(-1, 9);
  });
});
