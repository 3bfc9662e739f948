import type { Settings, SloKind } from '../config/load.js';
import { ATTR, METRICS } from '../metrics/definitions.js';
import { IN_FLIGHT_BANDS, type InFlightBand } from '../metrics/in-flight-band.js';
import { formatPromDuration } from './prometheus-duration.js';
import { GENERATIONS_ONLY, LABEL, NAMESPACE_LABEL, WORKLOAD_KEY, labelList, promLabel, promNumber, quote } from './promql.js';
import { RATE_WINDOW_MS } from './recording-rules.js';
import { scaledMs, type RecordingRule, type RenderOptions } from './rule-types.js';

/**
 * Capacity at SLO across the fleet (docs/capacity-and-cost.md, DESIGN.md section 12). The sidecar
 * sees one pod; Prometheus sees every pod, so these rules pool the pods of a namespace: each pod's
 * requests carry the `in_flight` band of their own pod's concurrency, so pooling adds samples to
 * each band without mixing concurrencies, and the result is the capacity of one pod of the fleet.
 *
 * Per workload `{namespace, workload}`:
 *  - a band counts once it holds `capacity.min_samples_per_band` requests with a first token, or
 *    without one that the TTFT SLO counts bad (refused, failed), over `capacity.window`; a counted band is held when every TTFT and ITL SLO of the workload is met
 *    there at the objective (good share >= objective; the thresholds are bucket bounds, so exact);
 *  - the knee is the lowest counted band that is not held; capacity is the upper bound of the
 *    highest held band below the knee, or of the highest held band when there is no knee, and is
 *    then a lower bound ("at least N");
 *  - sustainable requests per second per pod by Little's law: capacity / mean e2e over the window.
 * The pod's mix `{namespace}`: every workload shares the pod's concurrency (the band is the pod's
 * in flight, whatever the workload), so the mix holds where every workload holds: the least
 * capacity, with the mean e2e of all requests. Pods needed = ceil(peak requests per second of the
 * fleet / sustainable requests per second of one pod), for the observed and the planned peak.
 */

export const CAPACITY_RECORD = {
  /** `{in_flight}`: the band's upper bound, a constant (see bandBoundRules). */
  bandUpperBound: 'tokentap:in_flight_band:upper_bound',
  /** `{namespace, workload, in_flight}`: requests in the band over the window, all pods: with a first token, or without one that the TTFT SLO counts bad. */
  bandRequests: 'tokentap:capacity_band_requests:increase',
  /** `{namespace, workload, in_flight, slo}`: the share of the band's events within the SLO threshold. */
  bandGoodRatio: 'tokentap:capacity_band_good:ratio',
  /** `{namespace, workload, in_flight}`: 1 held, 0 broken; only bands with enough samples. */
  bandHeld: 'tokentap:capacity_band_held:bool',
  /** `{namespace, workload}`: upper bound of the lowest broken band; absent while none broke. */
  knee: 'tokentap:capacity_knee_in_flight:min',
  /** `{namespace, workload}`: requests in flight one pod holds within the SLOs (a band's upper bound). */
  inFlight: 'tokentap:capacity_in_flight:slo',
  /** `{namespace, workload}`: 1 while no band broke (capacity is "at least" its value), 0 once one did. */
  atLeast: 'tokentap:capacity_in_flight_at_least:bool',
  /** `{namespace, workload}`: mean e2e over the window, seconds. */
  meanE2e: 'tokentap:capacity_e2e_seconds:mean',
  /** `{namespace, workload}`: requests per second one pod sustains at capacity (Little's law). */
  sustainableRps: 'tokentap:capacity_sustainable_rps:per_pod',
  /** `{namespace, workload}`: generation requests per second of the fleet, over 5 minutes. */
  rps: 'tokentap:capacity_rps:rate5m',
  /** `{namespace, workload}`: the highest of those over the peak window. */
  peakRps: 'tokentap:capacity_peak_rps:max',
  /** `{namespace, workload}`: ceil(peak rps / sustainable rps per pod). */
  podsNeeded: 'tokentap:capacity_pods_needed:observed_peak',
  /** `{namespace, pod, instance}`: one pod's requests in flight, every workload. */
  podInFlight: 'tokentap:pod_requests_in_flight:sum',
  /** `{namespace}`: the highest in flight any one pod was scraped with over the peak window. */
  peakInFlight: 'tokentap:pod_peak_in_flight:max',
  /** `{namespace, workload}`: 1 - peak in flight / capacity. */
  headroom: 'tokentap:capacity_headroom:ratio',
  mix: {
    /** `{namespace}`: the least capacity of the namespace's workloads. */
    inFlight: 'tokentap:mix_capacity_in_flight:slo',
    /** `{namespace}`: 1 while every workload at that least capacity is only "at least" it. */
    atLeast: 'tokentap:mix_capacity_in_flight_at_least:bool',
    meanE2e: 'tokentap:mix_e2e_seconds:mean',
    sustainableRps: 'tokentap:mix_sustainable_rps:per_pod',
    rps: 'tokentap:mix_rps:rate5m',
    peakRps: 'tokentap:mix_peak_rps:max',
    headroom: 'tokentap:mix_headroom:ratio',
    podsNeeded: 'tokentap:mix_pods_needed:observed_peak',
    /** `{namespace}`: ceil(capacity.planned_peak_rps / sustainable rps per pod); only with a planned peak. */
    podsNeededPlanned: 'tokentap:mix_pods_needed:planned_peak',
  },
} as const;

