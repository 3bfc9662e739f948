import type { Attributes } from '@opentelemetry/api';
import type { Workload } from '../config/load.js';
import type { Outcome, Recorder } from '../metrics/recorder.js';

/**
 * What one finished request contributes to its workload's SLOs (`tokentap_slo_events_total`).
 *
 * Every comparison is `value <= threshold` in seconds, computed exactly as the recorder computes the
 * histogram sample (milliseconds / 1000), so an event count always equals what the histogram's
 * `bucket{le="<threshold>"}` says for the same requests: bucket bounds are inclusive in OpenTelemetry
 * and Prometheus alike, and every threshold is a bucket boundary (config/load.ts inserts it).
 *
 * Rules (also in the README):
 * - Client errors (outcome `client_error`: HTTP 4xx other than 408, 429 and 499, or a request tokentap
 *   could not parse) produce no TTFT or e2e event: the request was refused for what it asked, not
 *   served slowly. 408, 429 (overloaded) and 499 count like any failure.
 * - TTFT, one event per request at most, measured to the first token of any kind, or with the
 *   workload's `ttft_on: first_answer` to the first answer token (reasoning excluded):
 *   - a first token arrived: good when it came within the threshold, bad otherwise, whatever happened later;
 *   - no first token because the server side failed (upstream_error, truncated, timeout, shutdown):
 *     bad at any duration. The user got nothing; a server that fails fast (a 503 in 10 ms) must burn
 *     the TTFT budget too, or a workload with only a TTFT SLO would never page while every request fails;
 *   - no first token and the client left (client_cancelled) after waiting longer than the threshold:
 *     bad. The user gave up because it was slow; dropping these would hide the worst requests
 *     (DESIGN.md section 2). Sooner than the threshold: no event (it was not yet late);
 *   - a successful response that is not a stream (JSON), or a stream that completed without any
 *     token: no event, since TTFT does not apply;
 *   - with `first_answer`, a stream that completed with reasoning tokens but no answer token: bad
 *     (the user waited and got no answer).
 * - e2e, one event per request: completed is good within the threshold and bad beyond it;
 *   upstream_error, truncated, timeout and shutdown (cut by the sidecar's own drain deadline) are
 *   bad at any duration (the user got no full answer);
 *   client_cancelled is bad when the client had already waited longer than the threshold and no
 *   event when it left sooner (a client that stops a fast answer says nothing about the service).
 * - ITL, one event per token: a token is good when its per-token gap (the gap before its content
 *   event divided by the tokens in that event, the `tokentap_inter_token_latency_seconds` sample) is
 *   within the threshold. The first token has no gap and no ITL event. Tokens of a request that ends
 *   badly still count: each of them reached the client with the gap it had.
 */
export type SloResult = 'good' | 'bad';

/** The facts about a finished request the SLO rules need. */
export interface FinishedRequestFacts {
  readonly outcome: Outcome;
  /** HTTP status sent to the client; 0 when none was. */
  readonly status: number;
  /** A 2xx response the proxy recognised as not a stream (TTFT does not apply). */
  readonly nonStreamedAnswer: boolean;
  /** To the token the workload's `ttft_on` names; NaN when no such token arrived. */
  readonly ttftMs: number;
  /** With `ttft_on: first_answer`: tokens (reasoning) arrived but no answer token did. */
  readonly unanswered?: boolean;
  readonly e2eMs: number;
  /**
   * The client had not sent its whole request (its body, or a gRPC stream's first message) when the
   * request ended. A client that leaves then was waiting on itself: the server never had the
   * request to answer, so its leaving is no sign of slowness (judged only with `client_cancelled`).
   */
  readonly requestUnsent?: boolean;
}

const MS_PER_S = 1000;

/**
 * HTTP 4xx other than 408 (the server timed the request out), 429 (overloaded) and 499 (nginx's and
 * some servers' "client closed"): refused for what the request asked, the client's fault.
 */
export function isClientErrorStatus(status: number): boolean {
  return status >= 400 && status < 500 && status !== 408 && status !== 429 && status !== 499;
}

export function ttftResult(thresholdS: number, facts: FinishedRequestFacts): SloResult | undefined {
  if (facts.outcome === 'client_error' || isClientErrorStatus(facts.status)) return undefined;
  if (!Number.isNaN(facts.ttftMs)) return facts.ttftMs / MS_PER_S <= thresholdS ? 'good' : 'bad';
  if (facts.outcome === 'completed' && facts.unanswered === true) return 'bad';
  if (facts.outcome === 'completed' || facts.nonStreamedAnswer) return undefined;
  if (facts.outcome !== 'client_cancelled') return 'bad';
  if (facts.requestUnsent === true) return undefined;
  return facts.e2eMs / MS_PER_S > thresholdS ? 'bad' : undefined;
}

export function e2eResult(thresholdS: number, facts: FinishedRequestFacts): SloResult | undefined {
  if (facts.outcome === 'client_error' || isClientErrorStatus(facts.status)) return undefined;
  const withinS = facts.e2eMs / MS_PER_S <= thresholdS;
  switch (facts.outcome) {
    case 'completed':
      return withinS ? 'good' : 'bad';
    case 'client_cancelled':
      return withinS || facts.requestUnsent === true ? undefined : 'bad';
    default:
      return 'bad';
  }
}

/** True when the `tokens` tokens of one content event, `gapMs` after the previous one, are each too slow. */
export function interTokenIsBad(thresholdS: number, gapMs: number, tokens: number): boolean {
  return gapMs / MS_PER_S / tokens > thresholdS;
}

/**
 * Records the request's events for every SLO its workload defines. `itlTokens` and `itlBadTokens`
 * are tallied by the request monitor as tokens arrive (two additions per content event), so the
 * counter is touched once per request, not once per token.
 */
export function recordSloEvents(
  recorder: Recorder,
  attributes: Attributes,
  workload: Workload,
  facts: FinishedRequestFacts,
  itlTokens: number,
  itlBadTokens: number,
): void {
  const slo = workload.slo;
  if (slo === undefined) return;
  const { ttft, e2e, itl } = slo.thresholdsS;
  if (ttft !== undefined) {
    const result = ttftResult(ttft, facts);
    if (result !== undefined) recorder.sloEvents(attributes, 'ttft', result === 'good' ? 1 : 0, result === 'bad' ? 1 : 0);
  }
  if (e2e !== undefined) {
    const result = e2eResult(e2e, facts);
    if (result !== undefined) recorder.sloEvents(attributes, 'e2e', result === 'good' ? 1 : 0, result === 'bad' ? 1 : 0);
  }
  if (itl !== undefined && itlTokens > 0) {
    recorder.sloEvents(attributes, 'itl', itlTokens - itlBadTokens, itlBadTokens);
    recorder.itlSlowRequest(attributes, itlBadTokens > 0);
  }
}
