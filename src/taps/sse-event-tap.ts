import type { EventSourceMessage } from 'eventsource-parser';
import { SseDecoder } from './sse-decoder.js';
import type { Tap, TapContext } from './tap.js';

/**
 * What every SSE tap shares: the body goes through one SseDecoder (framing, split chunks and the
 * event size cap: see sse-decoder.ts), an oversized event is counted as a problem, and each decoded
 * event reaches the subclass's onEvent with the arrival time of the chunk that completed it in
 * `nowMs`. A subclass reads its protocol's events; one whose protocol has no terminal event
 * overrides end() to make the end of the body that event.
 *
 * The Ollama tap (ollama-ndjson.ts) wraps its NdjsonDecoder the same way but stays on its own: it
 * is the only NDJSON tap, and one base over both decoders would make the per-chunk decoder call
 * polymorphic on the hot path.
 */
export abstract class SseEventTap implements Tap {
  protected readonly context: TapContext;
  /** Arrival time of the chunk being decoded: every event completed by it happened then. */
  protected nowMs = 0;
  /**
   * Set by the subclass at its protocol's last event (`[DONE]`, `message_stop`, `stop: true`):
   * nothing after it is part of the answer, so later events are ignored, and counted once as
   * `data_after_end` (a server, or something between, appending to a finished stream).
   */
  protected ended = false;
  private afterEndCounted = false;
  private readonly decoder: SseDecoder;

  constructor(context: TapContext) {
    this.context = context;
    this.decoder = new SseDecoder(
      (event) => {
        if (this.ended) this.afterEnd(event);
        else this.onEvent(event);
      },
      () => context.problem('oversized_event'),
      undefined,
      () => {
        // llama.cpp's `error: {...}` line (sse-decoder.ts): the server failed the stream. After the
        // terminal event it is ignored like any event.
        if (!this.ended) context.timeline.errorEvent = true;
      },
    );
  }

  write(chunk: Buffer, nowMs: number): void {
    this.nowMs = nowMs;
    this.decoder.write(chunk);
  }

  end(nowMs: number): void {
    this.nowMs = nowMs;
    this.decoder.end();
  }

  private afterEnd(message: EventSourceMessage): void {
    if (!this.afterEndCounted) {
      this.afterEndCounted = true;
      this.context.problem('data_after_end');
    }
    if (this.isErrorAfterEnd(message)) this.context.timeline.errorEvent = true;
  }

  protected abstract onEvent(message: EventSourceMessage): void;

  /**
   * Whether an event after the terminal one is an error its client sees. Content and usage there are
   * ignored, but a client library that reads the body to its end fails on an error event there (the
   * Anthropic SDK throws on an `event: error` after `message_stop`), so the request did not complete
   * for it. False unless the protocol's clients read past its terminal event (the OpenAI SDK stops
   * reading at `[DONE]`).
   */
  protected isErrorAfterEnd(_message: EventSourceMessage): boolean {
    return false;
  }
}
