import type { EventSourceMessage } from 'eventsource-parser';
import { nonEmptyString } from './event-json.js';
import { isPlainContentChunk } from './plain-content-event.js';
import { SseEventTap } from './sse-event-tap.js';
import { llamaCppCacheHits, llamaCppTimings, vllmMetrics } from './server-timings.js';
import type { Tap, TapContext } from './tap.js';
import { detailsCachedTokens, eventTokens, MAX_TOKENS_PER_EVENT, tokenCount } from './upstream-numbers.js';

/**
 * OpenAI-compatible SSE (chat completions and completions), as vLLM, llama.cpp, SGLang and TGI's
 * OpenAI route stream it: `data: {chunk}` events, then `data: [DONE]`.
 *
 * Content-bearing (DESIGN.md section 2): a non-empty `delta.content`, `delta.reasoning_content` (or
 * vLLM's newer `delta.reasoning`), a non-empty `delta.tool_calls`, or a non-empty completions
 * `text`. Not content: the role-only prelude (`{"role":"assistant","content":""}`), empty deltas,
 * the finish chunk, the usage-only chunk, comments.
 *
 * Tokens per event: the delta of a cumulative count when the server reports one per chunk (vLLM
 * `continuous_usage_stats` usage, llama.cpp `timings.predicted_n`), else one per content-bearing
 * choice; the cumulative count advances only at content events, so growth on an empty delta is
 * counted with the next content event. The end-of-stream usage (when present) replaces the counted
 * total for output tokens. Events after `[DONE]` are ignored (sse-event-tap.ts).
 *
 * Answer versus reasoning: an event whose content-bearing choices carry only
 * `reasoning_content`/`reasoning` is reasoning; `content`, `tool_calls` or `text` make it an answer
 * (the time to first answer token).
 *
 * Engine timings, read from the final chunks only, never per token: vLLM's per-request `metrics`
 * (`--enable-per-request-metrics`, on the final usage chunk: `queue_time_ms`,
 * `time_to_first_token_ms` from scheduling to first token, `generation_time_ms`; vLLM
 * `build_per_request_timing_metrics` in vllm/entrypoints/openai/engine/serving.py), and llama.cpp's
 * `timings` (`prompt_ms`, `predicted_ms`) on the chunk that carries the finish reason or the usage
 * (with `timings_per_token` every chunk has a cumulative one; the final one is the whole request's).
 * Every count and duration is bounded on the way in (upstream-numbers.ts).
 *
 * Prefix-cache hits: `usage.prompt_tokens_details.cached_tokens` (vLLM with
 * `--enable-prompt-tokens-details`, SGLang with `--enable-cache-report`, llama.cpp), else llama.cpp's
 * `timings.cache_n` on the final chunk; never more than the `prompt_tokens` of the same usage.
 *
 * Framing, split chunks and the event size cap: see sse-decoder.ts.
 */

interface Delta {
  content?: unknown;
  reasoning_content?: unknown;
  reasoning?: unknown;
  tool_calls?: unknown;
}

interface Choice {
  index?: unknown;
  delta?: Delta | null;
  text?: unknown;
  finish_reason?: unknown;
}

interface Chunk {
  choices?: Choice[] | null;
  usage?: { prompt_tokens?: unknown; completion_tokens?: unknown; prompt_tokens_details?: unknown } | null;
  timings?: { predicted_n?: unknown; prompt_ms?: unknown; predicted_ms?: unknown; cache_n?: unknown } | null;
  metrics?: { queue_time_ms?: unknown; time_to_first_token_ms?: unknown; generation_time_ms?: unknown } | null;
  error?: unknown;
  object?: unknown;
}

/** Choice indices tracked for completion; a larger or malformed index counts as choice 0. */
const MAX_CHOICES = 256;

export function createOpenAISseTap(context: TapContext): Tap {
  return new OpenAISseTap(context);
}

class OpenAISseTap extends SseEventTap {
  /** Last cumulative output-token count reported per chunk, to turn it into per-event counts. */
  private cumulativeTokens = 0;
  /**
   * Per choice index seen: finished (a `finish_reason` came) or not. With `n` > 1 the stream is
   * complete only when every choice has finished: a client that leaves after the first choice's
   * finish_reason did not get the others, so that must not count as `completed`.
   */
  private readonly choiceFinished: boolean[] = [false];
  private openChoices = 1;

  /** Notes the choice as seen; true when this chunk finishes it (its first finish_reason). */
  private choiceEnded(choice: Choice): boolean {
    if (choice === null || typeof choice !== 'object') return false;
    const index = Number.isInteger(choice.index) && (choice.index as number) >= 0 && (choice.index as number) < MAX_CHOICES ? (choice.index as number) : 0;
    const state = this.choiceFinished[index];
    if (state === undefined) {
      this.choiceFinished[index] = false;
      this.openChoices++;
    }
    if (choice.finish_reason == null || state === true) return false;
    this.choiceFinished[index] = true;
    this.openChoices--;
    return true;
  }

