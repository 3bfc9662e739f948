import type { ServerTimings } from './token-timeline.js';

/**
 * Where one request's time to first token went, as far as its engine says: inside the engine (its
 * queue, a model load, the prefill), as the engine itself reported at the end of the stream, and
 * the rest of the wire TTFT tokentap measured. What the rest means depends on whether the engine
 * reports its queue time:
 *
 * - with a queue figure (vLLM `queue_time_ms`), the rest is outside the engine: tokenisation, the
 *   engine's HTTP server, anything between it and tokentap;
 * - without one (llama.cpp, Ollama), the rest also holds the time the request waited for a slot,
 *   which under load is most of it (llama.cpp, 2 slots and 8 concurrent streams: 1,809 of 1,844 ms),
 *   so it is kept apart as "queue or outside the engine", never called outside.
 *
 * NaN wherever the engine reported nothing to derive a value from: a request whose engine reports
 * nothing gets no sample, never a guessed one.
 */
export interface EngineSplit {
  /** Queue + model load + prefill, each where reported; NaN unless the prefill is reported. */
  readonly engineTtftMs: number;
  /** The engine's queue time (vLLM `queue_time_ms`); NaN when not reported. */
  readonly queueMs: number;
  /** The engine's prefill up to its first token; NaN when not reported. */
  readonly prefillMs: number;
  /**
   * Wire TTFT - engine TTFT when the engine reported its queue time; NaN otherwise, and NaN when
   * negative: the engine then claims more time than passed at the wire (it started its clock before
   * the request reached tokentap, or rounds differently), and a negative duration would be a wrong
   * sample, not a small one.
   */
  readonly outsideEngineTtftMs: number;
  /** Wire TTFT - engine TTFT when the engine reported no queue time (so the queue is in it); NaN otherwise, or when negative. */
  readonly queueOrOutsideEngineTtftMs: number;
}

export const NO_ENGINE_SPLIT: EngineSplit = Object.freeze({
  engineTtftMs: Number.NaN,
  queueMs: Number.NaN,
  prefillMs: Number.NaN,
  outsideEngineTtftMs: Number.NaN,
  queueOrOutsideEngineTtftMs: Number.NaN,
});

/** The split of `wireTtftMs` (NaN when no token was streamed) by what the engine reported. */
export function engineSplit(timings: ServerTimings | undefined, wireTtftMs: number): EngineSplit {
  if (timings === undefined) return NO_ENGINE_SPLIT;
  const queueMs = timings.queueMs ?? Number.NaN;
  const prefillMs = timings.promptMs ?? Number.NaN;
  // Without the prefill there is no engine TTFT: a queue time alone is not the time to a token.
  const engineTtftMs = Number.isNaN(prefillMs) ? Number.NaN : (timings.queueMs ?? 0) + (timings.loadMs ?? 0) + prefillMs;
  const difference = wireTtftMs - engineTtftMs;
  const rest = difference >= 0 ? difference : Number.NaN;
  const queueReported = timings.queueMs !== undefined;
  return {
    engineTtftMs,
    queueMs,
    prefillMs,
    outsideEngineTtftMs: queueReported ? rest : Number.NaN,
    queueOrOutsideEngineTtftMs: queueReported ? Number.NaN : rest,
  };
}
