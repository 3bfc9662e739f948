import type { IncomingHttpHeaders } from 'node:http';
import type { RequestSummary } from '../metrics/recorder.js';

/**
 * Tracing as the request monitor sees it: one span per proxied request. Decided once at start-up:
 * without an OTLP traces endpoint the monitor holds NULL_TRACER, whose spans are one shared object
 * with empty methods, so an untraced request does no tracer call, no header work and no allocation
 * for tracing; and the monitor calls a span only at request start and end, never per chunk.
 */
export interface RequestTracer {
  /**
   * Starts the request's span at `startMs` (the monitor's clock), continuing the trace of the
   * client's `traceparent` if it sent one, and puts the span's own `traceparent` (and `tracestate`)
   * into `upstreamHeaders`, a flat [name, value, ...] list, replacing the client's.
   */
  start(method: string, path: string, startMs: number, headers: IncomingHttpHeaders, upstreamHeaders: string[]): RequestSpan;
}

export interface RequestSpan {
  /**
   * The request is over. Positional arguments, not an object, so the null span costs no allocation.
   * `status`: HTTP status sent to the client, 0 when none was. `requestedModel`: as the body named it,
   * unfolded (a span is not a series), undefined if it named none; `modelLabel`: its
   * gen_ai_request_model label value (ModelLabels: a served name, `other` or `unknown`), which names
   * the span. `goodput`: whether the request met
   * every SLO of its workload (tokentap_goodput_requests_total), undefined when the workload has none
   * or the request is not a generation.
   */
  end(summary: RequestSummary, status: number, workload: string, requestedModel: string | undefined, modelLabel: string, goodput: boolean | undefined): void;
}

export const NULL_SPAN: RequestSpan = Object.freeze({ end: () => undefined });

export const NULL_TRACER: RequestTracer = Object.freeze({ start: () => NULL_SPAN });
