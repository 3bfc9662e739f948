import { ManualClock } from '../../src/clock/clock.js';
import { TokenTimeline } from '../../src/clock/token-timeline.js';
import type { TapFactory, TapProblemReason } from '../../src/taps/tap.js';

/** What a tap made of a stream: the timeline's derived values and every inter-token sample. */
export interface TapRun {
  timeline: TokenTimeline;
  /** [gapMs, tokens] per content event after the first. */
  gaps: Array<[number, number]>;
  problems: TapProblemReason[];
}

/**
 * Feeds `chunks` to a tap, advancing a fake clock by `stepMs` before each chunk, starting `startMs`
 * after the request began. Times are therefore exact: chunk i arrives at startMs + i * stepMs.
 */
export function runTap(create: TapFactory, chunks: readonly Buffer[], stepMs = 10, startMs = 100): TapRun {
  const clock = new ManualClock(0);
  const gaps: Array<[number, number]> = [];
  const problems: TapProblemReason[] = [];
  const timeline = new TokenTimeline(clock.nowMs(), { interToken: (gapMs, tokens) => gaps.push([gapMs, tokens]) });
  const tap = create({ timeline, problem: (reason) => problems.push(reason) });
  clock.advance(startMs - stepMs);
  for (const chunk of chunks) {
    clock.advance(stepMs);
    timeline.bytes(clock.nowMs());
    tap.write(chunk, clock.nowMs());
  }
  tap.end(clock.nowMs());
  return { timeline, gaps, problems };
}

export function sse(...events: Array<string | object>): Buffer[] {
  return events.map((e) => Buffer.from(`data: ${typeof e === 'string' ? e : JSON.stringify(e)}\n\n`));
}

export function chatChunk(delta: object, extra: object = {}, finish: string | null = null): object {
  return { id: 'chatcmpl-1', object: 'chat.completion.chunk', model: 'm', choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }], ...extra };
}
