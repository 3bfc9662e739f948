import { describe, expect, it } from 'vitest';
import { emptyWorkloadCounts, type StatusCounts } from '../../../src/admin/status-counts.js';
import { statusReport } from '../../../src/admin/status-report.js';
import { StatusTrend } from '../../../src/admin/status-trend.js';
import { ManualClock } from '../../../src/clock/clock.js';
import { loadSettings } from '../../../src/config/load.js';

const settings = loadSettings({
  flags: { config: 'test.yaml' },
  env: {},
  readFile: () => 'workloads:\n  - name: chat\n    match: { path: /v1/chat/completions }\n    slo: { objective: 0.99, ttft: 200ms }\n  - name: default\n',
});

/** Totals where "chat" finished `completed` generation requests, `failed` of them upstream errors, `good` of them goodput, with `bad` bad TTFT events. */
function counts(completed: number, failed: number, good: number, bad: number): StatusCounts {
  const chat = emptyWorkloadCounts();
  chat.requests.set('completed', completed - failed).set('upstream_error', failed).set('client_cancelled', 0);
  chat.generations.set('completed', completed - failed).set('upstream_error', failed);
  // A health check of the workload: counted in requests, neither goodput's nor the error ratio's denominator.
  chat.requests.set('completed', completed - failed + 7);
  chat.goodput = good;
  chat.slo.ttft.good = completed - bad;
  chat.slo.ttft.bad = bad;
  return { workloads: new Map([['chat', chat]]), gpus: [] };
}

function report(now: StatusCounts, base: StatusCounts, trend = new StatusTrend({ collect: async () => now, clock: new ManualClock(0), settings, everyMs: 60_000, keepMs: 3_600_000, windowMs: 300_000 })) {
  return statusReport({
    settings,
    version: '9.9.9',
    generatedAt: new Date(0),
    startedAtMs: 0,
    refreshS: 5,
    now: { atMs: 400_000, counts: now },
    rateBaseline: { atMs: 340_000, counts: base },
    sloBaseline: { atMs: 100_000, counts: base },
    upstream: { url: 'http://127.0.0.1:8000/', ready: true, detail: 'HTTP 200' },
    notice: null,
    trendEveryS: 60,
    trend: trend.points,
  });
}

describe('goodput and errors on the status page (issue 22 item 6: goodput was n/a on every workload)', () => {
  it('gives goodput as tokentap_goodput_requests_total over finished generation requests, and the error ratio of upstream errors, truncations and timeouts', () => {
    const r = report(counts(1000, 30, 900, 40), counts(600, 10, 560, 20));
    const chat = r.workloads[0]!;
    // Window: 400 generation requests, 340 of them goodput, 20 upstream errors.
    expect(chat.goodput_ratio).toBeCloseTo(340 / 400, 12);
    expect(chat.error_ratio).toBeCloseTo(20 / 400, 12);
    // Rate window 60 s.
    expect(chat.goodput_per_s).toBeCloseTo(340 / 60, 12);
    const none = r.workloads[1]!;
    expect([none.goodput_per_s, none.goodput_ratio, none.error_ratio]).toEqual([null, null, null]);
  });
});

describe('status trend (issue 22 item 6: every number was one window, no history)', () => {
  it('keeps one point a minute of p99 TTFT, worst burn and error ratio over 5 minutes, for an hour and no more', async () => {
    const clock = new ManualClock(0);
    let minute = 0;
    // Every minute 100 requests; from minute 30 on, 10 of them bad TTFT events and 5 upstream errors.
    const at = (m: number): StatusCounts => {
      const bad = Math.max(0, m - 30) * 10;
      return counts(m * 100, Math.max(0, m - 30) * 5, m * 100 - bad, bad);
    };
    let collections = 0;
    const trend = new StatusTrend({ collect: async () => (collections++, at(minute)), clock, settings, everyMs: 60_000, keepMs: 3_600_000, windowMs: 300_000 });
    for (minute = 1; minute <= 90; minute++) {
      clock.advance(60_000);
      await trend.record();
    }
    expect(collections).toBe(90);
    // Memory: the 5-minute window's baselines only (the collection 5 minutes old and the newer ones).
    expect(trend.collectionsHeld).toBe(6);
    const points = trend.points.get('chat')!;
    // An hour of points: minutes 30 to 90.
    expect(points).toHaveLength(61);
    expect(points[0]!.atMs).toBe(30 * 60_000);
    // Minute 30: nothing bad yet. Minute 40: the last 5 minutes had 10 bad of 100 a minute: burn 0.1 / 0.01 = 10.
    expect(points[0]!.worst_burn_rate).toBe(0);
    expect(points[10]!.worst_burn_rate).toBeCloseTo(10, 9);
    expect(points[10]!.error_ratio).toBeCloseTo(0.05, 12);
    expect(trend.points.get('default')!.every((p) => p.worst_burn_rate === null)).toBe(true);
    // The report gives each point's age.
    const r = report(at(90), at(85), trend);
    expect(r.workloads[0]!.trend.at(-1)!.ago_s).toBe((400_000 - 90 * 60_000) / 1000);
    expect(r.trend_every_s).toBe(60);
  });
});
