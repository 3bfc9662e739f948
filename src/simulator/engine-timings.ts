import type { EngineDuration } from './options.js';
import type { Progress, ResponseContext } from './protocol.js';

/**
 * What the simulated engine reports of its own timing at the end of a generation, in
 * milliseconds: the configured values (`engineQueueMs`, `enginePrefillMs`, `engineLoadMs`), or
 * where `measured`, what the simulator's own clock says. The wire timing (`ttftMs`) is separate,
 * so a test can make the engine claim 150 ms of a 180 ms wire TTFT and check the 30 ms split.
 */
export interface ReportedTimings {
  readonly queueMs: number;
  /** Ollama's model load; measured: from the request to the response being opened. */
  readonly loadMs: number;
  /** Prefill to the first token; measured: from the request (after the queue and load) to it. */
  readonly prefillMs: number;
  /** First token to now. */
  readonly generationMs: number;
}

export function reportedTimings(context: ResponseContext, progress: Progress, openedMs: number, nowMs: number): ReportedTimings {
  const { behaviour } = context;
  const firstMs = progress.firstTokenMs ?? nowMs;
  const loadMs = orMeasured(behaviour.engineLoadMs, openedMs - context.startMs);
  const queueMs = behaviour.engineQueueMs;
  const prefillMs = orMeasured(behaviour.enginePrefillMs, Math.max(0, firstMs - context.startMs - queueMs));
  return { queueMs, loadMs, prefillMs, generationMs: nowMs - firstMs };
}

function orMeasured(configured: EngineDuration, measuredMs: number): number {
  return configured === 'measured' ? measuredMs : configured;
}

/**
 * vLLM's per-request `metrics` object, in PerRequestTimingMetrics' field order, as
 * build_per_request_timing_metrics (vllm/entrypoints/openai/engine/serving.py) derives it:
 * `time_to_first_token_ms` is scheduling to first token (the queue is apart), `mean_itl_ms`
 * needs more than one token and is then left out (the stream dumps with exclude_none).
 */
export function vllmRequestMetrics(timings: ReportedTimings, generatedTokens: number): Record<string, number> {
  const inferenceMs = timings.prefillMs + timings.generationMs;
  return {
    time_to_first_token_ms: timings.prefillMs,
    generation_time_ms: timings.generationMs,
    queue_time_ms: timings.queueMs,
    ...(generatedTokens > 1 ? { mean_itl_ms: timings.generationMs / (generatedTokens - 1) } : {}),
    ...(inferenceMs > 0 ? { tokens_per_second: (generatedTokens / inferenceMs) * 1000 } : {}),
  };
}
