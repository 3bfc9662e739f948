import type { IncomingHttpHeaders } from 'node:http';
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, defaultTextMapGetter, trace, type Attributes, type Span, type TextMapSetter, type Tracer } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { ATTR_ERROR_TYPE, ATTR_HTTP_REQUEST_METHOD, ATTR_HTTP_RESPONSE_STATUS_CODE, ATTR_SERVER_ADDRESS, ATTR_SERVER_PORT, ATTR_URL_PATH } from '@opentelemetry/semantic-conventions';
import {
  ATTR_GEN_AI_OPERATION_NAME,
  ATTR_GEN_AI_REQUEST_MODEL,
  ATTR_GEN_AI_USAGE_INPUT_TOKENS,
  ATTR_GEN_AI_USAGE_OUTPUT_TOKENS,
} from '@opentelemetry/semantic-conventions/incubating';
import type { Clock } from '../clock/clock.js';
import { genAiOperation } from './genai-operation.js';
import type { RequestSummary } from '../metrics/recorder.js';
import { MAX_MODEL_NAME_LENGTH } from '../metrics/model-labels.js';
import { DISPLAY_CONTROLS } from '../text/display-controls.js';
import type { RequestSpan, RequestTracer } from './request-span.js';

/**
 * tokentap's own span attributes and events, beside the semantic-convention ones. The GenAI
 * conventions define TTFT and its parts as metrics only (gen_ai.server.time_to_first_token), not as
 * span attributes, so the per-request values live under `tokentap.`, in seconds like the metrics.
 * Each is set only when the request has the value (the same rule as the metric's samples:
 * docs/engine-timings.md).
 */
export const SPAN_ATTR = {
  workload: 'tokentap.workload',
  outcome: 'tokentap.outcome',
  tokenSource: 'tokentap.token_source',
  ttftS: 'tokentap.ttft_s',
  /** Time to the first answer (non-reasoning) token: tokentap_time_to_first_answer_token_seconds. */
  ttftAnswerS: 'tokentap.ttft_answer_s',
  e2eS: 'tokentap.e2e_s',
  /** The engine's own TTFT, queue and prefill, as it reported them: tokentap_engine_*. */
  engineTtftS: 'tokentap.engine.ttft_s',
  engineQueueS: 'tokentap.engine.queue_s',
  enginePrefillS: 'tokentap.engine.prefill_s',
  /** Wire TTFT - engine TTFT, for an engine that reports its queue (vLLM): tokentap_outside_engine_*. */
  outsideEngineTtftS: 'tokentap.outside_engine.ttft_s',
  /** The same for an engine that reports no queue (llama.cpp, Ollama): tokentap_queue_or_outside_engine_*. */
  queueOrOutsideEngineTtftS: 'tokentap.queue_or_outside_engine.ttft_s',
  /** The request met every SLO of its workload (one of tokentap_goodput_requests_total); absent without an SLO. */
  goodput: 'tokentap.goodput',
} as const;
export const SPAN_EVENT = { firstToken: 'tokentap.first_token', firstAnswerToken: 'tokentap.first_answer_token', end: 'tokentap.end' } as const;

const propagator = new W3CTraceContextPropagator();

/** Appends to a flat [name, value, ...] header list, the shape the proxy forwards upstream. */
const flatHeaderSetter: TextMapSetter<string[]> = {
  set: (carrier, key, value) => void carrier.push(key, value),
};

/**
 * One span per request, SpanKind CLIENT: the GenAI semantic conventions model an inference call as
 * a CLIENT span from whoever calls the model server, and this span is exactly that call as the
 * sidecar makes it (it is the parent the upstream sees in `traceparent`). A SERVER span would
 * instead claim tokentap serves the request, and vLLM's own server span would then have a SERVER
 * parent with no client between them.
 *
 * Times are epoch milliseconds anchored once (wall clock at construction, monotonic deltas after,
 * as pino's lib/time.js does), so the span's start, first-token event and end agree with the
 * metrics to the microsecond and a wall-clock step cannot reorder them.
 */
export class OtelRequestTracer implements RequestTracer {
  private readonly tracer: Tracer;
  private readonly epochOffsetMs: number;
  private readonly server: Attributes;

  constructor(tracer: Tracer, clock: Clock, upstream: URL) {
    this.tracer = tracer;
    this.epochOffsetMs = Date.now() - clock.nowMs();
    this.server = Object.freeze({
      [ATTR_SERVER_ADDRESS]: upstream.hostname,
      [ATTR_SERVER_PORT]: upstream.port === '' ? 80 : Number(upstream.port),
    });
  }

  start(method: string, path: string, startMs: number, headers: IncomingHttpHeaders, upstreamHeaders: string[]): RequestSpan {
    const parent = propagator.extract(ROOT_CONTEXT, headers, defaultTextMapGetter);
    const operation = genAiOperation(path);
    const attributes: Attributes = { ...this.server, [ATTR_HTTP_REQUEST_METHOD]: method, [ATTR_URL_PATH]: path };
    if (operation !== undefined) attributes[ATTR_GEN_AI_OPERATION_NAME] = operation;
    const span = this.tracer.startSpan(operation ?? method, { kind: SpanKind.CLIENT, startTime: this.epochOffsetMs + startMs, attributes }, parent);
    removeTraceHeaders(upstreamHeaders);
    propagator.inject(trace.setSpan(parent, span), upstreamHeaders, flatHeaderSetter);
    return new OtelRequestSpan(span, operation, this.epochOffsetMs + startMs);
  }
}

