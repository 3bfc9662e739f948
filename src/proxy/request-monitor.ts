import type { IncomingHttpHeaders } from 'node:http';
import type { Attributes } from '@opentelemetry/api';
import type { Logger } from 'pino';
import type { RequestLineWriter } from '../log/request-line.js';
import { loggablePath } from '../log/loggable-path.js';
import type { Clock } from '../clock/clock.js';
import type { DrainState } from '../lifecycle/drain-state.js';
import type { Workload } from '../config/load.js';
import { TokenTimeline, type InterTokenSink } from '../clock/token-timeline.js';
import { engineSplit } from '../clock/engine-timings.js';
import type { Operation } from '../metrics/definitions.js';
import type { InFlightTracker } from '../metrics/in-flight-band.js';
import type { AdapterColdStarts } from '../metrics/adapter-cold-starts.js';
import type { ModelLabels } from '../metrics/model-labels.js';
import type { PodTime } from '../metrics/pod-time.js';
import type { InterTokenSeries, Outcome, Recorder, RequestSummary } from '../metrics/recorder.js';
import { metEverySlo } from '../slo/goodput.js';
import { interTokenIsBad, isClientErrorStatus, recordSloEvents, ttftResult } from '../slo/slo-events.js';
import type { WorkloadMatcher } from '../slo/workload-matcher.js';
import { isGrpcContentType } from '../taps/grpc/grpc-content-type.js';
import { isCoded } from './content-coding.js';
import { DEFAULT_TAP_SELECTOR, type TapSelector } from '../taps/select.js';
import type { Tap, TapContext, TapProblemReason } from '../taps/tap.js';
import type { Protocol } from '../taps/route-table.js';
import type { NotReusedReason } from './upstream-pool.js';
import { NULL_SPAN, NULL_TRACER, type RequestSpan, type RequestTracer } from '../tracing/request-span.js';
import type { PromptBlocks } from '../profile/prompt-fingerprint.js';
import type { ProfileStore } from '../profile/profile-store.js';

/** What every request's monitor shares: built once at start-up. */
export interface MonitorDependencies {
  readonly clock: Clock;
  readonly recorder: Recorder;
  readonly models: ModelLabels;
  readonly logger: Logger;
  /** Writes each request's line to `logger`'s destination, gated by its level (made from `logger`). */
  readonly requestLines: RequestLineWriter;
  /** Chooses each response's tap from the route table; the built-in routes when absent. */
  readonly taps?: TapSelector;
  readonly workloads: WorkloadMatcher;
  /** Set at start-up: NULL_TRACER (no work at all) unless OTLP traces are configured. Absent means NULL_TRACER. */
  readonly tracer?: RequestTracer;
  /** Counts requests in flight for the drain; a request failing after the drain deadline is counted as `shutdown`. */
  readonly drain?: DrainState;
  /** With `dcgm.url`: the pod's GPU memory in use as of the last DCGM scrape, logged with each request. */
  readonly gpuMemory?: { memoryUsedBytes(): number | undefined };
  /** Counts the sidecar's requests in flight for the capacity histograms (`in_flight` band); none recorded when absent. */
  readonly inFlight?: InFlightTracker;
  /** Marks a LoRA adapter's first request after idle (model discovery on); none marked when absent. */
  readonly coldStarts?: AdapterColdStarts;
  /** The workload-shape record (src/profile/); no fingerprint is taken and nothing recorded when absent. */
  readonly profiles?: ProfileStore;
  /** Shares the pod's time among requests (accelerator time, docs/capacity-and-cost.md); none recorded when absent. */
  readonly podTime?: PodTime;
}

/**
 * The observation of one proxied request, beside the stream: owns its timeline and tap, decides its
 * one outcome, and records and logs it exactly once. The proxy calls it at each step; it never
 * touches the sockets, so nothing here can alter what the client receives.
 *
 * Every method the proxy calls catches what it throws (observationFailed): the proxy calls them from
 * its socket event handlers, where an exception would be uncaught and take the whole sidecar, and
 * every stream in it, down with it.
 */
