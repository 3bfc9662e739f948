import type { Attributes, Meter } from '@opentelemetry/api';
import type { TokenSource } from '../clock/token-timeline.js';
import type { SloKind } from '../config/load.js';
import { ATTR, METRICS, type HistogramKey, type MetricDefinition, type Operation } from './definitions.js';
import { directMetricsOf, type HistogramSeries, type HistogramSeriesSet, type SumSeriesSet } from './direct-metrics.js';

/**
 * How a request ended; the `outcome` label. `shutdown`: still in flight when the drain deadline
 * after SIGTERM cut it (lifecycle/drain-proxy.ts), neither the client's doing nor the upstream's.
 */
/**
 * One per finished request. `client_error`: the request was refused for what it asked (an HTTP 4xx
 * other than 408 and 429, or a request tokentap could not parse): the client's fault, which burns no SLO.
 */
export type Outcome = 'completed' | 'client_cancelled' | 'client_error' | 'upstream_error' | 'truncated' | 'timeout' | 'shutdown';

/** Everything measured about one finished request; NaN where a quantity does not apply. */
export interface RequestSummary {
  readonly outcome: Outcome;
  /** "2xx".."5xx", or "none" when no status was sent to the client. */
  readonly statusClass: string;
  readonly ttfbMs: number;
  readonly ttftMs: number;
  readonly tpotMs: number;
  readonly e2eMs: number;
  readonly inputTokens: number;
  readonly outputTokens: number;
  readonly tokenSource: TokenSource;
  /** The stream carried more tokens than the reported usage (TokenTimeline.tokenCountMismatch). */
  readonly tokenCountMismatch: boolean;
  /** `other`: not a generation (health check, model listing): counted in tokentap_requests_total only. Absent: generation. */
  readonly operation?: Operation;
  /** Time to the first answer (non-reasoning) token; NaN or absent when none was streamed. */
  readonly ttftAnswerMs?: number;
  /** What the engine reported of its TTFT, and the rest (clock/engine-timings.ts); NaN or absent when not reported. */
  readonly engineTtftMs?: number;
  readonly engineQueueMs?: number;
  readonly enginePrefillMs?: number;
  readonly outsideEngineTtftMs?: number;
  /** Wire TTFT - engine TTFT for an engine that reports no queue time (the queue is in it); NaN or absent otherwise. */
  readonly queueOrOutsideEngineTtftMs?: number;
  /** Cached input tokens / input tokens as the usage reported them (TokenTimeline.cachedInputRatio); NaN or absent when not both. */
  readonly cachedInputRatio?: number;
}

const MS_PER_S = 1000;

/**
 * Turns measurements into the metrics of the definitions table, through the aggregation of
 * direct-metrics.ts (which every reader takes, the Prometheus one and the OTLP one; it says why not
 * the SDK's instruments). Attribute objects are interned:
 * one per attribute set, reused by every request and sample with that set, which is what lets the
 * direct aggregation find a series by identity.
 */
export class Recorder {
  private readonly histograms: Record<Exclude<HistogramKey, 'itlToken' | 'itlChunk' | 'itlByConcurrency'>, HistogramSeriesSet>;
  private readonly requests: SumSeriesSet;
  private readonly tokens: SumSeriesSet;
  private readonly inFlight: SumSeriesSet;
  private readonly tapErrors: SumSeriesSet;
  private readonly tokenCountMismatches: SumSeriesSet;
  private readonly sloEventCounter: SumSeriesSet;
  private readonly itlSlowRequestCounter: SumSeriesSet;
  private readonly upstreamRetries: SumSeriesSet;
  private readonly upstreamNotReused: SumSeriesSet;
  private readonly goodputCounter: SumSeriesSet;
  private readonly acceleratorSecondsCounter: SumSeriesSet;
  private readonly ttftFailedByConcurrencyCounter: SumSeriesSet;
  private readonly reportedInputAcceleratorSecondsCounter: SumSeriesSet;
  private readonly requestsWithCachedInput: SumSeriesSet;
  private readonly adapterColdStarts: SumSeriesSet;
  /** The inter-token histograms, whose series each request resolves once (interTokenSeries). */
  private readonly itlSets: DirectItlSets;
  /** Open requests holding inter-token samples not yet in their series: flushed before every collection. */
  private readonly pendingInterTokens = new Set<DirectInterTokenSeries>();
  private readonly baseAttributes = new Map<string, Map<string, Attributes>>();
  private readonly variants = new AttributeVariants();