const IN_FLIGHT = promLabel(ATTR.inFlight);
const BAND_KEY = [...WORKLOAD_KEY, IN_FLIGHT];
const NS = NAMESPACE_LABEL;

/**
 * The number a band stands for: its upper bound (`5-8` is 8), and 257 for the open `257+` (what is
 * known of it). The label alone is text, and PromQL cannot compare text; one constant series per
 * band, `{in_flight="5-8"} 8`, joined `on (in_flight)`, turns a band into a number without a regex
 * over label values (label_replace cannot do arithmetic). Ten rules, one per band of in-flight-band.ts,
 * so a new band there is a new rule here.
 */
export function bandUpperBound(band: InFlightBand): number {
  if (band === '257+') return 257;
  const dash = band.indexOf('-');
  return Number(dash < 0 ? band : band.slice(dash + 1));
}

function bandBoundRules(): RecordingRule[] {
  return IN_FLIGHT_BANDS.map((band) => ({ record: CAPACITY_RECORD.bandUpperBound, expr: `vector(${bandUpperBound(band)})`, labels: { [IN_FLIGHT]: band } }));
}

/** Which by-concurrency histogram judges which SLO kind; e2e has none (it is not recorded by band). */
const BANDED: Partial<Record<SloKind, string>> = {
  ttft: METRICS.ttftByConcurrency.promName,
  itl: METRICS.itlByConcurrency.promName,
};

/**
 * The `le` matcher of a threshold bucket: the text format writes integral bounds as `1`, Prometheus
 * 3 and the protobuf format as `1.0`; both match (the runbooks' `le=~"T|T\\.0"`), dots escaped.
 */
function leMatcher(thresholdS: number): string {
  const text = promNumber(thresholdS).replaceAll('.', '\\.');
  return `le=~${quote(/^\d+$/.test(text) ? `${text}|${text}\\.0` : text)}`;
}

/**
 * The three reads of a histogram the capacity rules make, from classic buckets or from native
 * histograms (native-recording-rules.ts: the same record names either way). Native: the share
 * within a threshold is histogram_fraction, exact where the threshold is a bucket boundary of the
 * schema and interpolated inside one bucket elsewhere (docs/native-histograms.md).
 */
interface HistogramReads {
  count(histogram: string, matchers: string, by: string, window: string): string;
  within(histogram: string, matchers: string, thresholdS: number, by: string, window: string): string;
  /** How many samples are within the threshold (a count, where `within` is a share). */
  withinCount(histogram: string, matchers: string, thresholdS: number, by: string, window: string): string;
  sum(histogram: string, by: string, window: string): string;
}

const CLASSIC: HistogramReads = {
  count: (h, m, by, w) => `sum by (${by}) (increase(${h}_count${m}[${w}]))`,
  within: (h, m, t, by, w) => `${CLASSIC.withinCount(h, m, t, by, w)}\n/\n(${CLASSIC.count(h, m, by, w)} > 0)`,
  withinCount: (h, m, t, by, w) => `sum by (${by}) (increase(${h}_bucket{${m.slice(1, -1)}, ${leMatcher(t)}}[${w}]))`,
  sum: (h, by, w) => `sum by (${by}) (increase(${h}_sum[${w}]))`,
};

const NATIVE: HistogramReads = {
  count: (h, m, by, w) => `histogram_count(sum by (${by}) (increase(${h}${m}[${w}])))`,
  within: (h, m, t, by, w) => `histogram_fraction(0, ${promNumber(t)}, sum by (${by}) (increase(${h}${m}[${w}])))\nand on (${by})\n(${NATIVE.count(h, m, by, w)} > 0)`,
  withinCount: (h, m, t, by, w) => `histogram_fraction(0, ${promNumber(t)}, sum by (${by}) (increase(${h}${m}[${w}])))\n* on (${by})\n${NATIVE.count(h, m, by, w)}`,
  sum: (h, by, w) => `histogram_sum(sum by (${by}) (increase(${h}[${w}])))`,
};