export class RequestMonitor implements InterTokenSink, TapContext {
  readonly timeline: TokenTimeline;
  /** The protocol of the route the request is on (`none` included), undefined off the routes: looked up once. */
  readonly protocol: Protocol | undefined;
  private readonly deps: MonitorDependencies;
  private readonly method: string;
  private readonly path: string;
  /** The path as logs and spans carry it (log/loggable-path.ts): parameters, fragment and an encoded query hidden, bounded. */
  private readonly loggedPath: string;
  private readonly headers: IncomingHttpHeaders;
  private workload: Workload | undefined;
  /** ITL SLO threshold and tallies, kept as tokens arrive so the SLO counter is touched once per request. */
  private itlThresholdS: number | undefined;
  private itlTokens = 0;
  private itlBadTokens = 0;
  private attributes: Attributes | undefined;
  /** Where this request's inter-token samples go: found with its first sample. */
  private itlSeries: InterTokenSeries | undefined;
  /** The band of requests in flight when this one started (capacity at SLO); undefined without a tracker. */
  private readonly inFlightBand: string | undefined;
  private model = '';
  /** The first request to its adapter after idle (AdapterColdStarts), decided once with the labels. */
  private adapterColdStart = false;
  private tap: Tap | undefined;
  private streaming = false;
  private status = 0;
  /** The response's `grpc-encoding`, read by the gRPC taps (TapContext). */
  grpcEncoding: string | undefined;
  private endedOutcome: Outcome | undefined;
  private done = false;
  private span: RequestSpan = NULL_SPAN;
  private failureLogged = false;
  /** Why the request failed, for its log line: the upstream address and the socket error, or what went silent. */
  private failureDetail: string | undefined;
  /** Sent a second time on a fresh upstream connection (exchange.ts retry()): logged as `retried: true`. */
  private wasRetried = false;
  /** As the body named it, for the span only (a span is not a series, so no folding into `other`). */
  private requestedModel: string | undefined;
  /** The client has sent its whole request (requestComplete): see FinishedRequestFacts.requestUnsent. */
  private requestSent = false;
  /** When the upstream read being relayed arrived (arrived()); NaN until the proxy first says so. */
  private arrivedMs = Number.NaN;
  /** The prompt's keyed block hashes, taken once from the parsed body (requestBody()); never its text. */
  private promptBlocks: PromptBlocks | undefined;
  /** The pod's processor-sharing clock (metrics/processor-sharing.ts) at this request's start and first token; NaN until then. */
  private readonly sharedAtStartMs: number;
  private sharedAtFirstTokenMs = Number.NaN;

  /** `headers` are the request's, as Node parsed them (names lower-case); read for workload matching. */
  constructor(deps: MonitorDependencies, method: string, url: string, headers: IncomingHttpHeaders) {
    this.deps = deps;
    this.method = method;
    this.headers = headers;
    // Only the path is logged: query strings can carry credentials.
    const query = url.indexOf('?');
    this.path = query === -1 ? url : url.slice(0, query);
    this.loggedPath = loggablePath(this.path);
    this.protocol = (deps.taps ?? DEFAULT_TAP_SELECTOR).protocolFor(method, this.path);
    this.timeline = new TokenTimeline(deps.clock.nowMs(), this);
    deps.drain?.requestStarted();
    this.inFlightBand = deps.inFlight?.started();
    this.sharedAtStartMs = deps.podTime === undefined ? Number.NaN : deps.podTime.sharing.started(this.timeline.startMs);
  }

  /**
   * The request body has been read; `model` is what it asked for, if it said. Fixes the labels.
   * `body`, the parsed JSON, gives the workload-shape fingerprint here, once; it is not kept.
   */
  requestBody(model: string | undefined, body?: unknown): void {
    this.requestComplete();
    this.requestedModel = model;
    try {
      this.labels(model);
      if (body !== undefined) this.fingerprint(body);
    } catch (error) {
      this.observationFailed('requestBody', error);
    }
  }

