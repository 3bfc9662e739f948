import type { EventSourceMessage } from 'eventsource-parser';
import { isJsonText, nonEmptyString, parseEventObject } from './event-json.js';
import { SseEventTap } from './sse-event-tap.js';
import type { Tap, TapContext } from './tap.js';
import { detailsCachedTokens, tokenCount } from './upstream-numbers.js';

/**
 * OpenAI Responses API streams (`POST /v1/responses` with `stream: true`), as OpenAI and vLLM send
 * them: typed SSE events, `event: <type>` plus a JSON `data` whose `type` repeats it.
 * https://platform.openai.com/docs/api-reference/responses-streaming
 *
 * Content-bearing: every `*.delta` event with a non-empty `delta`: `response.output_text.delta`,
 * `response.reasoning_text.delta`, `response.reasoning_summary_text.delta`,
 * `response.function_call_arguments.delta`, `response.refusal.delta` and the other tool deltas.
 * Not content: `response.created`, `response.in_progress`, `*.added`, `*.done` and the rest of the
 * lifecycle. One token per delta (the stream carries no per-delta counts). The reasoning deltas
 * (`response.reasoning_text.delta`, `response.reasoning_summary_text.delta`) are reasoning; every
 * other delta (text, refusal, tool arguments) is the answer.
 *
 * Terminal: `response.completed` (and `response.incomplete`, a normal end at max_output_tokens),
 * both carrying `response.usage` {input_tokens, output_tokens, input_tokens_details.cached_tokens (prefix-cache hits)}. `response.failed`, `error`,
 * any event whose data has a truthy `error` and any read event whose data is not JSON (the SDK
 * throws on both) are upstream errors.
 *
 * Events the tap does not need (the `*.done` events repeat the whole text) are skipped by their
 * `event:` name without parsing their JSON.
 */

interface ResponsesEvent {
  type?: unknown;
  delta?: unknown;
  error?: unknown;
  response?: { usage?: { input_tokens?: unknown; output_tokens?: unknown; input_tokens_details?: unknown } | null } | null;
}

export function createOpenAIResponsesSseTap(context: TapContext): Tap {
  return new OpenAIResponsesSseTap(context);
}

class OpenAIResponsesSseTap extends SseEventTap {
  protected override onEvent(message: EventSourceMessage): void {
    if (message.event !== undefined && !isObserved(message.event)) return;
    const event = parseEventObject<ResponsesEvent>(message.data, this.context);
    if (event === undefined) {
      // The SDK JSON.parses every event's data and rethrows the SyntaxError, but for `[DONE]`, after
      // which it reads nothing more (openai core/streaming.ts): its caller's stream failed there.
      const data = message.data;
      if (!data.startsWith('[DONE]') && !isJsonText(data)) this.context.timeline.errorEvent = true;
      return;
    }
    const timeline = this.context.timeline;
    // The SDK throws an APIError on any event whose data has a truthy `error`, whatever its type or
    // name (openai core/streaming.ts `if (data && data.error)`): its caller got an error.
    if (event.error) {
      timeline.errorEvent = true;
      return;
    }
    const type = typeof event.type === 'string' ? event.type : message.event;
    if (type === undefined) return;
    if (type.endsWith('.delta')) {
      if (nonEmptyString(event.delta)) timeline.content(this.nowMs, 1, isReasoning(type));
      return;
    }
    switch (type) {
      case 'response.completed':
      case 'response.incomplete': {
        timeline.terminal = true;
        const usage = event.response?.usage;
        if (usage != null && typeof usage === 'object') {
          const input = tokenCount(usage.input_tokens, this.context);
          timeline.usage(input, tokenCount(usage.output_tokens, this.context), detailsCachedTokens(usage.input_tokens_details, input, this.context));
        }
        return;
      }
      case 'response.failed':
      case 'error':
        timeline.errorEvent = true;
        return;
    }
  }
}

function isReasoning(type: string): boolean {
  return type === 'response.reasoning_text.delta' || type === 'response.reasoning_summary_text.delta';
}

function isObserved(type: string): boolean {
  return (
    type.endsWith('.delta') ||
    type === 'response.completed' ||
    type === 'response.incomplete' ||
    type === 'response.failed' ||
    type === 'error'
  );
}
