import type { ServerTimings } from '../clock/token-timeline.js';
import type { TapContext } from './tap.js';
import { cachedTokenCount, durationMs } from './upstream-numbers.js';

/**
 * The per-request timings each engine reports, read the same way whether the answer was streamed
 * (the final event) or not (the JSON body): one reader per engine format, each value bounded by
 * upstream-numbers.ts. Which engine reports what is tabled in docs/engine-timings.md.
 */

const NS_TO_MS = 1e-6;

/** llama.cpp `timings` (OpenAI-compatible routes and native `/completion`): milliseconds, no queue time. */
export function llamaCppTimings(timings: unknown, context: TapContext): ServerTimings | undefined {
  if (timings === null || typeof timings !== 'object') return undefined;
  const t = timings as { prompt_ms?: unknown; predicted_ms?: unknown };
  return { promptMs: durationMs(t.prompt_ms, 1, context), generationMs: durationMs(t.predicted_ms, 1, context) };
}

/**
 * vLLM's per-request `metrics` (`--enable-per-request-metrics`): milliseconds;
 * `time_to_first_token_ms` runs from scheduling, so the queue is apart.
 */
export function vllmMetrics(metrics: unknown, context: TapContext): ServerTimings | undefined {
  if (metrics === null || typeof metrics !== 'object') return undefined;
  const m = metrics as { queue_time_ms?: unknown; time_to_first_token_ms?: unknown; generation_time_ms?: unknown };
  return {
    queueMs: durationMs(m.queue_time_ms, 1, context),
    promptMs: durationMs(m.time_to_first_token_ms, 1, context),
    generationMs: durationMs(m.generation_time_ms, 1, context),
  };
}

/** Ollama's `*_duration` fields on the final line or the JSON answer: nanoseconds, no queue time. */
export function ollamaTimings(answer: { load_duration?: unknown; prompt_eval_duration?: unknown; eval_duration?: unknown; total_duration?: unknown }, context: TapContext): ServerTimings {
  return {
    loadMs: durationMs(answer.load_duration, NS_TO_MS, context),
    promptMs: durationMs(answer.prompt_eval_duration, NS_TO_MS, context),
    generationMs: durationMs(answer.eval_duration, NS_TO_MS, context),
    totalMs: durationMs(answer.total_duration, NS_TO_MS, context),
  };
}

/**
 * llama.cpp's prefix-cache hits: `timings.cache_n`, the prompt tokens it reused from the slot's KV
 * cache (`result_timings::to_json` in ggml-org/llama.cpp tools/server/server-task.cpp; its
 * OpenAI-compatible usage repeats it as `prompt_tokens_details.cached_tokens`, which is read first).
 */
export function llamaCppCacheHits(timings: unknown, inputTokens: number | undefined, context: TapContext): number | undefined {
  if (timings === null || typeof timings !== 'object') return undefined;
  return cachedTokenCount((timings as { cache_n?: unknown }).cache_n, inputTokens, context);
}