  /** The client has sent its whole request (a gRPC stream: its first message), whether or not it had a body to read. */
  requestComplete(): void {
    this.requestSent = true;
  }

  /**
   * The workload-shape fingerprint of the prompt. Should taking it ever fail, the request only goes
   * without prefix hashes: it is still observed and recorded, and no monitor failure is logged for
   * what is a property of one client's body.
   */
  private fingerprint(body: unknown): void {
    const profiles = this.deps.profiles;
    if (profiles === undefined) return;
    try {
      this.promptBlocks = profiles.fingerprint((this.workload as Workload).name, body);
    } catch {
      this.promptBlocks = undefined;
    }
  }

  /**
   * Starts the request's span, continuing the client's trace, and puts its `traceparent` into
   * `upstreamHeaders` (the flat list the proxy forwards). With NULL_TRACER, nothing happens.
   */
  trace(upstreamHeaders: string[]): void {
    try {
      this.span = (this.deps.tracer ?? NULL_TRACER).start(this.method, this.loggedPath, this.timeline.startMs, this.headers, upstreamHeaders);
    } catch (error) {
      this.observationFailed('trace', error);
    }
  }

  /** The request set a gRPC deadline (TapContext). */
  get clientDeadline(): boolean {
    return this.headers['grpc-timeout'] !== undefined;
  }

  /**
   * The response head: its status, Content-Type, over HTTP/2 its `grpc-encoding`, and its
   * Content-Encoding; chooses the tap.
   */
  response(status: number, contentType: string | undefined, grpcEncoding?: string, contentEncoding?: string): void {
    this.status = status;
    this.grpcEncoding = grpcEncoding;
    if (status < 200 || status >= 300) return;
    // A gRPC call answered 2xx in anything but gRPC (an HTML page from a proxy or ingress on the
    // way, an empty answer) failed for its client: grpc-js reads the page as a message prefix
    // (RESOURCE_EXHAUSTED, or INTERNAL without grpc-status). It was recorded `completed`.
    if (isGrpcContentType(this.headers['content-type']) && !isGrpcContentType(contentType)) {
      this.timeline.errorEvent = true;
      return;
    }
    try {
      const choice = (this.deps.taps ?? DEFAULT_TAP_SELECTOR).selectOn(this.protocol, this.method, this.path, contentType);
      if (choice === undefined) return;
      // A coded body (gzip, br...: the client asked for it with Accept-Encoding, which undici's
      // fetch under the OpenAI and Anthropic SDKs sends) is bytes no tap can read: read as text it
      // had no events, so a complete stream was recorded `truncated` with no token, burning the
      // TTFT and e2e SLOs. Unobserved instead, like a body of an unknown type (TTFB and e2e, the
      // outcome from its framing), and counted.
      if (isCoded(contentEncoding)) {
        this.problem('compressed_body');
        return;
      }
      this.streaming = choice.streaming;
      this.tap = choice.create(this);
    } catch (error) {
      this.observationFailed('response', error);
    }
  }

  /**
   * An upstream read has just arrived, before the proxy writes it to the client: its time is the
   * time of every body() piece it carries. TTFT is the first token's arrival at the proxy (DESIGN.md
   * section 2), so it must not include the write to the client, which can take a millisecond or
   * more on a loaded machine (issue 23: tokentap's TTFT was once 1.47 ms above the client's own).
   * One clock read per upstream read, reused by all its pieces.
   */
  arrived(): void {
    try {
      this.arrivedMs = this.deps.clock.nowMs();
    } catch (error) {
      this.observationFailed('arrived', error);
    }
  }

