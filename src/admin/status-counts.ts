import { metrics } from '@opentelemetry/sdk-node';
import { SLO_KINDS, type SloKind } from '../config/load.js';
import { ATTR, GPU_ATTR, GPU_METRICS, METRICS, POD_METRICS } from '../metrics/definitions.js';

/** The histograms the status page shows, by the OTel instrument that holds them. */
export const STATUS_HISTOGRAMS = { ttft: METRICS.ttft.otelName, itl: METRICS.itlToken.otelName, e2e: METRICS.e2e.otelName } as const;
export type StatusHistogram = keyof typeof STATUS_HISTOGRAMS;

/** One workload's cumulative totals at one collection, summed over models, status classes and token sources. */
export interface WorkloadCounts {
  /** Finished requests by outcome (`tokentap_requests_total`). */
  readonly requests: Map<string, number>;
  /** The same, `operation="generation"` only: what goodput and the error ratio are shares of. */
  readonly generations: Map<string, number>;
  /** `tokentap_goodput_requests_total`: finished generation requests that met every SLO. */
  goodput: number;
  /** `tokentap_requests_in_flight`. */
  inFlight: number;
  /** `tokentap_tokens_total` by `gen_ai.token.type`. */
  inputTokens: number;
  outputTokens: number;
  /** `tokentap_slo_events_total`, good and bad per SLO kind. */
  readonly slo: Record<SloKind, { good: number; bad: number }>;
  /** Non-cumulative bucket counts (as OTel keeps them), one more than the boundaries; empty when never sampled. */
  readonly histograms: Record<StatusHistogram, number[]>;
  /** Seconds of e2e summed over every request (the e2e histogram's sum), for the mean e2e of capacity at SLO. */
  e2eSumS: number;
  /** The by-concurrency histograms (capacity at SLO) by `in_flight` band: bucket counts as in `histograms`. */
  readonly bands: Map<string, BandCounts>;
  /** `tokentap_accelerator_seconds_total` by phase (only with `cost:`). */
  prefillAcceleratorS: number;
  decodeAcceleratorS: number;
  /** `tokentap_reported_input_accelerator_seconds_total`: the prefill of the requests that reported their input tokens. */
  reportedInputAcceleratorS: number;
  /** `tokentap_request_cached_input_ratio`: its sum and count (requests that reported their cached input). */
  cachedRatioSum: number;
  cachedRatioCount: number;
  /** `tokentap_requests_with_cached_input_total`. */
  withCachedInput: number;
}

/** The pod's time and price (`tokentap_pod_*`, `tokentap_accelerators`, `tokentap_accelerator_price_per_hour`). */
export interface PodCounts {
  busyS: number;
  idleS: number;
  /** Absent without `cost:`, and while DCGM has not answered with `accelerators: dcgm`. */
  accelerators: number | undefined;
  pricePerHour: number | undefined;
  currency: string | undefined;
}

export interface BandCounts {
  readonly ttft: number[];
  readonly itl: number[];
  /** `tokentap_time_to_first_token_failed_by_concurrency_total`: requests without a first token the TTFT SLO counts bad. */
  failed: number;
}

/** The by-concurrency histograms, by the OTel instrument that holds them. */
const BAND_HISTOGRAMS = new Map<string, 'ttft' | 'itl'>([
  [METRICS.ttftByConcurrency.otelName, 'ttft'],
  [METRICS.itlByConcurrency.otelName, 'itl'],
]);

function addInto(into: number[], buckets: readonly number[]): void {
  if (into.length === 0) into.push(...buckets);
  else for (let i = 0; i < buckets.length; i++) into[i] = (into[i] ?? 0) + (buckets[i] as number);
}

export interface GpuCounts {
  readonly gpu: string;
  readonly uuid: string;
  readonly gpuInstance: string | undefined;
  readonly gpuProfile: string | undefined;
  memoryUsedBytes: number | undefined;
  memoryTotalBytes: number | undefined;
  utilizationRatio: number | undefined;
}

/** Everything the status page reads from one collection of the metrics /metrics serves. */
export interface StatusCounts {
  readonly workloads: Map<string, WorkloadCounts>;
  readonly gpus: GpuCounts[];
  /** Absent from the empty counts a history starts from (all zero). */
  readonly pod?: PodCounts;
}

export function emptyWorkloadCounts(): WorkloadCounts {
  const slo = {} as Record<SloKind, { good: number; bad: number }>;
  for (const kind of SLO_KINDS) slo[kind] = { good: 0, bad: 0 };
  return { requests: new Map(), generations: new Map(), goodput: 0, inFlight: 0, inputTokens: 0, outputTokens: 0, slo, histograms: { ttft: [], itl: [], e2e: [] }, e2eSumS: 0, bands: new Map(), prefillAcceleratorS: 0, decodeAcceleratorS: 0, reportedInputAcceleratorS: 0, cachedRatioSum: 0, cachedRatioCount: 0, withCachedInput: 0 };
}

const HISTOGRAM_BY_NAME = new Map<string, StatusHistogram>(Object.entries(STATUS_HISTOGRAMS).map(([key, name]) => [name, key as StatusHistogram]));

/**
 * Reads the OTel data points of one collection (the very points the Prometheus serializer turns into
 * /metrics) into per-workload totals. No bookkeeping of its own: what /metrics says, summed.
 */