/**
 * The requests a band's TTFT is judged on, `matchers` selecting: those with a first token (the
 * histogram's count) and those without one that the TTFT SLO counts bad (the counter), either side
 * possibly absent (a band of refusals only has no histogram sample; an older sidecar no counter).
 */
function judgedTtft(reads: HistogramReads, matchers: string, by: string, window: string): { all: string; failed: string } {
  const count = reads.count(METRICS.ttftByConcurrency.promName, matchers, by, window);
  const failed = `sum by (${by}) (increase(${METRICS.ttftFailedByConcurrency.promName}${matchers}[${window}]))`;
  return { all: `(\n  ${count}\n  + on (${by})\n  ${failed}\n  or\n  ${count}\n  or\n  ${failed}\n)`, failed };
}

function bandRules(settings: Settings, reads: HistogramReads, window: string): RecordingRule[] {
  const by = labelList(...BAND_KEY);
  const rules: RecordingRule[] = [{ record: CAPACITY_RECORD.bandRequests, expr: judgedTtft(reads, '', by, window).all }];
  const judged: string[] = [];
  for (const workload of settings.workloads) {
    const slo = workload.slo;
    if (slo === undefined) continue;
    for (const [kind, histogram] of Object.entries(BANDED) as [SloKind, string][]) {
      const thresholdS = slo.thresholdsS[kind];
      if (thresholdS === undefined) continue;
      const w = `${LABEL.workload}=${quote(workload.name)}`;
      // TTFT: the first tokens within the threshold over every request judged, those refused or
      // failed without a first token included, as the TTFT SLO counts them (slo/slo-events.ts).
      const ttftJudged = judgedTtft(reads, `{${w}}`, by, window);
      rules.push({
        record: CAPACITY_RECORD.bandGoodRatio,
        expr: kind === 'ttft' ? `(\n${reads.withinCount(histogram, `{${w}}`, thresholdS, by, window)}\nor\n${ttftJudged.failed} * 0\n)\n/ on (${by})\n(${ttftJudged.all} > 0)` : reads.within(histogram, `{${w}}`, thresholdS, by, window),
        // The workload label too, though the expression keeps it: two rules of one name and the same labels are what promtool's lint calls duplicates.
        labels: { [LABEL.workload]: workload.name, [LABEL.slo]: kind },
      });
      judged.push(`(${CAPACITY_RECORD.bandGoodRatio}{${w}, ${LABEL.slo}=${quote(kind)}} >= bool ${promNumber(slo.objective)})`);
    }
  }
  if (judged.length === 0) return rules;
  // A band is held when every SLO kind met its objective there (min of the 0/1 verdicts), and it
  // counts only with enough requests: fewer, and one slow request decides a 99 % objective alone.
  rules.push({
    record: CAPACITY_RECORD.bandHeld,
    expr: `min by (${labelList(...BAND_KEY)}) (\n  ${judged.join('\n  or\n  ')}\n)\nand on (${labelList(...BAND_KEY)})\n(${CAPACITY_RECORD.bandRequests} >= ${settings.capacity.minSamplesPerBand})`,
  });
  return rules;
}

function capacityRules(): RecordingRule[] {
  const key = labelList(...WORKLOAD_KEY);
  const bound = (held: 0 | 1) => `((${CAPACITY_RECORD.bandHeld} == ${held}) * 0 + on (${IN_FLIGHT}) group_left ${CAPACITY_RECORD.bandUpperBound})`;
  return [
    { record: CAPACITY_RECORD.knee, expr: `min by (${key}) ${bound(0)}` },
    {
      record: CAPACITY_RECORD.inFlight,
      // Below the knee when there is one; a band held above a broken one is noise or a quieter day, not capacity.
      expr: `max by (${key}) (${bound(1)} < on (${key}) group_left ${CAPACITY_RECORD.knee})\nor\nmax by (${key}) ${bound(1)} unless on (${key}) ${CAPACITY_RECORD.knee}`,
    },
    { record: CAPACITY_RECORD.atLeast, expr: `(${CAPACITY_RECORD.inFlight} * 0 + 1) unless on (${key}) ${CAPACITY_RECORD.knee}\nor\n${CAPACITY_RECORD.inFlight} * 0` },
  ];
}

function meanE2e(reads: HistogramReads, by: string, window: string): string {
  const e2e = METRICS.e2e.promName;
  return `${reads.sum(e2e, by, window)}\n/\n(${reads.count(e2e, '', by, window)} > 0)`;
}