  /** A piece of the response body, at the time arrived() took; a caller that never calls arrived() gets the time of this call. */
  body(chunk: Buffer): void {
    try {
      const nowMs = Number.isNaN(this.arrivedMs) ? this.deps.clock.nowMs() : this.arrivedMs;
      this.timeline.bytes(nowMs);
      if (this.tap === undefined) return;
      try {
        this.tap.write(chunk, nowMs);
      } catch {
        this.disableTap();
      }
    } catch (error) {
      this.observationFailed('body', error);
    }
  }

  /**
   * The response's HTTP/2 trailers: a gRPC tap reads `grpc-status` from them for the outcome
   * (taps/grpc/grpc-status.ts). Call it before bodyEnd(). A trailers-only response (one HEADERS
   * frame with END_STREAM, `grpc-status` among the headers, no body) calls response() and then
   * trailers() with the same headers object, then bodyEnd().
   */
  trailers(trailers: IncomingHttpHeaders): void {
    try {
      this.tap?.trailers?.(trailers, this.deps.clock.nowMs());
    } catch (error) {
      this.observationFailed('trailers', error);
    }
  }

  /** The upstream body ended cleanly; the outcome is settled, but e2e waits for the last byte to the client. */
  bodyEnd(): void {
    try {
      if (this.tap !== undefined) {
        try {
          this.tap.end(this.deps.clock.nowMs());
        } catch {
          this.disableTap();
        }
      }
    } catch (error) {
      this.observationFailed('bodyEnd', error);
    }
    const timeline = this.timeline;
    if (isClientErrorStatus(this.status)) this.endedOutcome = 'client_error';
    else if (this.status < 200 || this.status >= 300) this.endedOutcome = 'upstream_error';
    // A non-OK grpc-status names the outcome itself (a 200 whose trailers say DEADLINE_EXCEEDED is a timeout).
    else if (timeline.statusOutcome !== undefined) this.endedOutcome = timeline.statusOutcome;
    else if (timeline.errorEvent) this.endedOutcome = 'upstream_error';
    else if (this.streaming && !timeline.terminal) this.endedOutcome = 'truncated';
    else this.endedOutcome = 'completed';
  }

  /** The last byte was handed to the client. */
  delivered(): void {
    this.finish(this.endedOutcome ?? 'truncated');
  }

  /** The request ended early: the client left, the upstream failed or went silent; `detail` says where and why. */
  fail(outcome: Outcome, status = this.status, detail?: string): void {
    if (this.done) return;
    this.status = status;
    this.failureDetail = detail;
    // Once the drain deadline has passed, every failure is the shutdown's cut, not the client or upstream.
    if (this.deps.drain?.cutting === true) outcome = 'shutdown';
    // A client that leaves once the stream has reported an error left because it failed (the Python
    // SDKs raise on the error event and close the response): the upstream's failure, not a cancel.
    else if (outcome === 'client_cancelled' && this.timeline.errorEvent) outcome = 'upstream_error';
    this.finish(outcome);
  }

  get finished(): boolean {
    return this.done;
  }

  /** The tap has seen the protocol's terminal event ([DONE], finish_reason, message_stop...). */
  get terminalSeen(): boolean {
    return this.timeline.terminal;
  }

  /** The request is being sent again on a fresh upstream connection. */
  retried(): void {
    this.wasRetried = true;
    try {
      this.deps.recorder.upstreamRetry(this.labels(undefined));
    } catch (error) {
      this.observationFailed('retried', error);
    }
  }

  /** The upstream connection of this request's clean response was closed rather than pooled. */
  upstreamNotReused(reason: NotReusedReason): void {
    try {
      this.deps.recorder.upstreamConnectionNotReused(this.labels(undefined), reason);
    } catch (error) {
      this.observationFailed('upstreamNotReused', error);
    }
  }

