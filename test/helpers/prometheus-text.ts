/**
 * A strict reader of the Prometheus text exposition format (0.0.4) for tests, so /metrics is read
 * the way Prometheus reads it, never grepped: every line must parse, every sample must belong to a
 * declared family, label values are unescaped, and histograms must be internally consistent
 * (cumulative buckets non-decreasing, +Inf equal to _count). Any violation throws with the line.
 */
export interface Sample {
  labels: Record<string, string>;
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

const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+-?\d+)?$/;
const LABEL = /\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*(,|$)/y;
// Prometheus parses values with Go's strconv.ParseFloat, which matches Inf and NaN in any case
// (prom-client writes "Nan").
const VALUE = /^(?:[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+)|[-+]?inf(?:inity)?|nan)$/i;

/**
 * A sample value as Prometheus reads it: `+Inf`, `-Inf`, `Inf` and `NaN` in any case, which
 * JavaScript's Number() would read as NaN (Number('+Inf') is NaN).
 */
export function prometheusFloat(value: string): number {
  const lower = value.toLowerCase();
  if (lower === '+inf' || lower === 'inf' || lower === '+infinity' || lower === 'infinity') return Infinity;
  if (lower === '-inf' || lower === '-infinity') return -Infinity;
  return Number(value);
}

function parseLabels(text: string, line: number): Record<string, string> {
  const labels: Record<string, string> = {};
  LABEL.lastIndex = 0;
  while (LABEL.lastIndex < text.length) {
    const start = LABEL.lastIndex;
    const match = LABEL.exec(text);
    if (!match || match.index !== start) throw new Error(`line ${line}: bad label set {${text}}`);
    labels[match[1] as string] = (match[2] as string).replace(/\\(["\\n])/g, (_, c: string) => (c === 'n' ? '\n' : c));
    if (match[3] === '') break;
  }
  return labels;
}

export function parsePrometheusText(text: string): Map<string, MetricFamily> {
  const families = new Map<string, MetricFamily>();
  const series = new Map<string, Sample>();
  const lines = text.split('\n');
  lines.forEach((raw, index) => {
    const line = index + 1;
    if (raw.trim() === '') return;
    if (raw.startsWith('#')) {
      const [, keyword, name, ...rest] = raw.split(' ');
      if (keyword === 'TYPE') {
        if (families.has(name as string)) throw new Error(`line ${line}: second TYPE for ${name}`);
        families.set(name as string, { name: name as string, help: '', type: (rest[0] ?? '').toUpperCase() as MetricFamily['type'], metrics: [] });
      }
      return;
    }
    const match = SAMPLE.exec(raw);
    if (!match) throw new Error(`line ${line}: not a sample: ${raw}`);
    const [, name, labelText, value] = match as unknown as [string, string, string | undefined, string];
    if (!VALUE.test(value)) throw new Error(`line ${line}: bad value ${value}`);
    const labels = parseLabels(labelText ?? '', line);
    const suffix = /_(bucket|sum|count)$/.exec(name);
    const base = suffix && families.get(name.slice(0, -suffix[0].length))?.type === 'HISTOGRAM' ? name.slice(0, -suffix[0].length) : name;
    const family = families.get(base);
    if (!family) throw new Error(`line ${line}: sample ${name} has no TYPE line`);
    const { le, ...rest } = labels;
    const key = `${base}${JSON.stringify(Object.entries(rest).sort())}`;
    let sample = series.get(key);
    if (!sample) {
      sample = { labels: rest };
      series.set(key, sample);
      family.metrics.push(sample);
    }
    if (family.type !== 'HISTOGRAM') sample.value = value;
    else if (suffix?.[1] === 'bucket') {
      if (le === undefined) throw new Error(`line ${line}: bucket without le`);
      (sample.buckets ??= {})[le] = value;
    } else if (suffix?.[1] === 'sum') sample.sum = value;
    else if (suffix?.[1] === 'count') sample.count = value;
    else throw new Error(`line ${line}: ${name} in histogram ${base}`);
  });
  for (const family of families.values()) {
    if (family.type !== 'HISTOGRAM') continue;
    for (const sample of family.metrics) {
      const buckets = Object.entries(sample.buckets ?? {}).map(([le, v]) => [le === '+Inf' ? Infinity : Number(le), Number(v)] as const).sort((a, b) => a[0] - b[0]);
      for (let i = 1; i < buckets.length; i++) {
        if (buckets[i]![1] < buckets[i - 1]![1]) throw new Error(`${family.name}: buckets decrease at le=${buckets[i]![0]}`);
      }
      if (buckets.at(-1)?.[0] !== Infinity || buckets.at(-1)?.[1] !== Number(sample.count)) {
        throw new Error(`${family.name}: +Inf bucket missing or not equal to _count`);
      }
    }
  }
  return families;
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
  return family.metrics.filter((s) => matches(s, labels)).reduce((sum, s) => sum + prometheusFloat(s.value as string), 0);
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
    result.sum += prometheusFloat(sample.sum as string);
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