function trafficRules(reads: HistogramReads, window: string, peakWindow: string, rateWindow: string): RecordingRule[] {
  const key = labelList(...WORKLOAD_KEY);
  return [
    { record: CAPACITY_RECORD.meanE2e, expr: meanE2e(reads, key, window) },
    { record: CAPACITY_RECORD.sustainableRps, expr: `${CAPACITY_RECORD.inFlight} / (${CAPACITY_RECORD.meanE2e} > 0)` },
    { record: CAPACITY_RECORD.rps, expr: `sum by (${key}) (rate(${METRICS.requests.promName}{${GENERATIONS_ONLY}}[${rateWindow}]))` },
    { record: CAPACITY_RECORD.peakRps, expr: `max_over_time(${CAPACITY_RECORD.rps}[${peakWindow}])` },
    { record: CAPACITY_RECORD.podsNeeded, expr: `ceil(${CAPACITY_RECORD.peakRps} / (${CAPACITY_RECORD.sustainableRps} > 0))` },
    // Per pod: the sidecar's in-flight gauge is per workload; the pod's concurrency is their sum.
    { record: CAPACITY_RECORD.podInFlight, expr: `sum by (${labelList(NS, 'pod', 'instance')}) (${METRICS.inFlight.promName})` },
    { record: CAPACITY_RECORD.peakInFlight, expr: `max by (${NS}) (max_over_time(${CAPACITY_RECORD.podInFlight}[${peakWindow}]))` },
    { record: CAPACITY_RECORD.headroom, expr: `1 - (${CAPACITY_RECORD.peakInFlight} / on (${NS}) group_right () (${CAPACITY_RECORD.inFlight} > 0))` },
  ];
}

function mixRules(settings: Settings, reads: HistogramReads, window: string, peakWindow: string): RecordingRule[] {
  const mix = CAPACITY_RECORD.mix;
  const rules: RecordingRule[] = [
    {
      // The mix holds only where every workload holds: a workload that broke at or below the least
      // capacity with no held band beneath its knee (so no capacity of its own) leaves the mix none.
      record: mix.inFlight,
      expr: `min by (${NS}) (${CAPACITY_RECORD.inFlight})\nunless on (${NS})\n(min by (${NS}) (${CAPACITY_RECORD.knee} unless on (${labelList(...WORKLOAD_KEY)}) ${CAPACITY_RECORD.inFlight}) <= on (${NS}) min by (${NS}) (${CAPACITY_RECORD.inFlight}))`,
    },
    {
      // The workloads that set the least capacity: the mix is "at least" it only while every one of them is.
      record: mix.atLeast,
      expr: `min by (${NS}) (${CAPACITY_RECORD.atLeast} and on (${labelList(...WORKLOAD_KEY)}) (${CAPACITY_RECORD.inFlight} == on (${NS}) group_left ${mix.inFlight}))`,
    },
    { record: mix.meanE2e, expr: meanE2e(reads, NS, window) },
    { record: mix.sustainableRps, expr: `${mix.inFlight} / (${mix.meanE2e} > 0)` },
    { record: mix.rps, expr: `sum by (${NS}) (${CAPACITY_RECORD.rps})` },
    { record: mix.peakRps, expr: `max_over_time(${mix.rps}[${peakWindow}])` },
    { record: mix.headroom, expr: `1 - ${CAPACITY_RECORD.peakInFlight} / (${mix.inFlight} > 0)` },
    { record: mix.podsNeeded, expr: `ceil(${mix.peakRps} / (${mix.sustainableRps} > 0))` },
  ];
  const planned = settings.capacity.plannedPeakRps;
  if (planned !== undefined) rules.push({ record: mix.podsNeededPlanned, expr: `ceil(${promNumber(planned)} / (${mix.sustainableRps} > 0))` });
  return rules;
}

/**
 * How often the capacity group is evaluated: its band rules read a week of histogram series, and
 * capacity moves over hours, so every 5 minutes rather than at the global interval (1m in
 * kube-prometheus-stack) reads a fifth of the samples for the same answer.
 */
export const CAPACITY_GROUP_INTERVAL_MS = 5 * 60_000;

/** The capacity rules in evaluation order: each reads only records above it. */
export function capacityRecordingRules(settings: Settings, options: RenderOptions): RecordingRule[] {
  const window = formatPromDuration(scaledMs(settings.capacity.windowMs, options));
  const peakWindow = formatPromDuration(scaledMs(settings.capacity.peakWindowMs, options));
  const rateWindow = formatPromDuration(scaledMs(RATE_WINDOW_MS, options));
  const reads = options.histograms === 'native' ? NATIVE : CLASSIC;
  return [...bandBoundRules(), ...bandRules(settings, reads, window), ...capacityRules(), ...trafficRules(reads, window, peakWindow, rateWindow), ...mixRules(settings, reads, window, peakWindow)];
}