class OtelRequestSpan implements RequestSpan {
  constructor(
    private readonly span: Span,
    private readonly operation: string | undefined,
    private readonly startEpochMs: number,
  ) {}

  end(summary: RequestSummary, status: number, workload: string, requestedModel: string | undefined, modelLabel: string, goodput: boolean | undefined): void {
    const span = this.span;
    const endEpochMs = this.startEpochMs + summary.e2eMs;
    // GenAI span name: "{gen_ai.operation.name} {gen_ai.request.model}", with the model's label value
    // (a served name or `other`), not the body's word: a span name SHOULD be "the most general string
    // that identifies a (statistically) interesting class of Spans" (OTel trace API, Span), and trace
    // backends index it (Jaeger's operations, Tempo's span-metrics `span_name` label), so 10,000
    // made-up model names gave 10,000 span names. The attribute keeps the name as sent.
    const model = requestedModel === undefined ? undefined : spanModelName(requestedModel);
    if (this.operation !== undefined && model !== undefined) span.updateName(`${this.operation} ${modelLabel}`);
    const attributes: Attributes = {
      [SPAN_ATTR.workload]: workload,
      [SPAN_ATTR.outcome]: summary.outcome,
      [SPAN_ATTR.tokenSource]: summary.tokenSource,
      [SPAN_ATTR.e2eS]: summary.e2eMs / 1000,
      [ATTR_GEN_AI_USAGE_OUTPUT_TOKENS]: summary.outputTokens,
    };
    if (model !== undefined) attributes[ATTR_GEN_AI_REQUEST_MODEL] = model;
    if (!Number.isNaN(summary.inputTokens)) attributes[ATTR_GEN_AI_USAGE_INPUT_TOKENS] = summary.inputTokens;
    if (status !== 0) attributes[ATTR_HTTP_RESPONSE_STATUS_CODE] = status;
    if (!Number.isNaN(summary.ttftMs)) {
      attributes[SPAN_ATTR.ttftS] = summary.ttftMs / 1000;
      span.addEvent(SPAN_EVENT.firstToken, { [SPAN_ATTR.ttftS]: summary.ttftMs / 1000 }, this.startEpochMs + summary.ttftMs);
    }
    const answerMs = summary.ttftAnswerMs;
    if (answerMs !== undefined && !Number.isNaN(answerMs)) {
      attributes[SPAN_ATTR.ttftAnswerS] = answerMs / 1000;
      // Its own event only when reasoning came first; otherwise it is the first-token event.
      if (answerMs !== summary.ttftMs) span.addEvent(SPAN_EVENT.firstAnswerToken, { [SPAN_ATTR.ttftAnswerS]: answerMs / 1000 }, this.startEpochMs + answerMs);
    }
    setSeconds(attributes, SPAN_ATTR.engineTtftS, summary.engineTtftMs);
    setSeconds(attributes, SPAN_ATTR.engineQueueS, summary.engineQueueMs);
    setSeconds(attributes, SPAN_ATTR.enginePrefillS, summary.enginePrefillMs);
    setSeconds(attributes, SPAN_ATTR.outsideEngineTtftS, summary.outsideEngineTtftMs);
    setSeconds(attributes, SPAN_ATTR.queueOrOutsideEngineTtftS, summary.queueOrOutsideEngineTtftMs);
    if (goodput !== undefined) attributes[SPAN_ATTR.goodput] = goodput;
    if (summary.outcome !== 'completed') {
      attributes[ATTR_ERROR_TYPE] = summary.outcome;
      span.setStatus({ code: SpanStatusCode.ERROR, message: summary.outcome });
    }
    span.setAttributes(attributes);
    span.addEvent(SPAN_EVENT.end, { [SPAN_ATTR.outcome]: summary.outcome, [ATTR_GEN_AI_USAGE_OUTPUT_TOKENS]: summary.outputTokens }, endEpochMs);
    span.end(endEpochMs);
  }
}

/** Sets `key` to `ms` in seconds when it is known (present and not NaN). */
function setSeconds(attributes: Attributes, key: string, ms: number | undefined): void {
  if (ms !== undefined && !Number.isNaN(ms)) attributes[key] = ms / 1000;
}

/** Drops the client's traceparent and tracestate: the upstream's parent is this span, not the client's. */
function removeTraceHeaders(flat: string[]): void {
  let kept = 0;
  for (let i = 0; i < flat.length; i += 2) {
    const name = (flat[i] as string).toLowerCase();
    if (name === 'traceparent' || name === 'tracestate') continue;
    flat[kept] = flat[i] as string;
    flat[kept + 1] = flat[i + 1] as string;
    kept += 2;
  }
  flat.length = kept;
}

/**
 * The model as the client named it, fit for the `gen_ai.request.model` attribute: a span is not a
 * series, so it is not folded into `other`, but the client wrote it (up to the 1 MiB body), and a
 * span goes to a backend whose UI shows it raw. Display controls (bidirectional ones included)
 * become `?` and past MAX_MODEL_NAME_LENGTH it is cut, marked `…`.
 */
function spanModelName(requested: string): string {
  // Cut before the scan (each display control is one UTF-16 unit, so `?` keeps the length): a 1 MB name is not copied whole.
  const printable = requested.slice(0, MAX_MODEL_NAME_LENGTH).replace(DISPLAY_CONTROLS, '?');
  return requested.length > MAX_MODEL_NAME_LENGTH ? `${printable}…` : printable;
}
