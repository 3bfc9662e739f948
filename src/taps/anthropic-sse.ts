import type { EventSourceMessage } from 'eventsource-parser';
import { isJsonText, nonEmptyString, parseEventObject } from './event-json.js';
import { SseEventTap } from './sse-event-tap.js';
import type { Tap, TapContext } from './tap.js';
import { cachedTokenCount, tokenCount } from './upstream-numbers.js';

/**
 * Anthropic Messages streams (`POST /v1/messages` with `stream: true`), as Anthropic, vLLM and
 * llama.cpp send them: typed SSE events. https://docs.anthropic.com/en/docs/build-with-claude/streaming
 *
 * Content-bearing: `content_block_delta` whose delta is a non-empty `text_delta.text`,
 * `thinking_delta.thinking` or `input_json_delta.partial_json` (tool input). Not content:
 * `message_start`, `ping`, `content_block_start`/`_stop`, `signature_delta` (a signature of the
 * thinking block, not generated text), the empty `partial_json` that opens a tool call. One token
 * per delta. A `thinking_delta` is reasoning; text and tool input are the answer.
 *
 * Usage: input tokens from `message_start.message.usage` (`input_tokens` plus the cache read and
 * creation tokens, which Anthropic reports apart: together they are the prompt the server
 * processed); output tokens from `message_delta.usage.output_tokens`, cumulative, whose last value
 * is the total. `message_start`'s own `output_tokens` (1 or so) is a placeholder and is ignored.
 * Prefix-cache hits: `cache_read_input_tokens` (tokens written to the cache were processed, not hit).
 * Terminal: `message_stop`. An `error` event (e.g. `overloaded_error`) is an upstream error, read
 * as the SDK reads it (@anthropic-ai/sdk core/streaming.ts): any event named `error`, whatever its
 * data, and also after `message_stop`, since the SDK reads the body to its end and throws there;
 * the other events after `message_stop` are ignored. So is a named event whose data is not JSON
 * (counted as `malformed_event` too): the SDK throws on it.
 */

interface Usage {
  input_tokens?: unknown;
  cache_creation_input_tokens?: unknown;
  cache_read_input_tokens?: unknown;
  output_tokens?: unknown;
}

interface AnthropicEvent {
  type?: unknown;
  message?: { usage?: Usage | null } | null;
  delta?: { type?: unknown; text?: unknown; thinking?: unknown; partial_json?: unknown } | null;
  usage?: Usage | null;
}

export function createAnthropicSseTap(context: TapContext): Tap {
  return new AnthropicSseTap(context);
}

class AnthropicSseTap extends SseEventTap {
  protected override onEvent(message: EventSourceMessage): void {
    // Skipped unparsed: nothing in them is measured.
    const named = message.event;
    if (named === 'ping' || named === 'content_block_start' || named === 'content_block_stop') return;
    // The SDK throws on any event named `error`, whatever its data says or whether it parses at all.
    if (named === 'error') {
      this.context.timeline.errorEvent = true;
      return;
    }
    const event = parseEventObject<AnthropicEvent>(message.data, this.context);
    if (event === undefined) {
      // The SDK JSON.parses the data of every named event but ping (an empty one skipped) and
      // rethrows the SyntaxError: its caller's stream failed there. An unnamed event it never reads.
      if (named !== undefined && message.data !== '' && !isJsonText(message.data)) this.context.timeline.errorEvent = true;
      return;
    }
    const timeline = this.context.timeline;
    switch (typeof event.type === 'string' ? event.type : named) {
      case 'content_block_delta':
        if (isContent(event.delta)) timeline.content(this.nowMs, 1, event.delta?.type === 'thinking_delta');
        return;
      case 'message_start': {
        const usage = event.message?.usage;
        if (usage != null && typeof usage === 'object') {
          const input = anthropicInputTokens(usage, this.context);
          timeline.usage(input, undefined, cachedTokenCount(usage.cache_read_input_tokens, input, this.context));
        }
        return;
      }
      case 'message_delta': {
        const usage = event.usage;
        if (usage != null && typeof usage === 'object') {
          const input = anthropicInputTokens(usage, this.context);
          timeline.usage(input, tokenCount(usage.output_tokens, this.context), cachedTokenCount(usage.cache_read_input_tokens, input, this.context));
        }
        return;
      }
      case 'message_stop':
        timeline.terminal = true;
        this.ended = true;
        return;
      case 'error':
        timeline.errorEvent = true;
        return;
    }
  }

  /** The SDK reads on after `message_stop` and throws on an `event: error` there. */
  protected override isErrorAfterEnd(message: EventSourceMessage): boolean {
    return message.event === 'error';
  }
}

function isContent(delta: AnthropicEvent['delta']): boolean {
  if (delta == null || typeof delta !== 'object') return false;
  switch (delta.type) {
    case 'text_delta':
      return nonEmptyString(delta.text);
    case 'thinking_delta':
      return nonEmptyString(delta.thinking);
    case 'input_json_delta':
      return nonEmptyString(delta.partial_json);
    default:
      return false;
  }
}

/**
 * The prompt the server processed: uncached plus cache-read plus cache-written tokens; undefined when
 * not reported. Also read by the JSON tap (openai-json.ts), so a non-streamed Messages answer counts
 * its input as the stream does; a usage without the cache fields (OpenAI Responses) is `input_tokens`.
 */
export function anthropicInputTokens(usage: Usage, context: TapContext): number | undefined {
  const input = tokenCount(usage.input_tokens, context);
  if (input === undefined) return undefined;
  // Each part within the bound, and their sum too: three parts near it would make three times it.
  return tokenCount(input + (tokenCount(usage.cache_creation_input_tokens, context) ?? 0) + (tokenCount(usage.cache_read_input_tokens, context) ?? 0), context);
}