  protected override onEvent(event: EventSourceMessage): void {
    const data = event.data;
    if (data === '[DONE]') {
      this.context.timeline.terminal = true;
      this.ended = true;
      return;
    }
    if (isPlainContentChunk(data)) {
      // The common token event, read without JSON.parse (plain-content-event.ts): one token.
      this.context.timeline.content(this.nowMs, 1);
      return;
    }
    let chunk: Chunk;
    try {
      chunk = JSON.parse(data) as Chunk;
    } catch {
      this.context.problem('malformed_event');
      return;
    }
    if (chunk === null || typeof chunk !== 'object') {
      this.context.problem('malformed_event');
      return;
    }
    const timeline = this.context.timeline;
    if (chunk.error !== undefined || chunk.object === 'error') {
      timeline.errorEvent = true;
      return;
    }

    let contentChoices = 0;
    let answerChoices = 0;
    let finished = false;
    const choices = chunk.choices;
    if (Array.isArray(choices)) {
      for (const choice of choices) {
        const kind = contentKind(choice);
        if (kind !== NOT_CONTENT) contentChoices++;
        if (kind === ANSWER) answerChoices++;
        if (this.choiceEnded(choice)) finished = true;
      }
    }
    if (finished && this.openChoices === 0) timeline.terminal = true;

    // Each upstream number is read once per chunk (an implausible one is counted once).
    const usage = chunk.usage;
    const hasUsage = usage != null && typeof usage === 'object';
    const usageOutput = hasUsage ? tokenCount(usage.completion_tokens, this.context) : undefined;
    // The per-chunk cumulative output count: vLLM continuous usage stats, else llama.cpp timings.
    const reported = usageOutput ?? (chunk.timings != null && typeof chunk.timings === 'object' ? tokenCount(chunk.timings.predicted_n, this.context) : undefined);
    // n > 1 puts one token per choice in an event; past the per-event bound the choices are counted
    // as implausible (40,000 choices in a 1 MB event were 40,000 per-token samples: security review).
    let tokens = contentChoices <= MAX_TOKENS_PER_EVENT ? contentChoices : eventTokens(contentChoices, MAX_TOKENS_PER_EVENT, this.context);
    if (reported !== undefined && contentChoices > 0) {
      // A cumulative count that grew with this event says how many tokens it carried. It advances
      // only at content events: vLLM's continuous_usage_stats also grows on an empty delta (a token
      // whose text is not complete yet, fixtures/streams/vllm/chat.sse), and that token is carried
      // to the next content event rather than lost.
      if (reported > this.cumulativeTokens) tokens = eventTokens(reported - this.cumulativeTokens, tokens, this.context);
      this.cumulativeTokens = Math.max(this.cumulativeTokens, reported);
    }
    if (contentChoices > 0) timeline.content(this.nowMs, tokens, answerChoices === 0);

    const final = finished || hasUsage;
    if (hasUsage) {
      const input = tokenCount(usage.prompt_tokens, this.context);
      timeline.usage(input, usageOutput, detailsCachedTokens(usage.prompt_tokens_details, input, this.context) ?? llamaCppCacheHits(chunk.timings, input, this.context));
    } else if (finished) {
      // llama.cpp without a usage chunk: its final timings still say how much of the prompt was cached.
      timeline.usage(undefined, undefined, llamaCppCacheHits(chunk.timings, undefined, this.context));
    }
    const timings = vllmMetrics(chunk.metrics, this.context) ?? (final ? llamaCppTimings(chunk.timings, this.context) : undefined);
    if (timings !== undefined) timeline.serverTimings = timings;
  }
}

const NOT_CONTENT = 0;
const REASONING = 1;
const ANSWER = 2;

/** NOT_CONTENT, REASONING (reasoning text only) or ANSWER (text, tool calls, completions text). */
function contentKind(choice: Choice): number {
  if (choice === null || typeof choice !== 'object') return NOT_CONTENT;
  const delta = choice.delta;
  if (delta != null && typeof delta === 'object') {
    if (nonEmptyString(delta.content)) return ANSWER;
    if (Array.isArray(delta.tool_calls) && delta.tool_calls.length > 0) return ANSWER;
    if (nonEmptyString(delta.reasoning_content) || nonEmptyString(delta.reasoning)) return REASONING;
  }
  return nonEmptyString(choice.text) ? ANSWER : NOT_CONTENT;
}
