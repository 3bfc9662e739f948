import { capacityStatus } from '../../src/admin/status-capacity.js';
import { costStatus } from '../../src/admin/status-cost.js';
import { emptyWorkloadCounts } from '../../src/admin/status-counts.js';
import type { LatencyStatus, StatusReport, WorkloadStatus } from '../../src/admin/status-report.js';
import { loadSettings } from '../../src/config/load.js';

/** A latency with no samples over three buckets; `thresholdS` is the workload's SLO threshold, if any. */
export function emptyLatency(thresholdS: number | null = null): LatencyStatus {
  return { boundaries_s: [0.1, 0.5, 1], counts: [0, 0, 0, 0], samples: 0, p50_s: null, p99_s: null, threshold_s: thresholdS };
}

/** A workload with no SLO and no traffic; tests override what they look at. */
export function quietWorkload(name: string, overrides: Partial<WorkloadStatus> = {}): WorkloadStatus {
  const zero = { completed: 0, client_cancelled: 0, client_error: 0, upstream_error: 0, truncated: 0, timeout: 0, shutdown: 0 };
  return {
    name,
    objective: null,
    state: 'no_slo',
    in_flight: 0,
    requests_total: zero,
    requests_per_s: zero,
    tokens_per_s: { input: 0, output: 0 },
    goodput_per_s: null,
    goodput_ratio: null,
    error_ratio: null,
    slos: [],
    latency: { ttft: emptyLatency(), itl: emptyLatency(), e2e: emptyLatency() },
    trend: [],
    ...overrides,
  };
}

/**
 * A /status.json built in a test, for the status page's sections that read `workloads`: fixed
 * time and version, no GPUs, and the capacity and cost of a pod that has served nothing (sections
 * these tests do not look at).
 */
export function builtStatusReport(workloads: readonly WorkloadStatus[]): StatusReport {
  return {
    schema_version: 1,
    version: '0.0.0-test',
    generated_at: new Date(Date.UTC(2026, 11, 1, 12)).toISOString(),
    uptime_s: 3600,
    refresh_s: 5,
    upstream: { url: 'http://127.0.0.1:8000', ready: true, detail: 'HTTP 200' },
    windows: { rate_s: 60, slo_s: 300 },
    fast_burn_factor: 14.4,
    notice: null,
    trend_every_s: 60,
    workloads,
    gpus: null,
    capacity: capacityStatus({ settings: loadSettings({ flags: {}, env: {}, readFile: () => '' }), counts: () => emptyWorkloadCounts(), peakInFlight: 0, trend: new Map() }),
    cost: costStatus({
      cost: undefined,
      workloads: [],
      windowS: 300,
      now: { pod: undefined, workload: () => emptyWorkloadCounts() },
      base: { pod: undefined, workload: () => emptyWorkloadCounts() },
    }),
  };
}
