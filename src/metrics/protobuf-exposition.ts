import { fileURLToPath } from 'node:url';
import type { Attributes } from '@opentelemetry/api';
import { metrics } from '@opentelemetry/sdk-node';
import protobuf from 'protobufjs';
import type { MetricObjectWithValues, MetricValue } from 'prom-client';
import type { NativeBuckets } from './native-buckets.js';

type ResourceMetrics = metrics.ResourceMetrics;
type MetricData = metrics.MetricData;

/**
 * The Prometheus protobuf exposition format: length-delimited `io.prometheus.client.MetricFamily`
 * messages, the only format that carries native histograms to Prometheus 2.40 and later
 * (specification "Exposition formats"). The schema is the official client_model `metrics.proto`
 * (proto/metrics.proto, copied unchanged from Debian's golang-github-prometheus-client-model-dev
 * 0.3.0), parsed by protobufjs once when this module loads; field names stay as the file spells
 * them (keepCase), so the objects below read like the .proto.
 *
 * What goes in: every family of the text exposition, with the same names, help and labels, so a
 * scraper sees the same series whichever format it negotiated. Histograms carry, per
 * `metrics.histograms`, the classic buckets (cumulative counts, +Inf implied by sample_count, as
 * client_golang writes them), the native buckets, or both in one Histogram message.
 */

export const PROTOBUF_CONTENT_TYPE = 'application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited';

/** Which parts of each histogram the protobuf exposition carries (`metrics.histograms`). */
export type HistogramExposition = 'classic' | 'native' | 'both';

const PROTO_FILE = fileURLToPath(new URL('./proto/metrics.proto', import.meta.url));
const ROOT = new protobuf.Root().loadSync(PROTO_FILE, { keepCase: true });
/** The message type, for tests that decode what /metrics served. */
export const METRIC_FAMILY = ROOT.lookupType('io.prometheus.client.MetricFamily');

/** metrics.proto `MetricType`. */
const TYPE = { COUNTER: 0, GAUGE: 1, SUMMARY: 2, UNTYPED: 3, HISTOGRAM: 4 } as const;

interface LabelPair {
  name: string;
  value: string;
}

interface Metric {
  label: LabelPair[];
  counter?: { value: number };
  gauge?: { value: number };
  untyped?: { value: number };
  summary?: { sample_count: number; sample_sum: number; quantile: Array<{ quantile: number; value: number }> };
  histogram?: Record<string, unknown>;
}

export interface MetricFamily {
  name: string;
  help: string;
  type: number;
  metric: Metric[];
}

/** The native buckets kept for a histogram data point, found by its attributes object (DirectMetrics.nativeBucketsOf). */
export type NativeLookup = (attributes: Attributes) => NativeBuckets | undefined;

/**
 * The OTel Prometheus serializer's naming (exporter-prometheus 0.223 sanitizePrometheusMetricName
 * and enforcePrometheusNamingConvention): characters outside [a-zA-Z0-9_:] become `_`, runs of
 * `_` one, and a monotonic sum gets `_total`.
 */
function promName(name: string): string {
  const sanitized = name.replace(/[^a-zA-Z0-9_:]/g, '_').replace(/_{2,}/g, '_');
  return sanitized[0] !== undefined && sanitized[0] >= '0' && sanitized[0] <= '9' ? `_${sanitized}` : sanitized;
}

/**
 * Label pairs; a value that is not well-formed UTF-16 (an unpaired surrogate) has U+FFFD in its
 * place, as the text exposition prints it: protobufjs would write its bytes as they are, which is
 * not UTF-8, and Prometheus refuses the whole scrape. ModelLabels keeps such names out already.
 */
function labelsOf(attributes: Attributes): LabelPair[] {
  return Object.entries(attributes).map(([name, value]) => ({ name: promName(name), value: String(value ?? '').toWellFormed() }));
}

