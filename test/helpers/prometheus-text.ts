import { createRequire } from 'node:module';

/** An independent parser for the Prometheus text format, so tests read /metrics as Prometheus would. */
const parse = createRequire(import.meta.url)('parse-prometheus-text-format') as (text: string) => MetricFamily[];

export interface Sample {
  labels?: Record<string, string>;
  value?: string;
  buckets?: Record<string, string>;
  count?: string;
  sum?: string;
}

export interface MetricFamily {
  name: string;
  help: string;
  type: 'COUNTER' | 'GAUGE' | 'HISTOGRAM' | 'SUMMARY' | 'UNTYPED';
  metrics: Sample[];
}

export function parsePrometheusText(text: string): Map<string, MetricFamily> {
  return new Map(parse(text).map((family) => [family.name, family]));
}

export async function scrape(adminUrl: string): Promise<Map<string, MetricFamily>> {
  const response = await fetch(`${adminUrl}/metrics`);
  if (!response.ok) throw new Error(`/metrics answered ${response.status}`);
  return parsePrometheusText(await response.text());
}

function matches(sample: Sample, labels: Record<string, string>): boolean {
  return Object.entries(labels).every(([k, v]) => sample.labels?.[k] === v);
}

/** Sum of a counter's or gauge's samples whose labels include `labels`. */
export function sumValues(families: Map<string, MetricFamily>, name: string, labels: Record<string, string> = {}): number {
  const family = families.get(name);
  if (!family) return 0;
  return family.metrics.filter((s) => matches(s, labels)).reduce((sum, s) => sum + Number(s.value), 0);
}

/** A histogram's samples summed over the series whose labels include `labels`: count, sum and cumulative buckets. */
export function histogram(
  families: Map<string, MetricFamily>,
  name: string,
  labels: Record<string, string> = {},
): { count: number; sum: number; buckets: Map<number, number> } {
  const family = families.get(name);
  const result = { count: 0, sum: 0, buckets: new Map<number, number>() };
  if (!family) return result;
  if (family.type !== 'HISTOGRAM') throw new Error(`${name} is a ${family.type}, not a histogram`);
  for (const sample of family.metrics.filter((s) => matches(s, labels))) {
    result.count += Number(sample.count);
    result.sum += Number(sample.sum);
    for (const [le, value] of Object.entries(sample.buckets ?? {})) {
      const bound = le === '+Inf' ? Infinity : Number(le);
      result.buckets.set(bound, (result.buckets.get(bound) ?? 0) + Number(value));
    }
  }
  return result;
}

/** Samples that fell in the bucket (lower, upper], from cumulative counts. */
export function inBucket(h: { buckets: Map<number, number> }, value: number): { lower: number; upper: number; count: number } {
  const bounds = [...h.buckets.keys()].sort((a, b) => a - b);
  const upperIndex = bounds.findIndex((b) => value <= b);
  const upper = bounds[upperIndex] as number;
  const lower = upperIndex === 0 ? 0 : (bounds[upperIndex - 1] as number);
  const count = (h.buckets.get(upper) ?? 0) - (upperIndex === 0 ? 0 : (h.buckets.get(lower) ?? 0));
  return { lower, upper, count };
}
