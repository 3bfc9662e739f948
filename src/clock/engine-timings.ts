import type { ServerTimings } from './token-timeline.js';

/**
 * Where one request's time to first token went: inside the engine (its queue, a model load, the
 * prefill), as the engine itself reported at the end of the stream, and outside it (tokenisation,
 * the engine's HTTP server, anything between it and tokentap), which is the wire TTFT tokentap
 * measured minus the engine's part. NaN wherever the engine reported nothing to derive it from:
 * a request whose engine reports nothing gets no sample, never a guessed one.
 */
export interface EngineSplit {
  /** Queue + model load + prefill, each where reported; NaN unless the prefill is reported. */
  readonly engineTtftMs: number;
  /** The engine's queue time (vLLM `queue_time_ms`); NaN when not reported. */
  readonly queueMs: number;
  /** The engine's prefill up to its first token; NaN when not reported. */
  readonly prefillMs: number;
  /**
   * Wire TTFT - engine TTFT; NaN without either, and NaN when negative: the engine then claims
   * more time than passed at the wire (it started its clock before the request reached tokentap,
   * or rounds differently), and a negative duration would be a wrong sample, not a small one.
   */
  readonly outsideEngineTtftMs: number;
}

export const NO_ENGINE_SPLIT: EngineSplit = Object.freeze({
  engineTtftMs: Number.NaN,
  queueMs: Number.NaN,
  prefillMs: Number.NaN,
  outsideEngineTtftMs: Number.NaN,
});

/** The split of `wireTtftMs` (NaN when no token was streamed) by what the engine reported. */
export function engineSplit(timings: ServerTimings | undefined, wireTtftMs: number): EngineSplit {
  if (timings === undefined) return NO_ENGINE_SPLIT;
  const queueMs = timings.queueMs ?? Number.NaN;
  const prefillMs = timings.promptMs ?? Number.NaN;
  // Without the prefill there is no engine TTFT: a queue time alone is not the time to a token.
  const engineTtftMs = Number.isNaN(prefillMs) ? Number.NaN : (timings.queueMs ?? 0) + (timings.loadMs ?? 0) + prefillMs;
  const outside = wireTtftMs - engineTtftMs;
  return { engineTtftMs, queueMs, prefillMs, outsideEngineTtftMs: outside >= 0 ? outside : Number.NaN };
}