  // InterTokenSink
  interToken(gapMs: number, tokens: number): void {
    // Found at the second content event: a request without one (not streamed, or one token) never needs it.
    this.itlSeries ??= this.deps.recorder.interTokenSeries(this.labels(undefined), this.inFlightBand);
    this.itlSeries.record(gapMs, tokens);
    const itlS = this.itlThresholdS;
    if (itlS !== undefined) {
      this.itlTokens += tokens;
      if (interTokenIsBad(itlS, gapMs, tokens)) this.itlBadTokens += tokens;
    }
  }

  firstToken(nowMs: number): void {
    if (this.deps.podTime !== undefined) this.sharedAtFirstTokenMs = this.deps.podTime.sharing.read(nowMs);
  }

  // TapContext
  problem(reason: TapProblemReason): void {
    this.deps.recorder.tapProblem(this.labels(undefined), reason);
  }

  private disableTap(): void {
    this.tap = undefined;
    this.deps.recorder.tapProblem(this.labels(undefined), 'tap_exception');
  }

  /**
   * Observation code threw (a bug, or a broken exporter or log sink): the tap stops for this request
   * and the failure is logged once, naming the step. The stream is not touched, and finish() still
   * releases the drain's count.
   */
  private observationFailed(step: string, error: unknown): void {
    this.tap = undefined;
    if (this.failureLogged) return;
    this.failureLogged = true;
    try {
      this.deps.logger.warn({ err: error, step, method: this.method, path: this.loggedPath }, 'request monitor failed: observation of this request is incomplete, its stream goes on');
    } catch {
      // The log sink itself failed: nothing is left to report to, and the stream must go on.
    }
  }

  /**
   * The request's workload and attributes, fixed on first use: at request-body end, when the model
   * is known, or at the first sample if that comes first (then without the model to match on).
   */
  private labels(model: string | undefined): Attributes {
    if (this.attributes === undefined) {
      this.workload = this.deps.workloads.match(this.headers, this.path, model);
      this.itlThresholdS = this.workload.slo?.thresholdsS.itl;
      this.model = this.deps.models.label(model);
      this.attributes = this.deps.recorder.requestAttributes(this.workload.name, this.model);
      this.deps.recorder.started(this.attributes);
      // The ITL guard's counter exists at 0 before any request can end slow: increase() never
      // counts the step that creates a series, so a pod whose first ITL request was slow would
      // count one slow request fewer (render/traffic-guard.ts).
      if (this.itlThresholdS !== undefined) this.deps.recorder.itlSlowRequest(this.attributes, false);
      this.adapterColdStart = this.deps.coldStarts?.requestStarted(this.model) ?? false;
      if (this.adapterColdStart) this.deps.recorder.adapterColdStart(this.attributes);
    }
    return this.attributes;
  }

  /**
   * A generation: on an inference route, or, off the routes, answered with what a tap reads as a
   * completion (a content event, a terminal event or a usage report). Anything else (a health check,
   * `/v1/models`, a tokenizer's JSON) is `other`.
   */
  private operation(): Operation {
    if ((this.deps.taps ?? DEFAULT_TAP_SELECTOR).routedOn(this.protocol, this.path)) return 'generation';
    const timeline = this.timeline;
    return timeline.contentEvents > 0 || timeline.terminal || !Number.isNaN(timeline.reportedOutputTokens) ? 'generation' : 'other';
  }

  private finish(outcome: Outcome): void {
    if (this.done) return;
    this.done = true;
    let endMs = Number.NaN;
    let sharedAtEndMs = Number.NaN;
    try {
      endMs = this.deps.clock.nowMs();
      // Before anything that may throw: the pod's count in flight must drop whatever happens next.
      if (this.deps.podTime !== undefined) sharedAtEndMs = this.deps.podTime.sharing.finished(endMs);
      this.record(outcome, endMs, sharedAtEndMs);
    } catch (error) {
      this.observationFailed('finish', error);
    } finally {
      // The inter-token samples the series held back for this request (recorder.ts) go in now, on
      // their own: a failure there takes nothing of the record with it, nor the other way round.
      try {
        this.itlSeries?.end();
      } catch (error) {
        this.observationFailed('finish', error);
      }
      this.deps.drain?.requestFinished();
      this.deps.inFlight?.finished();
    }
  }

