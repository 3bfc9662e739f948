/**
 * One request's token timeline: the timestamps and counts from which every latency in DESIGN.md
 * section 2 is derived. Pure state driven by the tap and the proxy with times from an injected
 * clock, so a test can assert exact values.
 *
 * Inter-token gaps are reported live to the sink (one call per content event after the first), so a
 * long stream's ITL is visible while it runs; everything per-request is derived at the end.
 */
export interface InterTokenSink {
  /**
   * A content event arrived `gapMs` after the previous one and carried `tokens` tokens: one
   * per-chunk sample of `gapMs`, and `tokens` per-token samples of `gapMs / tokens`.
   */
  interToken(gapMs: number, tokens: number): void;
  /** The first content event arrived: once per request (accelerator time splits prefill from decode there). */
  firstToken?(nowMs: number): void;
}

import type { Outcome } from '../metrics/recorder.js';
import { MAX_TOKENS_PER_REQUEST } from '../taps/upstream-numbers.js';

export type TokenSource = 'usage' | 'counted';

/**
 * Durations the server measured itself and reported at the end of the stream (Ollama's
 * `*_duration` in nanoseconds, llama.cpp's `timings` and vLLM's per-request `metrics` in
 * milliseconds), in milliseconds, each within the bounds of taps/upstream-numbers.ts. Logged beside
 * tokentap's own measurements, and split out of the wire TTFT by engine-timings.ts: the gap between
 * the two is time outside the engine, plus the engine's queue when it does not report one.
 */
export interface ServerTimings {
  /** Waiting in the engine's queue before it was scheduled (vLLM `queue_time_ms`). */
  queueMs?: number;
  /** Loading the model before the request could run (Ollama `load_duration`). */
  loadMs?: number;
  /**
   * Prompt processing (prefill) up to the first token: llama.cpp `prompt_ms`, Ollama
   * `prompt_eval_duration`, vLLM `time_to_first_token_ms` (scheduled to first token, so without the queue).
   */
  promptMs?: number;
  /** Token generation (decode). */
  generationMs?: number;
  /** The whole request as the server saw it (Ollama `total_duration`). */
  totalMs?: number;
}

export class TokenTimeline {
  readonly startMs: number;
  /** NaN until it happened. */
  firstByteMs = Number.NaN;
  firstTokenMs = Number.NaN;
  /** The first answer token: content that is not reasoning (text, tool call). NaN until it happened. */
  firstAnswerMs = Number.NaN;
  lastTokenMs = Number.NaN;
  contentEvents = 0;
  countedTokens = 0;
  /** From the server's own usage report; NaN when it sent none. */
  reportedInputTokens = Number.NaN;
  reportedOutputTokens = Number.NaN;
  /** Prompt tokens the server served from its prefix cache, from its usage report; NaN when it sent none. */
  reportedCachedInputTokens = Number.NaN;
  /**
   * Content events claimed more tokens than MAX_TOKENS_PER_REQUEST (taps/upstream-numbers.ts): the
   * count stopped there, and each later event counts one per-token sample. Counted `implausible_value` once.
   */
  countedPastBound = false;
  /** A terminal event ([DONE], finish_reason...) was seen. */
  terminal = false;
  /** The stream itself reported an error (an error event in an otherwise 2xx stream). */
  errorEvent = false;
  /**
   * The outcome the protocol's own final status named when it was not success (gRPC's
   * `grpc-status` in the trailers: taps/grpc/grpc-status.ts); it decides the request's outcome over
   * the stream's events. Undefined for success and for protocols without such a status.
   */
  statusOutcome: Outcome | undefined;
  /** What the server reported of its own timing, when the protocol carries it. */
  serverTimings: ServerTimings | undefined;
  private readonly sink: InterTokenSink;

  constructor(startMs: number, sink: InterTokenSink) {
    this.startMs = startMs;
    this.sink = sink;
  }

  bytes(nowMs: number): void {
    if (Number.isNaN(this.firstByteMs)) this.firstByteMs = nowMs;
  }

