import type { EventSourceMessage } from 'eventsource-parser';
import { isJsonText, parseEventObject } from './event-json.js';
import { SseEventTap } from './sse-event-tap.js';
import type { Tap, TapContext } from './tap.js';
import { tokenCount } from './upstream-numbers.js';

/**
 * Hugging Face Text Generation Inference native streams (`POST /generate_stream`): one SSE `data:`
 * event per generated token, `{"index", "token": {id, text, logprob, special}, "generated_text",
 * "details", "top_tokens"}`, with `:` keep-alive comment lines between them.
 * https://huggingface.github.io/text-generation-inference/ (StreamResponse)
 *
 * Content-bearing: a token event whose token is not `special`. A special token (the end-of-sequence
 * token that closes most streams) is counted as a generated token, so the count can match the
 * server's, but it is not content and does not move TTFT or ITL.
 * Terminal: the last event, with `generated_text` set (and `details` when the request asked for
 * them: `details.generated_tokens` and, since TGI 2.x, `details.input_length` are the usage).
 * `{"error": ..., "error_type": ...}` is an upstream error, and so is an event whose data is not JSON:
 * huggingface_hub's client raises on both, wherever they come (it reads the body to its end).
 */

interface TgiEvent {
  token?: { special?: unknown } | null;
  generated_text?: unknown;
  details?: { generated_tokens?: unknown; input_length?: unknown } | null;
  error?: unknown;
}

export function createTgiSseTap(context: TapContext): Tap {
  return new TgiSseTap(context);
}

class TgiSseTap extends SseEventTap {
  protected override onEvent(message: EventSourceMessage): void {
    const event = parseEventObject<TgiEvent>(message.data, this.context);
    if (event === undefined) {
      // huggingface_hub's InferenceClient json.loads every `data:` line but `[DONE]` and raises on
      // failure (inference/_common.py _format_text_generation_stream_output): its caller's stream failed.
      if (!message.data.startsWith('[DONE]') && !isJsonText(message.data)) this.context.timeline.errorEvent = true;
      return;
    }
    const timeline = this.context.timeline;
    if (event.error != null) {
      timeline.errorEvent = true;
      return;
    }
    const token = event.token;
    if (token != null && typeof token === 'object') {
      if (token.special === true) timeline.contentlessTokens(1);
      else timeline.content(this.nowMs, 1);
    }
    if (event.generated_text != null || event.details != null) {
      timeline.terminal = true;
      const details = event.details;
      if (details != null && typeof details === 'object') {
        timeline.usage(tokenCount(details.input_length, this.context), tokenCount(details.generated_tokens, this.context));
      }
    }
  }
}
