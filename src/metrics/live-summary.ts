import { metrics } from '@opentelemetry/sdk-node';
import { METRICS } from './definitions.js';
import type { Telemetry } from './telemetry.js';

type HistogramPoint = { boundaries: number[]; counts: number[] };

/**
 * A one-line summary of the last interval (requests/s, TTFT p50/p99, ITL p99, outcomes), computed
 * from the same OTel data points /metrics serves, as Prometheus would: differences of cumulative
 * counters and bucket counts between two samples, quantiles interpolated inside the bucket.
 */
export class LiveSummary {
  private readonly telemetry: Telemetry;
  private previous: Map<string, number[]> = new Map();
  private previousAtMs = performance.now();

  constructor(telemetry: Telemetry) {
    this.telemetry = telemetry;
  }

  async line(): Promise<string> {
    const nowMs = performance.now();
    const current = flatten(await this.telemetry.collect());
    const delta = (key: string): number[] => {
      const now = current.get(key) ?? [];
      const before = this.previous.get(key) ?? [];
      return now.map((value, i) => value - (before[i] ?? 0));
    };
    const seconds = (nowMs - this.previousAtMs) / 1000;

    const outcomes = new Map<string, number>();
    for (const key of current.keys()) {
      const [name, outcome] = key.split('\0');
      if (name !== METRICS.requests.otelName || outcome === undefined) continue;
      outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + (delta(key)[0] ?? 0));
    }
    const total = [...outcomes.values()].reduce((a, b) => a + b, 0);
    const ttft = histogramDelta(current, this.previous, METRICS.ttft.otelName);
    const itl = histogramDelta(current, this.previous, METRICS.itlToken.otelName);

    this.previous = current;
    this.previousAtMs = nowMs;

    const outcomeText = [...outcomes].filter(([, n]) => n > 0).map(([o, n]) => `${o}=${n}`).join(' ') || 'none';
    return (
      `${(total / seconds).toFixed(1)} req/s | TTFT p50 ${ms(quantile(0.5, ttft))} p99 ${ms(quantile(0.99, ttft))}` +
      ` | ITL p99 ${ms(quantile(0.99, itl))} | outcomes: ${outcomeText}`
    );
  }
}

/** Key: instrument name, NUL, outcome (counters) or "" (histograms); value: counters [sum] or bucket counts. */
function flatten(resourceMetrics: metrics.ResourceMetrics): Map<string, number[]> {
  const out = new Map<string, number[]>();
  const add = (key: string, values: number[]): void => {
    const existing = out.get(key);
    out.set(key, existing ? existing.map((v, i) => v + (values[i] ?? 0)) : values);
  };
  for (const scope of resourceMetrics.scopeMetrics) {
    for (const metric of scope.metrics) {
      const name = metric.descriptor.name;
      if (metric.dataPointType === metrics.DataPointType.HISTOGRAM) {
        for (const point of metric.dataPoints) {
          const { boundaries, counts } = point.value.buckets;
          add(`${name}\0`, [...counts]);
          out.set(`${name}\0boundaries`, [...boundaries]);
        }
      } else if (name === METRICS.requests.otelName) {
        for (const point of metric.dataPoints) {
          add(`${name}\0${String(point.attributes['outcome'])}`, [point.value as number]);
        }
      }
    }
  }
  return out;
}

function histogramDelta(current: Map<string, number[]>, previous: Map<string, number[]>, name: string): HistogramPoint {
  const now = current.get(`${name}\0`) ?? [];
  const before = previous.get(`${name}\0`) ?? [];
  return { boundaries: current.get(`${name}\0boundaries`) ?? [], counts: now.map((v, i) => v - (before[i] ?? 0)) };
}

/** histogram_quantile over non-cumulative bucket counts; NaN when there were no samples. */
export function quantile(q: number, { boundaries, counts }: HistogramPoint): number {
  const total = counts.reduce((a, b) => a + b, 0);
  if (total === 0) return Number.NaN;
  const rank = q * total;
  let seen = 0;
  for (let i = 0; i < counts.length; i++) {
    const count = counts[i] as number;
    if (seen + count >= rank && count > 0) {
      if (i >= boundaries.length) return boundaries[boundaries.length - 1] ?? Number.NaN;
      const lower = i === 0 ? 0 : (boundaries[i - 1] as number);
      const upper = boundaries[i] as number;
      return lower + ((upper - lower) * (rank - seen)) / count;
    }
    seen += count;
  }
  return boundaries[boundaries.length - 1] ?? Number.NaN;
}

function ms(seconds: number): string {
  return Number.isNaN(seconds) ? '-' : `${(seconds * 1000).toFixed(0)}ms`;
}
