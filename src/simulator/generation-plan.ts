import type { FinishReason } from './openai-wire.js';
import type { Fault } from './options.js';
import { createRandom, pickTokens } from './vocabulary.js';

/**
 * What one generation will send and when, decided before the first byte: a pure function of the
 * behaviour, the request's max_tokens and the seed, so it is testable without a socket or a timer.
 *
 * Times are offsets from the moment the request body was received. Step k is due at
 * ttft + k × itl (± jitter): each target is computed from the start rather than from the previous
 * step, so a late timer delays one chunk instead of shifting every later one, and the rate does not
 * drift under load.
 */

export interface ChunkStep {
  readonly kind: 'chunk';
  readonly atMs: number;
  /** The joined text of this chunk's tokens; empty for the `stop` chunk (vLLM's EOS step). */
  readonly text: string;
  /** Index in GenerationPlan.tokens of this chunk's first token. */
  readonly first: number;
  readonly tokens: number;
  /** Set on the last chunk of a generation that completes. */
  readonly finish: FinishReason | null;
}

export interface FaultStep {
  readonly kind: 'reset' | 'truncate' | 'error';
  readonly atMs: number;
}

export type Step = ChunkStep | FaultStep;

export interface GenerationPlan {
  /**
   * In order. A generation that completes ends with a chunk carrying `finish`; one that faults
   * ends with a fault step, or, for a stall, simply runs out of steps.
   */
  readonly steps: readonly Step[];
  /** Every token the generation produces if nothing interrupts it. */
  readonly tokens: readonly string[];
  readonly finish: FinishReason;
}

export interface PlanInput {
  readonly outputTokens: number;
  readonly maxTokens: number | undefined;
  readonly tokensPerChunk: number;
  readonly ttftMs: number;
  readonly itlMs: number;
  readonly jitterMs: number;
  readonly fault: Fault;
  readonly seed: number;
}

export function planGeneration(input: PlanInput): GenerationPlan {
  const random = createRandom(input.seed);
  const { maxTokens, outputTokens, tokensPerChunk, fault } = input;
  const total = maxTokens === undefined ? outputTokens : Math.min(outputTokens, maxTokens);
  const finish: FinishReason = maxTokens !== undefined && maxTokens <= outputTokens ? 'length' : 'stop';
  // Tokens are drawn before any jitter, so the text depends on the seed alone.
  const tokens = pickTokens(total, random);

  const interruptAt =
    'afterTokens' in fault && fault.afterTokens <= total
      ? fault.afterTokens
      : undefined;
  const sent = interruptAt ?? total;

  let slot = 0;
  let previousMs = 0;
  const nextAt = (): number => {
    const base = input.ttftMs + slot * input.itlMs;
    slot += 1;
    const jittered = input.jitterMs > 0 ? base + (random() * 2 - 1) * input.jitterMs : base;
    // A delay never goes below 0: not before the start, nor before the previous step.
    previousMs = Math.max(previousMs, jittered);
    return previousMs;
  };

  const steps: Step[] = [];
  for (let first = 0; first < sent; first += tokensPerChunk) {
    const group = tokens.slice(first, Math.min(first + tokensPerChunk, sent));
    const last = interruptAt === undefined && first + group.length === total;
    steps.push({
      kind: 'chunk',
      atMs: nextAt(),
      text: group.join(''),
      first,
      tokens: group.length,
      finish: last && finish === 'length' ? 'length' : null,
    });
  }
  if (interruptAt === undefined) {
    if (finish === 'stop') steps.push({ kind: 'chunk', atMs: nextAt(), text: '', first: total, tokens: 0, finish: 'stop' });
  } else if (fault.kind === 'reset' || fault.kind === 'truncate' || fault.kind === 'error') {
    steps.push({ kind: fault.kind, atMs: nextAt() });
  }
  return { steps, tokens, finish };
}