/** Families of the OTel collection (already renamed to Prometheus names, as for the text serializer). */
export function familiesFromOtel(resourceMetrics: ResourceMetrics, nativeOf: NativeLookup, histograms: HistogramExposition): MetricFamily[] {
  const families: MetricFamily[] = [];
  for (const scope of resourceMetrics.scopeMetrics) {
    for (const metric of scope.metrics) {
      const family = familyOf(metric, nativeOf, histograms);
      if (family !== undefined) families.push(family);
    }
  }
  return families;
}

function familyOf(metric: MetricData, nativeOf: NativeLookup, histograms: HistogramExposition): MetricFamily | undefined {
  let name = promName(metric.descriptor.name);
  const help = metric.descriptor.description || 'description missing';
  switch (metric.dataPointType) {
    case metrics.DataPointType.SUM: {
      const counter = metric.isMonotonic;
      if (counter && !name.endsWith('_total')) name = `${name}_total`;
      return {
        name,
        help,
        type: counter ? TYPE.COUNTER : TYPE.GAUGE,
        metric: metric.dataPoints.map((p) => ({ label: labelsOf(p.attributes), ...(counter ? { counter: { value: p.value } } : { gauge: { value: p.value } }) })),
      };
    }
    case metrics.DataPointType.GAUGE:
      return { name, help, type: TYPE.GAUGE, metric: metric.dataPoints.map((p) => ({ label: labelsOf(p.attributes), gauge: { value: p.value } })) };
    case metrics.DataPointType.HISTOGRAM:
      return {
        name,
        help,
        type: TYPE.HISTOGRAM,
        metric: metric.dataPoints.map((p) => ({ label: labelsOf(p.attributes), histogram: histogramOf(p.value, nativeOf(p.attributes), histograms) })),
      };
    default:
      // Exponential histograms never reach the Prometheus reader (its aggregation is the default); the
      // text serializer skips unknown kinds too.
      return undefined;
  }
}

function histogramOf(value: metrics.Histogram, native: NativeBuckets | undefined, mode: HistogramExposition): Record<string, unknown> {
  const histogram: Record<string, unknown> = { sample_count: value.count, sample_sum: value.sum ?? 0 };
  // Without native buckets (histograms: classic) the classic ones are all there is.
  if (mode !== 'native' || native === undefined) histogram.bucket = classicBuckets(value);
  if (mode !== 'classic' && native !== undefined) Object.assign(histogram, nativeFields(native));
  return histogram;
}

function classicBuckets(value: metrics.Histogram): Array<{ cumulative_count: number; upper_bound: number }> {
  const { boundaries, counts } = value.buckets;
  let cumulative = 0;
  return boundaries.map((upper_bound, i) => {
    cumulative += counts[i] ?? 0;
    return { cumulative_count: cumulative, upper_bound };
  });
}

/** The native part of a Histogram message (metrics.proto fields 5..13). */
export function nativeFields(native: NativeBuckets): Record<string, unknown> {
  const { schema, zeroThreshold, zeroCount, positive, negative } = native.snapshot();
  return {
    schema,
    zero_threshold: zeroThreshold,
    zero_count: zeroCount,
    negative_span: negative.spans,
    negative_delta: negative.deltas,
    // A native histogram without observations needs a no-op span, or it reads as a classic one
    // without buckets (specification "Exposition formats"; Prometheus PR 12584).
    positive_span: positive.spans.length === 0 && negative.spans.length === 0 ? [{ offset: 0, length: 0 }] : positive.spans,
    positive_delta: positive.deltas,
  };
}