  constructor(meter: Meter, buckets: Readonly<Record<HistogramKey, readonly number[]>>) {
    const direct = directMetricsOf(meter);
    if (direct === undefined) throw new Error('Recorder: the meter is not a Telemetry\'s (its DirectMetrics holds every request series)');
    const histogram = (key: HistogramKey): HistogramSeriesSet => direct.histogram(METRICS[key], buckets[key]);
    const counter = (def: MetricDefinition): SumSeriesSet => direct.sum(def, true);
    this.itlSets = { chunk: histogram('itlChunk'), token: histogram('itlToken'), band: histogram('itlByConcurrency') };
    direct.beforeCollect(() => this.flushInterTokens());
    this.histograms = {
      ttfb: histogram('ttfb'),
      ttft: histogram('ttft'),
      ttftAnswer: histogram('ttftAnswer'),
      engineTtft: histogram('engineTtft'),
      outsideEngineTtft: histogram('outsideEngineTtft'),
      queueOrOutsideEngineTtft: histogram('queueOrOutsideEngineTtft'),
      engineQueue: histogram('engineQueue'),
      enginePrefill: histogram('enginePrefill'),
      ttftByConcurrency: histogram('ttftByConcurrency'),
      adapterColdStartTtft: histogram('adapterColdStartTtft'),
      tpot: histogram('tpot'),
      e2e: histogram('e2e'),
      tokenUsage: histogram('tokenUsage'),
      requestAcceleratorSeconds: histogram('requestAcceleratorSeconds'),
      cachedInputRatio: histogram('cachedInputRatio'),
    };
    const { requests, tokens, inFlight, tapErrors, tokenCountMismatches, sloEvents } = METRICS;
    this.requests = counter(requests);
    this.tokens = counter(tokens);
    this.inFlight = direct.sum(inFlight, false);
    this.tapErrors = counter(tapErrors);
    this.tokenCountMismatches = counter(tokenCountMismatches);
    this.sloEventCounter = counter(sloEvents);
    this.upstreamRetries = counter(METRICS.upstreamRetries);
    this.upstreamNotReused = counter(METRICS.upstreamNotReused);
    this.goodputCounter = counter(METRICS.goodput);
    this.itlSlowRequestCounter = counter(METRICS.itlSlowRequests);
    this.acceleratorSecondsCounter = counter(METRICS.acceleratorSeconds);
    this.ttftFailedByConcurrencyCounter = counter(METRICS.ttftFailedByConcurrency);
    this.reportedInputAcceleratorSecondsCounter = counter(METRICS.inputTokensAcceleratorSeconds);
    this.requestsWithCachedInput = counter(METRICS.requestsWithCachedInput);
    this.adapterColdStarts = counter(METRICS.adapterColdStarts);
  }

  /** The base attributes of every series of one request: one object per (workload, model), shared; found without building a key (AttributeVariants says why). */
  requestAttributes(workload: string, model: string): Attributes {
    let byModel = this.baseAttributes.get(workload);
    if (byModel === undefined) {
      byModel = new Map();
      this.baseAttributes.set(workload, byModel);
    }
    let attributes = byModel.get(model);
    if (attributes === undefined) {
      attributes = Object.freeze({ [ATTR.workload]: workload, [ATTR.model]: model });
      byModel.set(model, attributes);
    }
    return attributes;
  }

  started(attributes: Attributes): void {
    this.inFlight.add(1, attributes);
  }

