import { nonEmptyString, parseEventObject } from './event-json.js';
import { NdjsonDecoder } from './ndjson-decoder.js';
import type { Tap, TapContext } from './tap.js';
import { ollamaTimings } from './server-timings.js';
import { tokenCount } from './upstream-numbers.js';

/**
 * Ollama native streams (`POST /api/chat` and `POST /api/generate`): newline-delimited JSON
 * (`application/x-ndjson`), one object per generated piece.
 * https://github.com/ollama/ollama/blob/main/docs/api.md
 *
 * Content-bearing: a non-empty `message.content`, `message.thinking` or `message.tool_calls`
 * (chat), or a non-empty `response` or `thinking` (generate). One token per line. A line with
 * only `thinking` is reasoning; content, tool calls and `response` are the answer.
 * Terminal: `done: true`, which carries the server's counts and durations: `eval_count` (output
 * tokens) and `prompt_eval_count` (input tokens) are the reported usage; `load_duration`,
 * `prompt_eval_duration`, `eval_duration` and `total_duration` (nanoseconds) become the request's
 * server timings; lines after it are ignored (counted once as `data_after_end`: the ollama client
 * stops reading there). A line `{"error": "..."}` before it is an upstream error.
 */

interface OllamaLine {
  message?: { content?: unknown; thinking?: unknown; tool_calls?: unknown } | null;
  response?: unknown;
  thinking?: unknown;
  done?: unknown;
  eval_count?: unknown;
  prompt_eval_count?: unknown;
  load_duration?: unknown;
  prompt_eval_duration?: unknown;
  eval_duration?: unknown;
  total_duration?: unknown;
  error?: unknown;
}

export function createOllamaNdjsonTap(context: TapContext): Tap {
  return new OllamaNdjsonTap(context);
}

class OllamaNdjsonTap implements Tap {
  private readonly context: TapContext;
  private readonly decoder: NdjsonDecoder;
  private nowMs = 0;
  /**
   * The `done: true` line was read. The ollama client returns from its stream there
   * (ollama-js AbortableAsyncIterator) and never reads a later line, so nothing after it (content,
   * a second usage, an error) is part of what the client got: ignored, counted once as `data_after_end`.
   */
  private ended = false;
  private afterEndCounted = false;

  constructor(context: TapContext) {
    this.context = context;
    this.decoder = new NdjsonDecoder(
      (line) => this.onLine(line),
      () => context.problem('oversized_event'),
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

  private onLine(text: string): void {
    if (this.ended) {
      if (!this.afterEndCounted) {
        this.afterEndCounted = true;
        this.context.problem('data_after_end');
      }
      return;
    }
    const line = parseEventObject<OllamaLine>(text, this.context);
    if (line === undefined) return;
    const timeline = this.context.timeline;
    if (line.error != null) {
      timeline.errorEvent = true;
      return;
    }
    const kind = contentKind(line);
    if (kind !== NOT_CONTENT) timeline.content(this.nowMs, 1, kind === REASONING);
    if (line.done === true) {
      this.ended = true;
      timeline.terminal = true;
      timeline.usage(tokenCount(line.prompt_eval_count, this.context), tokenCount(line.eval_count, this.context));
      timeline.serverTimings = ollamaTimings(line, this.context);
    }
  }
}

const NOT_CONTENT = 0;
const REASONING = 1;
const ANSWER = 2;

/** ANSWER for content, a tool call or a generate `response`; REASONING for `thinking` alone. */
function contentKind(line: OllamaLine): number {
  const message = line.message;
  if (message != null && typeof message === 'object') {
    if (nonEmptyString(message.content)) return ANSWER;
    if (Array.isArray(message.tool_calls) && message.tool_calls.length > 0) return ANSWER;
    if (nonEmptyString(message.thinking)) return REASONING;
  }
  if (nonEmptyString(line.response)) return ANSWER;
  return nonEmptyString(line.thinking) ? REASONING : NOT_CONTENT;
}