/** prom-client's process metrics (getMetricsAsJSON) as families, named and labelled as its text output. */
export function familiesFromPromClient(list: readonly MetricObjectWithValues<MetricValue<string>>[]): MetricFamily[] {
  return list.map((m) => {
    const help = m.help;
    const values = m.values as ReadonlyArray<MetricValue<string> & { metricName?: string }>;
    switch (String(m.type)) {
      case 'counter':
        return { name: m.name, help, type: TYPE.COUNTER, metric: values.map((v) => ({ label: labelsOf(v.labels), counter: { value: v.value } })) };
      case 'gauge':
        return { name: m.name, help, type: TYPE.GAUGE, metric: values.map((v) => ({ label: labelsOf(v.labels), gauge: { value: v.value } })) };
      case 'histogram':
        return { name: m.name, help, type: TYPE.HISTOGRAM, metric: promClientHistograms(m.name, values) };
      case 'summary':
        return { name: m.name, help, type: TYPE.SUMMARY, metric: promClientSummaries(m.name, values) };
      default:
        return { name: m.name, help, type: TYPE.UNTYPED, metric: values.map((v) => ({ label: labelsOf(v.labels), untyped: { value: v.value } })) };
    }
  });
}

/** prom-client lists a histogram as `_bucket` (with `le`), `_sum` and `_count` values per label set; regrouped here. */
function promClientHistograms(name: string, values: ReadonlyArray<MetricValue<string> & { metricName?: string }>): Metric[] {
  const byLabels = new Map<string, { labels: Record<string, string | number>; bucket: Array<{ cumulative_count: number; upper_bound: number }>; count: number; sum: number }>();
  for (const v of values) {
    const { le, ...labels } = v.labels as Record<string, string | number>;
    const key = JSON.stringify(Object.entries(labels).sort());
    let entry = byLabels.get(key);
    if (entry === undefined) {
      entry = { labels, bucket: [], count: 0, sum: 0 };
      byLabels.set(key, entry);
    }
    if (v.metricName === `${name}_bucket`) {
      if (le !== '+Inf') entry.bucket.push({ cumulative_count: v.value, upper_bound: Number(le) });
    } else if (v.metricName === `${name}_sum`) {
      entry.sum = v.value;
    } else if (v.metricName === `${name}_count`) {
      entry.count = v.value;
    }
  }
  return [...byLabels.values()].map((e) => ({ label: labelsOf(e.labels), histogram: { sample_count: e.count, sample_sum: e.sum, bucket: e.bucket } }));
}

function promClientSummaries(name: string, values: ReadonlyArray<MetricValue<string> & { metricName?: string }>): Metric[] {
  const byLabels = new Map<string, { labels: Record<string, string | number>; quantile: Array<{ quantile: number; value: number }>; count: number; sum: number }>();
  for (const v of values) {
    const { quantile, ...labels } = v.labels as Record<string, string | number>;
    const key = JSON.stringify(Object.entries(labels).sort());
    let entry = byLabels.get(key);
    if (entry === undefined) {
      entry = { labels, quantile: [], count: 0, sum: 0 };
      byLabels.set(key, entry);
    }
    if (v.metricName === `${name}_sum`) entry.sum = v.value;
    else if (v.metricName === `${name}_count`) entry.count = v.value;
    else if (quantile !== undefined) entry.quantile.push({ quantile: Number(quantile), value: v.value });
  }
  return [...byLabels.values()].map((e) => ({ label: labelsOf(e.labels), summary: { sample_count: e.count, sample_sum: e.sum, quantile: e.quantile } }));
}

/** The response body: each family as a varint length and the message (encoding=delimited). */
export function encodeDelimited(families: readonly MetricFamily[]): Uint8Array {
  const writer = protobuf.Writer.create();
  for (const family of families) {
    if (family.metric.length === 0) continue;
    METRIC_FAMILY.encodeDelimited(METRIC_FAMILY.fromObject(family), writer);
  }
  return writer.finish();
}

/** Decodes a delimited body back into plain objects (field names as in metrics.proto), for tests and tools. */
export function decodeDelimited(body: Uint8Array): Array<Record<string, unknown>> {
  const reader = protobuf.Reader.create(body);
  const families: Array<Record<string, unknown>> = [];
  while (reader.pos < reader.len) {
    const message = METRIC_FAMILY.decodeDelimited(reader);
    families.push(METRIC_FAMILY.toObject(message, { longs: Number, enums: String, defaults: false, arrays: true }));
  }
  return families;
}