export function countsOf(resourceMetrics: metrics.ResourceMetrics): StatusCounts {
  const workloads = new Map<string, WorkloadCounts>();
  const gpus = new Map<string, GpuCounts>();
  const pod: PodCounts = { busyS: 0, idleS: 0, accelerators: undefined, pricePerHour: undefined, currency: undefined };
  const workload = (attributes: Record<string, unknown>): WorkloadCounts => {
    const name = String(attributes[ATTR.workload]);
    let counts = workloads.get(name);
    if (counts === undefined) {
      counts = emptyWorkloadCounts();
      workloads.set(name, counts);
    }
    return counts;
  };
  const bandOf = (attributes: Record<string, unknown>): BandCounts => {
    const bands = workload(attributes).bands;
    const band = String(attributes[ATTR.inFlight]);
    let counts = bands.get(band);
    if (counts === undefined) {
      counts = { ttft: [], itl: [], failed: 0 };
      bands.set(band, counts);
    }
    return counts;
  };
  const gpu = (attributes: Record<string, unknown>): GpuCounts => {
    const instance = attributes[GPU_ATTR.gpuInstance] as string | undefined;
    const key = `${String(attributes[GPU_ATTR.uuid])}\0${instance ?? ''}`;
    let counts = gpus.get(key);
    if (counts === undefined) {
      counts = {
        gpu: String(attributes[GPU_ATTR.gpu]),
        uuid: String(attributes[GPU_ATTR.uuid]),
        gpuInstance: instance,
        gpuProfile: attributes[GPU_ATTR.gpuProfile] as string | undefined,
        memoryUsedBytes: undefined,
        memoryTotalBytes: undefined,
        utilizationRatio: undefined,
      };
      gpus.set(key, counts);
    }
    return counts;
  };

  for (const scope of resourceMetrics.scopeMetrics) {
    for (const metric of scope.metrics) {
      const name = metric.descriptor.name;
      if (metric.dataPointType === metrics.DataPointType.HISTOGRAM && BAND_HISTOGRAMS.has(name)) {
        const key = BAND_HISTOGRAMS.get(name) as 'ttft' | 'itl';
        for (const point of metric.dataPoints) addInto(bandOf(point.attributes)[key], point.value.buckets.counts);
        continue;
      }
      if (name === METRICS.ttftFailedByConcurrency.otelName) {
        for (const point of metric.dataPoints) bandOf(point.attributes).failed += point.value as number;
        continue;
      }
      if (metric.dataPointType === metrics.DataPointType.HISTOGRAM && name === METRICS.cachedInputRatio.otelName) {
        for (const point of metric.dataPoints) {
          const counts = workload(point.attributes);
          counts.cachedRatioSum += point.value.sum ?? 0;
          counts.cachedRatioCount += point.value.count;
        }
        continue;
      }
      if (metric.dataPointType === metrics.DataPointType.HISTOGRAM) {
        const key = HISTOGRAM_BY_NAME.get(name);
        if (key === undefined) continue;
        for (const point of metric.dataPoints) {
          const counts = workload(point.attributes);
          addInto(counts.histograms[key], point.value.buckets.counts);
          if (key === 'e2e') counts.e2eSumS += point.value.sum ?? 0;
        }
        continue;
      }
      for (const point of metric.dataPoints) {
        const a = point.attributes;
        const value = point.value as number;
        switch (name) {
          case METRICS.requests.otelName: {
            const outcome = String(a[ATTR.outcome]);
            const requests = workload(a).requests;
            requests.set(outcome, (requests.get(outcome) ?? 0) + value);
            if (a[ATTR.operation] === 'generation') {
              const generations = workload(a).generations;
              generations.set(outcome, (generations.get(outcome) ?? 0) + value);
            }
            break;
          }
          case METRICS.goodput.otelName:
            workload(a).goodput += value;
            break;
          case METRICS.inFlight.otelName:
            workload(a).inFlight += value;
            break;
          case METRICS.tokens.otelName:
            if (a[ATTR.tokenType] === 'input') workload(a).inputTokens += value;
            else if (a[ATTR.tokenType] === 'output') workload(a).outputTokens += value;
            break;
          case METRICS.sloEvents.otelName: {
            const kind = a[ATTR.slo] as SloKind;
            const events = workload(a).slo[kind];
            if (events === undefined) break;
            if (a[ATTR.sloResult] === 'good') events.good += value;
            else events.bad += value;
            break;
          }
          case METRICS.acceleratorSeconds.otelName:
            if (a[ATTR.phase] === 'decode') workload(a).decodeAcceleratorS += value;
            else workload(a).prefillAcceleratorS += value;
            break;
          case METRICS.inputTokensAcceleratorSeconds.otelName:
            workload(a).reportedInputAcceleratorS += value;
            break;
          case METRICS.requestsWithCachedInput.otelName:
            workload(a).withCachedInput += value;
            break;
          case POD_METRICS.busy.otelName:
            pod.busyS += value;
            break;
          case POD_METRICS.idle.otelName:
            pod.idleS += value;
            break;
          case POD_METRICS.accelerators.otelName:
            pod.accelerators = value;
            break;
          case POD_METRICS.pricePerHour.otelName:
            pod.pricePerHour = value;
            pod.currency = String(a[ATTR.currency]);
            break;
          case GPU_METRICS.memoryUsed.otelName:
            gpu(a).memoryUsedBytes = value;
            break;
          case GPU_METRICS.memoryTotal.otelName:
            gpu(a).memoryTotalBytes = value;
            break;
          case GPU_METRICS.utilization.otelName:
            gpu(a).utilizationRatio = value;
            break;
        }
      }
    }
  }
  return { workloads, gpus: [...gpus.values()], pod };
}
