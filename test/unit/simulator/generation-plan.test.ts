import { describe, expect, it } from 'vitest';
import { planGeneration, type ChunkStep, type PlanInput } from '../../../src/simulator/generation-plan.js';

const BASE: PlanInput = {
  outputTokens: 5,
  maxTokens: undefined,
  tokensPerChunk: 1,
  ttftMs: 50,
  itlMs: 20,
  jitterMs: 0,
  fault: { kind: 'none' },
  seed: 1,
};

const chunks = (input: Partial<PlanInput>): ChunkStep[] =>
  planGeneration({ ...BASE, ...input }).steps.filter((step): step is ChunkStep => step.kind === 'chunk');

describe('planGeneration timing', () => {
  it('schedules step k at ttft + k × itl from the start, never from the previous step', () => {
    const plan = planGeneration({ ...BASE, outputTokens: 100, ttftMs: 50, itlMs: 20 });
    plan.steps.forEach((step, k) => expect(step.atMs).toBe(50 + k * 20));
  });

  it('keeps jittered steps within ± jitter of their target, never before 0 or the previous step', () => {
    const plan = planGeneration({ ...BASE, outputTokens: 500, ttftMs: 3, itlMs: 4, jitterMs: 5, seed: 99 });
    let previous = 0;
    let moved = 0;
    plan.steps.forEach((step, k) => {
      const target = 3 + k * 4;
      expect(step.atMs).toBeGreaterThanOrEqual(previous);
      expect(step.atMs).toBeGreaterThanOrEqual(0);
      expect(step.atMs).toBeGreaterThanOrEqual(target - 5);
      expect(step.atMs).toBeLessThanOrEqual(target + 5);
      if (step.atMs !== target) moved += 1;
      previous = step.atMs;
    });
    expect(moved).toBeGreaterThan(400);
  });
});

describe('planGeneration content and finish', () => {
  it('generates outputTokens tokens then an empty stop chunk (the EOS step) without max_tokens', () => {
    const plan = planGeneration({ ...BASE, outputTokens: 3 });
    expect(plan.tokens).toHaveLength(3);
    expect(plan.finish).toBe('stop');
    expect(plan.steps.map((step) => (step as ChunkStep).finish)).toEqual([null, null, null, 'stop']);
    expect(plan.steps.at(-1)).toMatchObject({ text: '', tokens: 0 });
  });

  it('caps at max_tokens and finishes with length on the last content chunk', () => {
    const plan = planGeneration({ ...BASE, outputTokens: 10, maxTokens: 4 });
    expect(plan.tokens).toHaveLength(4);
    expect(plan.steps).toHaveLength(4);
    expect((plan.steps.at(-1) as ChunkStep).finish).toBe('length');
  });

  it('groups tokensPerChunk tokens per chunk', () => {
    const steps = chunks({ outputTokens: 7, tokensPerChunk: 3 });
    expect(steps.map((step) => step.tokens)).toEqual([3, 3, 1, 0]);
    const plan = planGeneration({ ...BASE, outputTokens: 7, tokensPerChunk: 3 });
    expect(steps.map((step) => step.text).join('')).toBe(plan.tokens.join(''));
  });

  it('makes the text a function of the seed alone', () => {
    const a = planGeneration({ ...BASE, outputTokens: 20, seed: 5 });
    const b = planGeneration({ ...BASE, outputTokens: 20, seed: 5, jitterMs: 7, tokensPerChunk: 3 });
    const c = planGeneration({ ...BASE, outputTokens: 20, seed: 6 });
    expect(b.tokens).toEqual(a.tokens);
    expect(c.tokens).not.toEqual(a.tokens);
  });
});

describe('planGeneration faults', () => {
  it('cuts the chunks at exactly n tokens and puts the fault in the next slot', () => {
    const plan = planGeneration({ ...BASE, outputTokens: 10, tokensPerChunk: 3, fault: { kind: 'reset', afterTokens: 4 } });
    expect(plan.steps.map((step) => (step.kind === 'chunk' ? step.tokens : step.kind))).toEqual([3, 1, 'reset']);
    expect(plan.steps.map((step) => step.atMs)).toEqual([50, 70, 90]);
  });

  it('ends a stall with no terminal step at all', () => {
    const plan = planGeneration({ ...BASE, outputTokens: 10, fault: { kind: 'stall', afterTokens: 2 } });
    expect(plan.steps.map((step) => (step.kind === 'chunk' ? step.finish : step.kind))).toEqual([null, null]);
  });

  it('strikes before any token with n = 0, and never when n exceeds the tokens generated', () => {
    const zero = planGeneration({ ...BASE, fault: { kind: 'truncate', afterTokens: 0 } });
    expect(zero.steps).toEqual([{ kind: 'truncate', atMs: 50 }]);
    const beyond = planGeneration({ ...BASE, outputTokens: 3, fault: { kind: 'truncate', afterTokens: 4 } });
    expect(beyond.steps.at(-1)).toMatchObject({ kind: 'chunk', finish: 'stop' });
  });

  it('drops the length finish when the fault strikes at the last token', () => {
    const plan = planGeneration({ ...BASE, outputTokens: 10, maxTokens: 2, fault: { kind: 'truncate', afterTokens: 2 } });
    expect(plan.steps.map((step) => (step.kind === 'chunk' ? step.finish : step.kind))).toEqual([null, null, 'truncate']);
  });
});