  /**
   * The request's accelerator-seconds, recorded by phase: its share of the pod's time (the sharing
   * clock's advance from its start to its end) times the accelerators, prefill up to its first token
   * (all of it without one). NaN, and nothing recorded, without `cost:` or an accelerator count.
   */
  private recordAcceleratorTime(attributes: Attributes, sharedAtEndMs: number): number {
    const accelerators = this.deps.podTime?.accelerators();
    if (accelerators === undefined || Number.isNaN(sharedAtEndMs)) return Number.NaN;
    const firstTokenMs = Number.isNaN(this.sharedAtFirstTokenMs) ? sharedAtEndMs : this.sharedAtFirstTokenMs;
    const prefillS = ((firstTokenMs - this.sharedAtStartMs) / MS_PER_S) * accelerators;
    const decodeS = ((sharedAtEndMs - firstTokenMs) / MS_PER_S) * accelerators;
    this.deps.recorder.acceleratorTime(attributes, prefillS, decodeS, !Number.isNaN(this.timeline.reportedInputTokens));
    return prefillS + decodeS;
  }

  /** Records, traces and logs the finished request: once, from finish(). */
  private record(outcome: Outcome, endMs: number, sharedAtEndMs: number): void {
    const attributes = this.labels(undefined);
    const timeline = this.timeline;
    if (timeline.countedPastBound) this.problem('implausible_value');
    const operation = this.operation();
    // Read once, from what the final events reported: nothing of this is done per chunk.
    const split = engineSplit(timeline.serverTimings, timeline.ttftMs);
    const summary: RequestSummary = {
      operation,
      outcome,
      statusClass: statusClass(this.status),
      ttfbMs: timeline.ttfbMs,
      ttftMs: timeline.ttftMs,
      tpotMs: timeline.tpotMs,
      e2eMs: endMs - timeline.startMs,
      inputTokens: timeline.reportedInputTokens,
      outputTokens: timeline.outputTokens,
      tokenSource: timeline.outputTokenSource,
      tokenCountMismatch: timeline.tokenCountMismatch,
      ttftAnswerMs: timeline.ttftAnswerMs,
      engineTtftMs: split.engineTtftMs,
      engineQueueMs: split.queueMs,
      enginePrefillMs: split.prefillMs,
      outsideEngineTtftMs: split.outsideEngineTtftMs,
      queueOrOutsideEngineTtftMs: split.queueOrOutsideEngineTtftMs,
      cachedInputRatio: timeline.cachedInputRatio,
    };
    this.deps.recorder.finished(attributes, summary);
    if (this.adapterColdStart && operation === 'generation') this.deps.recorder.adapterColdStartTtft(attributes, summary.ttftMs);
    this.deps.coldStarts?.requestEnded(this.model);
    const acceleratorSeconds = operation === 'generation' ? this.recordAcceleratorTime(attributes, sharedAtEndMs) : Number.NaN;
    const workload = this.workload as Workload;
    if (operation === 'generation') {
      this.deps.profiles?.record(workload.name, {
        startMs: timeline.startMs,
        durationMs: summary.e2eMs,
        inputTokens: summary.inputTokens,
        outputTokens: summary.outputTokens,
        cachedInputTokens: timeline.reportedCachedInputTokens,
        outcome,
        blocks: this.promptBlocks,
      });
    }
    if (this.inFlightBand !== undefined && operation === 'generation') {
      const sloTtftMs = workload.slo?.ttftOn === 'first_answer' ? timeline.ttftAnswerMs : summary.ttftMs;
      this.deps.recorder.ttftByConcurrency(attributes, this.inFlightBand, sloTtftMs);
    }
    let goodput: boolean | undefined;
    if (workload.slo !== undefined && operation === 'generation') {
      const nonStreamedAnswer = this.status >= 200 && this.status < 300 && !this.streaming;
      const onAnswer = workload.slo.ttftOn === 'first_answer';
      const facts = {
        outcome,
        status: this.status,
        nonStreamedAnswer,
        ttftMs: onAnswer ? timeline.ttftAnswerMs : summary.ttftMs,
        unanswered: onAnswer && timeline.contentEvents > 0 && Number.isNaN(timeline.firstAnswerMs),
        e2eMs: summary.e2eMs,
        requestUnsent: !this.requestSent,
      };
      recordSloEvents(this.deps.recorder, attributes, workload, facts, this.itlTokens, this.itlBadTokens);
      // Capacity at SLO judges a band's TTFT as the SLO does: a request refused or failed without a
      // first token is bad there too, or a server shedding load with fast 429s never breaks a band.
      const ttftS = workload.slo.thresholdsS.ttft;
      if (this.inFlightBand !== undefined && ttftS !== undefined) {
        this.deps.recorder.ttftFailedByConcurrency(attributes, this.inFlightBand, Number.isNaN(facts.ttftMs) && ttftResult(ttftS, facts) === 'bad');
      }
      goodput = metEverySlo(workload.slo, facts, this.itlTokens, this.itlBadTokens);
      this.deps.recorder.goodput(attributes, goodput);
    }
    this.span.end(summary, this.status, workload.name, this.requestedModel, this.model, goodput);
    this.deps.requestLines.write({
      method: this.method,
      path: this.loggedPath,
      status: this.status,
      outcome,
      workload: workload.name,
      model: this.model,
      ttfb_ms: round(summary.ttfbMs),
      ttft_ms: round(summary.ttftMs),
      ttft_answer_ms: Number.isNaN(timeline.firstAnswerMs) || timeline.firstAnswerMs === timeline.firstTokenMs ? undefined : round(timeline.ttftAnswerMs),
      outside_engine_ttft_ms: Number.isNaN(split.outsideEngineTtftMs) ? undefined : round(split.outsideEngineTtftMs),
      queue_or_outside_engine_ttft_ms: Number.isNaN(split.queueOrOutsideEngineTtftMs) ? undefined : round(split.queueOrOutsideEngineTtftMs),
      tpot_ms: round(summary.tpotMs),
      e2e_ms: round(summary.e2eMs),
      input_tokens: Number.isNaN(summary.inputTokens) ? null : summary.inputTokens,
      cached_input_tokens: Number.isNaN(timeline.reportedCachedInputTokens) ? undefined : timeline.reportedCachedInputTokens,
      output_tokens: summary.outputTokens,
      token_source: summary.tokenSource,
      content_events: timeline.contentEvents,
      counted_tokens: timeline.countedTokens,
      server_timings: timeline.serverTimings ?? null,
      accelerator_seconds: Number.isNaN(acceleratorSeconds) ? undefined : acceleratorSeconds,
      error: this.failureDetail,
      retried: this.wasRetried ? true : undefined,
      operation: operation === 'other' ? operation : undefined,
      // The last scraped value (no I/O here); null while the DCGM reading is unknown.
      gpu_memory_used_bytes: this.deps.gpuMemory === undefined ? undefined : (this.deps.gpuMemory.memoryUsedBytes() ?? null),
    });
  }
}

const MS_PER_S = 1000;

/** `http_status_class` values, made once: a label value built per request is a new string to hash every time. */
const STATUS_CLASSES = ['0xx', '1xx', '2xx', '3xx', '4xx', '5xx'];

/** "1xx".."5xx" by the hundreds of the status, or "none" when no status was sent (0). */
function statusClass(status: number): string {
  if (status === 0) return 'none';
  const hundreds = Math.floor(status / 100);
  return STATUS_CLASSES[hundreds] ?? `${hundreds}xx`;
}

function round(ms: number): number | null {
  return Number.isNaN(ms) ? null : Math.round(ms * 1000) / 1000;
}
