import { readFileSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'vitest';
import type { TapFactory } from '../../../src/taps/tap.js';
import { runTap, type TapRun } from '../../helpers/tap-harness.js';

const STREAMS = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'fixtures', 'streams');

export function streamFixture(protocol: string, name: string): Buffer {
  return readFileSync(join(STREAMS, protocol, name));
}

export function streamFixtureNames(protocol: string): string[] {
  return readdirSync(join(STREAMS, protocol)).filter((n) => n.endsWith('.sse') || n.endsWith('.ndjson'));
}

/** Each NDJSON line with its line end, as a server writes them one per chunk. */
export function splitLines(stream: Buffer): Buffer[] {
  const lines: Buffer[] = [];
  let start = 0;
  for (let i = stream.indexOf(10); i !== -1; i = stream.indexOf(10, start)) {
    lines.push(stream.subarray(start, i + 1));
    start = i + 1;
  }
  if (start < stream.length) lines.push(stream.subarray(start));
  return lines;
}

/** Everything a tap measured, as one comparable value. */
export function measurements(run: TapRun) {
  const t = run.timeline;
  return {
    ttft: t.ttftMs,
    lastToken: t.lastTokenMs,
    events: t.contentEvents,
    counted: t.countedTokens,
    output: t.outputTokens,
    source: t.outputTokenSource,
    input: t.reportedInputTokens,
    terminal: t.terminal,
    error: t.errorEvent,
    mismatch: t.tokenCountMismatch,
    serverTimings: t.serverTimings,
    gaps: run.gaps,
    problems: run.problems,
  };
}

/** Replaying a capture cut at each of its bytes is heavy (one full replay per byte): a generous budget for shared machines. */
export const EVERY_CUT_TIMEOUT_MS = 300_000;

/**
 * The stream cut in two at every byte boundary, both pieces arriving at the same instant, measures
 * exactly as the whole stream arriving at once.
 */
export function expectSameAtEveryCut(create: TapFactory, stream: Buffer): void {
  const whole = JSON.stringify(measurements(runTap(create, [stream], 10)));
  for (let cut = 1; cut < stream.length; cut++) {
    const split = measurements(runTap(create, [stream.subarray(0, cut), stream.subarray(cut)], 0, 100));
    if (JSON.stringify(split) !== whole) expect(split, `cut at byte ${cut}`).toEqual(JSON.parse(whole));
  }
}
