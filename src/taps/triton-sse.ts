import type { EventSourceMessage } from 'eventsource-parser';
import { nonEmptyString, parseEventObject } from './event-json.js';
import { SseEventTap } from './sse-event-tap.js';
import type { Tap, TapContext } from './tap.js';

/**
 * NVIDIA Triton's generate extension, streaming (`POST /v2/models/{model}[/versions/{v}]/generate_stream`):
 * SSE `data:` events, one JSON object per response of the model, whose output tensors appear as
 * fields; TensorRT-LLM and vLLM backends name the text `text_output`.
 * https://github.com/triton-inference-server/server/blob/main/docs/protocol/extension_generate.md
 *
 * Content-bearing: a non-empty `text_output`; one token per event (no counts on the wire).
 * Terminal: the protocol has no terminal event, the stream just ends, so a clean end of the body
 * is the terminal event (a reset is still an upstream error, seen by the proxy). `{"error": ...}`
 * is an upstream error.
 */

interface TritonEvent {
  text_output?: unknown;
  error?: unknown;
}

export function createTritonSseTap(context: TapContext): Tap {
  return new TritonSseTap(context);
}

class TritonSseTap extends SseEventTap {
  /** The protocol has no terminal event: a clean end of the body is it, after the events it completes. */
  override end(nowMs: number): void {
    super.end(nowMs);
    this.context.timeline.terminal = true;
  }

  protected override onEvent(message: EventSourceMessage): void {
    const event = parseEventObject<TritonEvent>(message.data, this.context);
    if (event === undefined) return;
    if (event.error != null) {
      this.context.timeline.errorEvent = true;
      return;
    }
    if (nonEmptyString(event.text_output)) this.context.timeline.content(this.nowMs, 1);
  }
}
