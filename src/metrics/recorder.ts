import type { Attributes, Counter, Histogram, Meter, UpDownCounter } from '@opentelemetry/api';
import type { TokenSource } from '../clock/token-timeline.js';
import type { SloKind } from '../config/load.js';
import { ATTR, METRICS, type HistogramKey } from './definitions.js';
import { interTokenHistogramsOf, type HistogramSeries, type HistogramSeriesSet } from './inter-token-histograms.js';

/**
 * How a request ended; the `outcome` label. `shutdown`: still in flight when the drain deadline
 * after SIGTERM cut it (lifecycle/drain-proxy.ts), neither the client's doing nor the upstream's.
 */
export type Outcome = 'completed' | 'client_cancelled' | 'upstream_error' | 'truncated' | 'timeout' | 'shutdown';

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
  /** Counted output tokens differ from the reported usage (TokenTimeline.tokenCountMismatch). */
  readonly tokenCountMismatch: boolean;
}

const MS_PER_S = 1000;

/**
 * Turns measurements into OpenTelemetry instruments built from the definitions table. Attribute
 * objects are made once per request and reused for every sample of it.
 */
export class Recorder {
  private readonly histograms: Record<Exclude<HistogramKey, 'itlToken' | 'itlChunk'>, Histogram>;
  private readonly requests: Counter;
  private readonly tokens: Counter;
  private readonly inFlight: UpDownCounter;
  private readonly tapErrors: Counter;
  private readonly tokenCountMismatches: Counter;
  private readonly sloEventCounter: Counter;
  /** The inter-token histograms outside the SDK (inter-token-histograms.ts), when the meter's Telemetry has them. */
  private readonly itlChunkSeries: HistogramSeriesSet | undefined;
  private readonly itlTokenSeries: HistogramSeriesSet | undefined;
  /** Otherwise (OTLP configured) the SDK's instruments. */
  private readonly itlRecorded: { readonly chunk: Histogram; readonly token: Histogram } | undefined;

  constructor(meter: Meter, buckets: Readonly<Record<HistogramKey, readonly number[]>>) {
    const histogram = (key: HistogramKey): Histogram => {
      const def = METRICS[key];
      return meter.createHistogram(def.otelName, {
        unit: def.unit,
        description: def.description,
        advice: { explicitBucketBoundaries: [...buckets[key]] },
      });
    };
    const interToken = interTokenHistogramsOf(meter);
    this.itlChunkSeries = interToken?.histogram(METRICS.itlChunk, buckets.itlChunk);
    this.itlTokenSeries = interToken?.histogram(METRICS.itlToken, buckets.itlToken);
    // Created on the meter only without the producer: an instrument never recorded is still exported.
    this.itlRecorded = interToken === undefined ? { chunk: histogram('itlChunk'), token: histogram('itlToken') } : undefined;
    this.histograms = {
      ttfb: histogram('ttfb'),
      ttft: histogram('ttft'),
      tpot: histogram('tpot'),
      e2e: histogram('e2e'),
      tokenUsage: histogram('tokenUsage'),
    };
    const { requests, tokens, inFlight, tapErrors } = METRICS;
    this.requests = meter.createCounter(requests.otelName, { unit: requests.unit, description: requests.description });
    this.tokens = meter.createCounter(tokens.otelName, { unit: tokens.unit, description: tokens.description });
    this.inFlight = meter.createUpDownCounter(inFlight.otelName, { unit: inFlight.unit, description: inFlight.description });
    this.tapErrors = meter.createCounter(tapErrors.otelName, { unit: tapErrors.unit, description: tapErrors.description });
    const mismatches = METRICS.tokenCountMismatches;
    this.tokenCountMismatches = meter.createCounter(mismatches.otelName, { unit: mismatches.unit, description: mismatches.description });
    const { sloEvents } = METRICS;
    this.sloEventCounter = meter.createCounter(sloEvents.otelName, { unit: sloEvents.unit, description: sloEvents.description });
  }

  /** The base attributes of every series of one request. */
  requestAttributes(workload: string, model: string): Attributes {
    return { [ATTR.workload]: workload, [ATTR.model]: model };
  }

  started(attributes: Attributes): void {
    this.inFlight.add(1, attributes);
  }

