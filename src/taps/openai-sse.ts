import type { EventSourceMessage } from 'eventsource-parser';
import { tokenCount } from './bounded-body.js';
import { nonEmptyString } from './event-json.js';
import { isPlainContentChunk } from './plain-content-event.js';
import { SseEventTap } from './sse-event-tap.js';
import type { Tap, TapContext } from './tap.js';

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
 * Framing, split chunks and the event size cap: see sse-decoder.ts.
 */

interface Delta {
  content?: unknown;
  reasoning_content?: unknown;
  reasoning?: unknown;
  tool_calls?: unknown;
}

interface Choice {
  delta?: Delta | null;
  text?: unknown;
  finish_reason?: unknown;
}

interface Chunk {
  choices?: Choice[] | null;
  usage?: { prompt_tokens?: unknown; completion_tokens?: unknown } | null;
  timings?: { predicted_n?: unknown } | null;
  error?: unknown;
  object?: unknown;
}

export function createOpenAISseTap(context: TapContext): Tap {
  return new OpenAISseTap(context);
}

class OpenAISseTap extends SseEventTap {
  /** Last cumulative output-token count reported per chunk, to turn it into per-event counts. */
  private cumulativeTokens = 0;

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
    const choices = chunk.choices;
    if (Array.isArray(choices)) {
      for (const choice of choices) {
        if (isContent(choice)) contentChoices++;
        if (choice.finish_reason != null) timeline.terminal = true;
      }
    }

    const reported = reportedCumulativeTokens(chunk);
    let tokens = contentChoices;
    if (reported !== undefined && contentChoices > 0) {
      // A cumulative count that grew with this event says how many tokens it carried. It advances
      // only at content events: vLLM's continuous_usage_stats also grows on an empty delta (a token
      // whose text is not complete yet, fixtures/streams/vllm/chat.sse), and that token is carried
      // to the next content event rather than lost.
      if (reported > this.cumulativeTokens) tokens = reported - this.cumulativeTokens;
      this.cumulativeTokens = Math.max(this.cumulativeTokens, reported);
    }
    if (contentChoices > 0) timeline.content(this.nowMs, tokens);

    const usage = chunk.usage;
    if (usage != null && typeof usage === 'object') {
      timeline.usage(tokenCount(usage.prompt_tokens), tokenCount(usage.completion_tokens));
    }
  }
}

function isContent(choice: Choice): boolean {
  if (choice === null || typeof choice !== 'object') return false;
  const delta = choice.delta;
  if (delta != null && typeof delta === 'object') {
    if (nonEmptyString(delta.content) || nonEmptyString(delta.reasoning_content) || nonEmptyString(delta.reasoning)) {
      return true;
    }
    if (Array.isArray(delta.tool_calls) && delta.tool_calls.length > 0) return true;
  }
  return nonEmptyString(choice.text);
}

/** The per-chunk cumulative output count: vLLM continuous usage stats, else llama.cpp timings. */
function reportedCumulativeTokens(chunk: Chunk): number | undefined {
  const fromUsage = chunk.usage != null ? tokenCount(chunk.usage.completion_tokens) : undefined;
  if (fromUsage !== undefined) return fromUsage;
  return chunk.timings != null ? tokenCount(chunk.timings.predicted_n) : undefined;
}