  /**
   * Where one request's inter-token samples go, resolved once per request: the per-chunk path then
   * does no series lookup at all. With `band` (capacity at SLO: the `in_flight` band at the
   * request's start), its per-token samples also go to the banded series. Call end() when the
   * request ends.
   */
  interTokenSeries(attributes: Attributes, band?: string): InterTokenSeries {
    const banded = band === undefined ? undefined : this.variants.of(attributes, ATTR.inFlight, band);
    const sets = this.itlSets;
    return new DirectInterTokenSeries(sets.chunk.series(attributes), sets.token.series(attributes), banded === undefined ? undefined : sets.band.series(banded), this.pendingInterTokens);
  }

  /** Every open request's buffered inter-token samples into their series (before a collection). */
  private flushInterTokens(): void {
    for (const series of this.pendingInterTokens) series.flush();
  }

  /** The request's SLO TTFT by the `in_flight` band at its start; nothing when it had no first token. */
  ttftByConcurrency(attributes: Attributes, band: string, ttftMs: number): void {
    recordIfKnown(this.histograms.ttftByConcurrency, ttftMs, this.variants.of(attributes, ATTR.inFlight, band));
  }

  /** Whether the request got no first token and counts bad for the TTFT SLO, by its `in_flight` band (0 or 1, so the series exists). */
  ttftFailedByConcurrency(attributes: Attributes, band: string, failed: boolean): void {
    this.ttftFailedByConcurrencyCounter.add(failed ? 1 : 0, this.variants.of(attributes, ATTR.inFlight, band));
  }

  finished(attributes: Attributes, summary: RequestSummary): void {
    this.inFlight.add(-1, attributes);
    const h = this.histograms;
    const v = this.variants;
    if (summary.operation === 'other') {
      // Not a generation: counted apart, kept out of every latency, token and SLO series.
      this.requests.add(1, v.of(attributes, ATTR.outcome, summary.outcome, ATTR.statusClass, summary.statusClass, ATTR.operation, 'other'));
      return;
    }
    if (!Number.isNaN(summary.ttfbMs)) h.ttfb.record(summary.ttfbMs / MS_PER_S, attributes);
    if (!Number.isNaN(summary.ttftMs)) h.ttft.record(summary.ttftMs / MS_PER_S, attributes);
    if (!Number.isNaN(summary.tpotMs)) h.tpot.record(summary.tpotMs / MS_PER_S, attributes);
    recordIfKnown(h.ttftAnswer, summary.ttftAnswerMs, attributes);
    recordIfKnown(h.engineTtft, summary.engineTtftMs, attributes);
    recordIfKnown(h.outsideEngineTtft, summary.outsideEngineTtftMs, attributes);
    recordIfKnown(h.queueOrOutsideEngineTtft, summary.queueOrOutsideEngineTtftMs, attributes);
    recordIfKnown(h.engineQueue, summary.engineQueueMs, attributes);
    recordIfKnown(h.enginePrefill, summary.enginePrefillMs, attributes);
    h.e2e.record(summary.e2eMs / MS_PER_S, v.of(attributes, ATTR.outcome, summary.outcome));
    this.requests.add(1, v.of(attributes, ATTR.outcome, summary.outcome, ATTR.statusClass, summary.statusClass, ATTR.operation, 'generation'));
    if (!Number.isNaN(summary.inputTokens)) {
      h.tokenUsage.record(summary.inputTokens, v.of(attributes, ATTR.tokenType, 'input'));
      this.tokens.add(summary.inputTokens, v.of(attributes, ATTR.tokenType, 'input', ATTR.tokenSource, 'usage'));
    }
    if (summary.outputTokens > 0 || summary.tokenSource === 'usage') {
      h.tokenUsage.record(summary.outputTokens, v.of(attributes, ATTR.tokenType, 'output'));
      this.tokens.add(summary.outputTokens, v.of(attributes, ATTR.tokenType, 'output', ATTR.tokenSource, summary.tokenSource));
    }
    if (summary.tokenCountMismatch) this.tokenCountMismatches.add(1, attributes);
    const cachedRatio = summary.cachedInputRatio;
    if (cachedRatio !== undefined && !Number.isNaN(cachedRatio)) {
      h.cachedInputRatio.record(cachedRatio, attributes);
      // Zero included, so the counter exists from the first request that reported its cache.
      this.requestsWithCachedInput.add(cachedRatio > 0 ? 1 : 0, attributes);
    }
  }

