import type { EventSourceMessage } from 'eventsource-parser';
import { nonEmptyString, parseEventObject } from './event-json.js';
import { SseEventTap } from './sse-event-tap.js';
import type { Tap, TapContext } from './tap.js';
import { llamaCppCacheHits, llamaCppTimings } from './server-timings.js';
import { eventTokens, tokenCount } from './upstream-numbers.js';

/**
 * llama.cpp's native completion stream (`POST /completion` with `stream: true`): SSE `data:` events
 * `{"content", "tokens", "stop", "tokens_predicted", "tokens_evaluated", ...}`, with no `[DONE]`.
 * https://github.com/ggml-org/llama.cpp/blob/master/tools/server/README.md
 *
 * Content-bearing: a non-empty `content`. An event whose token is an incomplete UTF-8 sequence has
 * an empty `content` (llama.cpp holds the bytes back): not content, but its token is not lost,
 * because tokens per event come from the cumulative `tokens_predicted` (the next event carries 2).
 * Without `tokens_predicted`, one token per content event.
 * Terminal: `stop: true`, whose `tokens_predicted` and `tokens_evaluated` are the usage and whose
 * `timings` (`prompt_ms`, `predicted_ms`) become the server timings and whose `timings.cache_n` the
 * prefix-cache hits. `{"error": ...}` is an upstream
 * error.
 */

interface LlamaCppEvent {
  content?: unknown;
  stop?: unknown;
  tokens_predicted?: unknown;
  tokens_evaluated?: unknown;
  timings?: { prompt_ms?: unknown; predicted_ms?: unknown; cache_n?: unknown } | null;
  error?: unknown;
}

export function createLlamaCppSseTap(context: TapContext): Tap {
  return new LlamaCppSseTap(context);
}

class LlamaCppSseTap extends SseEventTap {
  /** `tokens_predicted` as of the last event, to turn the cumulative count into per-event counts. */
  private predicted = 0;

  protected override onEvent(message: EventSourceMessage): void {
    const event = parseEventObject<LlamaCppEvent>(message.data, this.context);
    if (event === undefined) return;
    const timeline = this.context.timeline;
    if (event.error != null) {
      timeline.errorEvent = true;
      return;
    }
    const predicted = tokenCount(event.tokens_predicted, this.context);
    if (nonEmptyString(event.content)) {
      const tokens = predicted !== undefined && predicted > this.predicted ? eventTokens(predicted - this.predicted, 1, this.context) : 1;
      timeline.content(this.nowMs, tokens);
      // Advanced only by content events, so a held token is counted with the next one.
      if (predicted !== undefined) this.predicted = Math.max(this.predicted, predicted);
    }
    if (event.stop === true) {
      timeline.terminal = true;
      this.ended = true;
      const input = tokenCount(event.tokens_evaluated, this.context);
      timeline.usage(input, predicted, llamaCppCacheHits(event.timings, input, this.context));
      const timings = llamaCppTimings(event.timings, this.context);
      if (timings !== undefined) timeline.serverTimings = timings;
    }
  }
}