  /**
   * A content-bearing event (text, reasoning or tool-call delta) carrying `tokens` tokens (>= 1);
   * `reasoning` when all it carries is reasoning (thinking) text, which is not yet the answer.
   */
  content(nowMs: number, tokens: number, reasoning = false): void {
    // Each event's count is bounded by its tap; the request's, here: events claiming 1,024 tokens
    // each (a Triton tensor shape of 25 bytes) would count past any real request.
    const room = MAX_TOKENS_PER_REQUEST - this.countedTokens;
    if (tokens > room) {
      this.countedPastBound = true;
      tokens = Math.max(1, room);
    }
    if (!reasoning && Number.isNaN(this.firstAnswerMs)) this.firstAnswerMs = nowMs;
    if (this.contentEvents === 0) {
      this.firstTokenMs = nowMs;
      this.sink.firstToken?.(nowMs);
    } else {
      this.sink.interToken(nowMs - this.lastTokenMs, tokens);
    }
    this.lastTokenMs = nowMs;
    this.contentEvents++;
    this.countedTokens = Math.min(MAX_TOKENS_PER_REQUEST, this.countedTokens + tokens);
  }

  /**
   * Generated tokens that carry no content (TGI's special end-of-sequence token): they count toward
   * the output, so the counted total can match the server's, but they are not a content event.
   */
  contentlessTokens(tokens: number): void {
    this.countedTokens = Math.min(MAX_TOKENS_PER_REQUEST, this.countedTokens + tokens);
  }

  /** Cumulative usage as reported by the server; later reports replace earlier ones. */
  usage(inputTokens: number | undefined, outputTokens: number | undefined, cachedInputTokens?: number): void {
    if (inputTokens !== undefined) this.reportedInputTokens = inputTokens;
    if (outputTokens !== undefined) this.reportedOutputTokens = outputTokens;
    if (cachedInputTokens !== undefined) this.reportedCachedInputTokens = cachedInputTokens;
  }

  /**
   * The cached share of the input, cached / input: NaN unless the server reported both, the input
   * above zero and the cached part within it (a report from separate events can disagree; a share
   * above 1 is no hit rate).
   */
  get cachedInputRatio(): number {
    const input = this.reportedInputTokens;
    const cached = this.reportedCachedInputTokens;
    return input > 0 && cached <= input ? cached / input : Number.NaN;
  }

  get ttfbMs(): number {
    return this.firstByteMs - this.startMs;
  }

  get ttftMs(): number {
    return this.firstTokenMs - this.startMs;
  }

  /** Time to the first answer token (reasoning excluded); NaN when no answer token was streamed. */
  get ttftAnswerMs(): number {
    return this.firstAnswerMs - this.startMs;
  }

  get outputTokenSource(): TokenSource {
    return Number.isNaN(this.reportedOutputTokens) ? 'counted' : 'usage';
  }

  get outputTokens(): number {
    return Number.isNaN(this.reportedOutputTokens) ? this.countedTokens : this.reportedOutputTokens;
  }

  /**
   * The stream carried more tokens than the server reports having generated: a disagreement no
   * healthy stream produces. Only judged when both exist: a stream with content events and a
   * usage report.
   *
   * Fewer counted tokens than reported is not a disagreement: a content event carries at least one
   * token but may carry several, and some tokens are never streamed as content. llama.cpp sends no
   * event for a token that ends inside a multi-byte UTF-8 character and puts it in the next one
   * (fixtures/streams/llamacpp/chat-completions-held-utf8-token.sse: 127 events, 128 tokens), vLLM
   * sends an empty delta for it (vllm/chat.sse), speculative decoding puts several tokens in one
   * chunk, Anthropic and OpenAI Responses chunk their deltas, reasoning can be hidden, and the
   * end-of-sequence token is counted without text. The counted total is therefore a lower bound of
   * the generated tokens (exact where the server reports per-chunk cumulative counts, which
   * `countedTokens` then follows), and only a report below it is wrong: a server whose usage
   * undercounts, or a stream with repeated or foreign events.
   */
  get tokenCountMismatch(): boolean {
    return this.contentEvents > 0 && !Number.isNaN(this.reportedOutputTokens) && this.countedTokens > this.reportedOutputTokens;
  }

  /**
   * TPOT as vLLM and the OTel semantic conventions define it: (last token - first token) /
   * (output tokens - 1). NaN for fewer than two tokens or when no token was streamed.
   */
  get tpotMs(): number {
    const tokens = this.outputTokens;
    if (this.contentEvents === 0 || tokens < 2) return Number.NaN;
    return (this.lastTokenMs - this.firstTokenMs) / (tokens - 1);
  }
}