  /**
   * One finished generation's accelerator-seconds (metrics/processor-sharing.ts), by phase. Both
   * phases are added, zero included, so a workload's decode series exists from its first request.
   * `inputReported`: whether its server reported its input tokens; its prefill then counts in the
   * cost basis of the input tokens too (zero added otherwise, so the series exists).
   */
  acceleratorTime(attributes: Attributes, prefillS: number, decodeS: number, inputReported: boolean): void {
    const v = this.variants;
    this.acceleratorSecondsCounter.add(prefillS, v.of(attributes, ATTR.phase, 'prefill'));
    this.acceleratorSecondsCounter.add(decodeS, v.of(attributes, ATTR.phase, 'decode'));
    this.reportedInputAcceleratorSecondsCounter.add(inputReported ? prefillS : 0, attributes);
    this.histograms.requestAcceleratorSeconds.record(prefillS + decodeS, attributes);
  }

  /** A request to a LoRA adapter after idle (metrics/adapter-cold-starts.ts), at its start. */
  adapterColdStart(attributes: Attributes): void {
    this.adapterColdStarts.add(1, attributes);
  }

  /** That request's TTFT, beside its sample in the TTFT histogram; nothing when it had no first token. */
  adapterColdStartTtft(attributes: Attributes, ttftMs: number): void {
    recordIfKnown(this.histograms.adapterColdStartTtft, ttftMs, attributes);
  }

  upstreamRetry(attributes: Attributes): void {
    this.upstreamRetries.add(1, attributes);
  }

  upstreamConnectionNotReused(attributes: Attributes, reason: string): void {
    this.upstreamNotReused.add(1, this.variants.of(attributes, ATTR.reason, reason));
  }

  tapProblem(attributes: Attributes, reason: string): void {
    this.tapErrors.add(1, this.variants.of(attributes, ATTR.reason, reason));
  }

  /**
   * One request's good and bad events for one SLO (slo/slo-events.ts decides them). Both results
   * are added, zero included, so a workload's `result="bad"` series exists from its first event and
   * an error ratio reads 0 rather than "no data".
   */
  sloEvents(attributes: Attributes, slo: SloKind, good: number, bad: number): void {
    this.sloEventCounter.add(good, this.variants.of(attributes, ATTR.slo, slo, ATTR.sloResult, 'good'));
    this.sloEventCounter.add(bad, this.variants.of(attributes, ATTR.slo, slo, ATTR.sloResult, 'bad'));
  }

  /** One request with ITL events: 1 when a token of it was over the ITL threshold, else 0, so the series exists. */
  itlSlowRequest(attributes: Attributes, slow: boolean): void {
    this.itlSlowRequestCounter.add(slow ? 1 : 0, attributes);
  }

  /** One request of a workload with an SLO: 1 when it met every SLO (slo/goodput.ts), else 0, so the series exists. */
  goodput(attributes: Attributes, met: boolean): void {
    this.goodputCounter.add(met ? 1 : 0, attributes);
  }
}

/** A sample in milliseconds, recorded in seconds unless it is unknown (absent or NaN). */
function recordIfKnown(sink: HistogramSeriesSet, ms: number | undefined, attributes: Attributes): void {
  if (ms !== undefined && !Number.isNaN(ms)) sink.record(ms / MS_PER_S, attributes);
}

/**
 * A request's base attributes with one to three more (its outcome, a token type...), made once per
 * combination and reused: every label value here comes from a small fixed set. Found through one
 * map level per key and value, with the strings the callers already hold: building a combined key
 * string per call (a concatenation, then its flattening and hashing for the lookup) was most of
 * this lookup's cost on a small request, about ten calls per request.
 */
class AttributeVariants {
  private readonly byBase = new WeakMap<Attributes, VariantLevel>();

