import type { Clock } from '../clock/clock.js';
import type { CapacitySettings, CostSettings, Settings } from '../config/load.js';
import type { DrainState } from '../lifecycle/drain-state.js';
import { redactUrl } from '../log/redact-url.js';
import type { Telemetry } from '../metrics/telemetry.js';
import { countsOf } from './status-counts.js';
import { StatusHistory } from './status-history.js';
import { StatusTrend } from './status-trend.js';
import { statusReport, type StatusReport, type UpstreamStatus } from './status-report.js';

/** Nominal windows: rates over the last minute, SLO figures and histograms over the last 5 minutes (the shortest SLI window of the alert rules). */
export const RATE_WINDOW_MS = 60_000;
export const SLO_WINDOW_MS = 5 * 60_000;
/** How often the page asks again, and the least spacing of kept snapshots. */
export const REFRESH_MS = 5_000;
/** The trend: one point a minute over the last hour. */
export const TREND_EVERY_MS = 60_000;
export const TREND_KEEP_MS = 60 * 60_000;
/** Several open pages and scripts share one upstream probe within this time. */
const PROBE_REUSE_MS = 2_000;

export interface StatusSourceOptions {
  readonly telemetry: Telemetry;
  readonly settings: Pick<Settings, 'workloads' | 'buckets' | 'dcgm' | 'upstream'> & { readonly capacity?: CapacitySettings; readonly cost?: CostSettings | undefined };
  /** The pod's requests in flight (InFlightTracker): its peak since start is capacity's observed peak; without it, the in flight of the moment. */
  readonly inFlight?: { readonly peak: number } | undefined;
  readonly clock: Clock;
  readonly version: string;
  /** The readiness probe /readyz uses. */
  readonly probe: () => Promise<{ ready: boolean; detail: string }>;
  readonly drain?: DrainState | undefined;
  /** Shown at the top of the page and in /status.json (`notice`): what this sidecar's traffic is, when it is not production (the demo). */
  readonly notice?: string | undefined;
}

/** What /status.json answers: the report over the current collection and the history's baselines. */
export class StatusSource {
  private readonly options: StatusSourceOptions;
  private readonly history: StatusHistory;
  private readonly trend: StatusTrend;
  private probed: { atMs: number; answer: Promise<{ ready: boolean; detail: string }> } | undefined;

  constructor(options: StatusSourceOptions) {
    this.options = options;
    this.history = new StatusHistory({
      collect: async () => countsOf(await options.telemetry.collect()),
      clock: options.clock,
      retainMs: SLO_WINDOW_MS,
      everyMs: REFRESH_MS,
    });
    this.trend = new StatusTrend({
      collect: async () => countsOf(await options.telemetry.collect()),
      clock: options.clock,
      settings: options.settings,
      everyMs: TREND_EVERY_MS,
      keepMs: TREND_KEEP_MS,
      windowMs: SLO_WINDOW_MS,
    });
    this.trend.begin();
  }

  async report(): Promise<StatusReport> {
    const [now, upstream] = await Promise.all([this.history.current(), this.upstream()]);
    return statusReport({
      settings: this.options.settings,
      peakInFlight: this.options.inFlight?.peak,
      version: this.options.version,
      generatedAt: new Date(),
      startedAtMs: this.history.startedAtMs,
      refreshS: REFRESH_MS / 1000,
      now,
      rateBaseline: this.history.baseline(now.atMs, RATE_WINDOW_MS),
      sloBaseline: this.history.baseline(now.atMs, SLO_WINDOW_MS),
      upstream,
      notice: this.options.notice ?? null,
      trendEveryS: TREND_EVERY_MS / 1000,
      trend: this.trend.points,
    });
  }

  /** Whether the snapshot timer runs (for the test that nothing runs while nobody looks). */
  get sampling(): boolean {
    return this.history.sampling;
  }

  stop(): void {
    this.history.stop();
    this.trend.stop();
  }

  private async upstream(): Promise<UpstreamStatus> {
    // The admin listener answers anyone who reaches it (0.0.0.0, no authentication, for Prometheus):
    // the upstream's userinfo and query (basic auth, API keys) never appear on it.
    const url = redactUrl(this.options.settings.upstream);
    const draining = this.options.drain?.reason;
    if (draining !== undefined) return { url, ready: false, detail: draining };
    const nowMs = this.options.clock.nowMs();
    if (this.probed === undefined || nowMs - this.probed.atMs > PROBE_REUSE_MS) this.probed = { atMs: nowMs, answer: this.options.probe() };
    const answer = await this.probed.answer;
    return { url, ready: answer.ready, detail: answer.detail };
  }
}