  /**
   * Where one request's inter-token samples go, resolved once per request: the per-chunk path then
   * does no series lookup at all.
   */
  interTokenSeries(attributes: Attributes): InterTokenSeries {
    if (this.itlRecorded === undefined) {
      return new DirectInterTokenSeries((this.itlChunkSeries as HistogramSeriesSet).series(attributes), (this.itlTokenSeries as HistogramSeriesSet).series(attributes));
    }
    return new SdkInterTokenSeries(this.itlRecorded.chunk, this.itlRecorded.token, attributes);
  }

  finished(attributes: Attributes, summary: RequestSummary): void {
    this.inFlight.add(-1, attributes);
    const h = this.histograms;
    if (!Number.isNaN(summary.ttfbMs)) h.ttfb.record(summary.ttfbMs / MS_PER_S, attributes);
    if (!Number.isNaN(summary.ttftMs)) h.ttft.record(summary.ttftMs / MS_PER_S, attributes);
    if (!Number.isNaN(summary.tpotMs)) h.tpot.record(summary.tpotMs / MS_PER_S, attributes);
    h.e2e.record(summary.e2eMs / MS_PER_S, { ...attributes, [ATTR.outcome]: summary.outcome });
    this.requests.add(1, { ...attributes, [ATTR.outcome]: summary.outcome, [ATTR.statusClass]: summary.statusClass });
    if (!Number.isNaN(summary.inputTokens)) {
      const input = { ...attributes, [ATTR.tokenType]: 'input' };
      h.tokenUsage.record(summary.inputTokens, input);
      this.tokens.add(summary.inputTokens, { ...input, [ATTR.tokenSource]: 'usage' });
    }
    if (summary.outputTokens > 0 || summary.tokenSource === 'usage') {
      const output = { ...attributes, [ATTR.tokenType]: 'output' };
      h.tokenUsage.record(summary.outputTokens, output);
      this.tokens.add(summary.outputTokens, { ...output, [ATTR.tokenSource]: summary.tokenSource });
    }
    if (summary.tokenCountMismatch) this.tokenCountMismatches.add(1, attributes);
  }

  tapProblem(attributes: Attributes, reason: string): void {
    this.tapErrors.add(1, { ...attributes, [ATTR.reason]: reason });
  }

  /**
   * One request's good and bad events for one SLO (slo/slo-events.ts decides them). Both results
   * are added, zero included, so a workload's `result="bad"` series exists from its first event and
   * an error ratio reads 0 rather than "no data".
   */
  sloEvents(attributes: Attributes, slo: SloKind, good: number, bad: number): void {
    this.sloEventCounter.add(good, { ...attributes, [ATTR.slo]: slo, [ATTR.sloResult]: 'good' });
    this.sloEventCounter.add(bad, { ...attributes, [ATTR.slo]: slo, [ATTR.sloResult]: 'bad' });
  }
}

/** One request's inter-token histograms: one per-chunk sample of the gap and `tokens` per-token samples of gap / tokens. */
export interface InterTokenSeries {
  record(gapMs: number, tokens: number): void;
}

/** On the series kept outside the SDK (inter-token-histograms.ts), found once for the request. */
class DirectInterTokenSeries implements InterTokenSeries {
  private readonly chunk: HistogramSeries;
  private readonly token: HistogramSeries;

  constructor(chunk: HistogramSeries, token: HistogramSeries) {
    this.chunk = chunk;
    this.token = token;
  }

  record(gapMs: number, tokens: number): void {
    const gapS = gapMs / MS_PER_S;
    this.chunk.record(gapS);
    this.token.recordTimes(gapS / tokens, tokens);
  }
}

/** Through the SDK's instruments (OTLP configured: its readers cannot take the producer). */
class SdkInterTokenSeries implements InterTokenSeries {
  private readonly chunk: Histogram;
  private readonly token: Histogram;
  private readonly attributes: Attributes;

  constructor(chunk: Histogram, token: Histogram, attributes: Attributes) {
    this.chunk = chunk;
    this.token = token;
    this.attributes = attributes;
  }

  record(gapMs: number, tokens: number): void {
    const gapS = gapMs / MS_PER_S;
    const perToken = gapS / tokens;
    this.chunk.record(gapS, this.attributes);
    for (let i = 0; i < tokens; i++) this.token.record(perToken, this.attributes);
  }
}
