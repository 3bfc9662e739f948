import { metrics } from '@opentelemetry/sdk-node';
import { SLO_KINDS, type Workload } from '../config/load.js';
import { ATTR, METRICS } from '../metrics/definitions.js';
import type { Telemetry } from '../metrics/telemetry.js';

/**
 * A one-line view of SLO attainment over the last interval, for the demo: per workload with an SLO,
 * its worst SLO's share of good events (from the same `tokentap_slo_events_total` data points that
 * /metrics serves, as differences between two collections), marked when below the objective.
 * A workload without events in the interval (no request of it finished) says so, in its place:
 * left out, it looked as if the demo had stopped sending it.
 */
export class SloAttainment {
  private readonly telemetry: Telemetry;
  private readonly workloads: readonly Workload[];
  /** Cumulative counts by `workload\0slo\0result`, at the previous line. */
  private previous = new Map<string, number>();

  constructor(telemetry: Telemetry, workloads: readonly Workload[]) {
    this.telemetry = telemetry;
    this.workloads = workloads.filter((w) => w.slo !== undefined);
  }

  /** "SLO good (worst per workload): chat ttft 96.0% < 99.0% | rag no events | ...", or undefined when no workload has an SLO. */
  async line(): Promise<string | undefined> {
    if (this.workloads.length === 0) return undefined;
    const current = cumulativeEvents(await this.telemetry.collect());
    const delta = (key: string): number => (current.get(key) ?? 0) - (this.previous.get(key) ?? 0);
    const parts: string[] = [];
    for (const workload of this.workloads) {
      let worst: { kind: string; ratio: number } | undefined;
      for (const kind of SLO_KINDS) {
        const good = delta(`${workload.name}\0${kind}\0good`);
        const bad = delta(`${workload.name}\0${kind}\0bad`);
        if (good + bad === 0) continue;
        const ratio = good / (good + bad);
        if (worst === undefined || ratio < worst.ratio) worst = { kind, ratio };
      }
      if (worst === undefined) {
        parts.push(`${workload.name} no events`);
        continue;
      }
      const objective = (workload.slo as NonNullable<Workload['slo']>).objective;
      const decimals = decimalsOf(objective);
      const below = worst.ratio < objective ? ` < ${(objective * 100).toFixed(decimals)}%` : '';
      parts.push(`${workload.name} ${worst.kind} ${attained(worst.ratio, decimals)}${below}`);
    }
    this.previous = current;
    return `SLO good (worst per workload): ${parts.join(' | ')}`;
  }
}

/** Decimals that print the objective exactly as a percentage (99.0, 99.95), one at least, four at most. */
function decimalsOf(objective: number): number {
  let decimals = 1;
  while (decimals < 4 && Math.abs(Number((objective * 100).toFixed(decimals)) - objective * 100) > 1e-9) decimals++;
  return decimals;
}

/**
 * The share of good events, rounded down: a share below the objective never prints as the
 * objective ("98.96% < 99.0%" is 98.9%, not 99.0%), and only all-good prints 100%.
 */
function attained(ratio: number, decimals: number): string {
  if (ratio === 1) return '100%';
  const scale = 10 ** decimals;
  // The small term keeps a share that is exact in decimal (0.29) from flooring a step low.
  return `${(Math.floor(ratio * 100 * scale + 1e-6) / scale).toFixed(decimals)}%`;
}

function cumulativeEvents(resourceMetrics: metrics.ResourceMetrics): Map<string, number> {
  const out = new Map<string, number>();
  for (const scope of resourceMetrics.scopeMetrics) {
    for (const metric of scope.metrics) {
      if (metric.descriptor.name !== METRICS.sloEvents.otelName) continue;
      for (const point of metric.dataPoints) {
        const a = point.attributes;
        const key = `${String(a[ATTR.workload])}\0${String(a[ATTR.slo])}\0${String(a[ATTR.sloResult])}`;
        out.set(key, (out.get(key) ?? 0) + (point.value as number));
      }
    }
  }
  return out;
}