  of(base: Attributes, key: string, value: string, key2?: string, value2?: string, key3?: string, value3?: string): Attributes {
    let level = this.byBase.get(base);
    if (level === undefined) {
      level = new Map();
      this.byBase.set(base, level);
    }
    level = step(step(level, key), value);
    if (key2 !== undefined) level = step(step(level, key2), value2 as string);
    if (key3 !== undefined) level = step(step(level, key3), value3 as string);
    let attributes = level.get(VARIANT);
    if (attributes === undefined) {
      const added: Attributes = { [key]: value };
      if (key2 !== undefined) added[key2] = value2;
      if (key3 !== undefined) added[key3] = value3;
      attributes = Object.freeze({ ...base, ...added });
      level.set(VARIANT, attributes);
    }
    return attributes as Attributes;
  }
}

/** One step of the lookup: a key or value string to the next level; VARIANT to the attributes made for the path. */
type VariantLevel = Map<string | typeof VARIANT, VariantLevel | Attributes>;
const VARIANT = Symbol('variant');

function step(level: VariantLevel, name: string): VariantLevel {
  let next = level.get(name) as VariantLevel | undefined;
  if (next === undefined) {
    next = new Map();
    level.set(name, next);
  }
  return next;
}

/** One request's inter-token histograms: one per-chunk sample of the gap and `tokens` per-token samples of gap / tokens. */
export interface InterTokenSeries {
  record(gapMs: number, tokens: number): void;
  /** The request ended: whatever it holds goes into the series now. */
  end(): void;
}

interface DirectItlSets {
  readonly chunk: HistogramSeriesSet;
  readonly token: HistogramSeriesSet;
  readonly band: HistogramSeriesSet;
}

/** One-token gaps held per request before they go into the series together. */
const PENDING_GAPS = 8;

/**
 * On the series kept outside the SDK (direct-metrics.ts), found once for the request. A one-token
 * gap (nearly every event of a token stream) is held in the request's own buffer, and every
 * PENDING_GAPS of them go into the per-chunk, per-token and banded series at once; a gap of several
 * tokens goes in at once. Why: each series is several objects and arrays (counts, bounds, native
 * buckets) that have left the cache by the next chunk, so a sample cost about 0.4 us in place
 * against 0.07 in a tight loop; together, the lines are fetched once per batch. Nothing is lost or
 * late to a reader: the Recorder flushes every open request's buffer before a collection (scrape,
 * status page, OTLP), and end() flushes the rest.
 */
class DirectInterTokenSeries implements InterTokenSeries {
  private readonly chunk: HistogramSeries;
  private readonly token: HistogramSeries;
  private readonly band: HistogramSeries | undefined;
  private readonly open: Set<DirectInterTokenSeries>;
  /** One-token gaps in milliseconds, not yet in the series; `pending` of them. */
  private readonly gaps = new Float64Array(PENDING_GAPS);
  private pending = 0;
  /** After end() nothing is held (a sample after it, if any, goes straight in): no finished request stays in `open`. */
  private ended = false;

  constructor(chunk: HistogramSeries, token: HistogramSeries, band: HistogramSeries | undefined, open: Set<DirectInterTokenSeries>) {
    this.chunk = chunk;
    this.token = token;
    this.band = band;
    this.open = open;
  }

  record(gapMs: number, tokens: number): void {
    if (tokens === 1 && !this.ended) {
      if (this.pending === 0) this.open.add(this);
      this.gaps[this.pending++] = gapMs;
      if (this.pending === PENDING_GAPS) this.flush();
      return;
    }
    const gapS = gapMs / MS_PER_S;
    const perToken = gapS / tokens;
    this.chunk.record(gapS);
    this.token.recordTimes(perToken, tokens);
    this.band?.recordTimes(perToken, tokens);
  }

  flush(): void {
    const pending = this.pending;
    if (pending === 0) return;
    this.pending = 0;
    this.open.delete(this);
    const gaps = this.gaps;
    // For one token, the per-chunk and per-token samples are the same value (gap / 1).
    for (let i = 0; i < pending; i++) this.chunk.record((gaps[i] as number) / MS_PER_S);
    for (let i = 0; i < pending; i++) this.token.record((gaps[i] as number) / MS_PER_S);
    const band = this.band;
    if (band !== undefined) for (let i = 0; i < pending; i++) band.record((gaps[i] as number) / MS_PER_S);
  }

  end(): void {
    this.ended = true;
    this.flush();
  }
}
