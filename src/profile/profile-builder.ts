import { summarize } from './distribution-fit.js';
import type { RequestShape } from './request-shape-ring.js';
import type { WorkloadProfile } from './workload-profile.js';

export type ProfileWindow = WorkloadProfile['window'];

/**
 * The block hashes of a request that stand for complete blocks of its reported input: at most
 * floor(input / blockTokens). A last, partial block never takes a stored hash, because replay tools
 * cache one token block per hash id (GuideLLM trace_mooncake.py, AIPerf prompt.py): a hash used
 * once as a partial block and elsewhere as a complete one would make one of the two prompts the wrong length.
 */
export function usableHashes(shape: RequestShape, blockTokens: number): readonly number[] {
  if (!(shape.inputTokens > 0)) return [];
  const complete = Math.floor(shape.inputTokens / blockTokens);
  return shape.blockHashes.length <= complete ? shape.blockHashes : shape.blockHashes.slice(0, complete);
}

/** Block ids a request of `inputTokens` has in a Mooncake trace: ceil(input / blockTokens). */
export function blockCount(inputTokens: number, blockTokens: number): number {
  return inputTokens > 0 ? Math.ceil(inputTokens / blockTokens) : 0;
}

/** A workload's fitted shape over `window` from its requests that started in it (oldest first). */
export function buildProfile(workload: string, shapes: readonly RequestShape[], window: ProfileWindow, blockTokens: number): WorkloadProfile {
  const inputs: number[] = [];
  const outputs: number[] = [];
  let cachedReported = 0;
  let cachedAny = 0;
  const outcomes: Record<string, number> = {};
  for (const shape of shapes) {
    if (shape.inputTokens >= 0) inputs.push(shape.inputTokens);
    if (shape.inputTokens >= 0 && shape.outputTokens >= 0) outputs.push(shape.outputTokens);
    if (shape.cachedInputTokens >= 0) {
      cachedReported++;
      if (shape.cachedInputTokens > 0) cachedAny++;
    }
    outcomes[shape.outcome] = (outcomes[shape.outcome] ?? 0) + 1;
  }
  return {
    workload,
    window,
    requests: shapes.length,
    inputTokens: summarize(inputs),
    outputTokens: summarize(outputs),
    arrivals: arrivals(shapes, window.seconds),
    concurrency: concurrency(shapes, window),
    ...(cachedReported === 0 ? {} : { cachedInputShare: cachedAny / cachedReported }),
    prefixSharing: prefixSharing(shapes, blockTokens),
    outcomes,
  };
}

function arrivals(shapes: readonly RequestShape[], seconds: number): WorkloadProfile['arrivals'] {
  const ratePerSecond = seconds > 0 ? shapes.length / seconds : 0;
  if (shapes.length < 3) return { ratePerSecond };
  const starts = shapes.map((s) => s.startUnixMs).sort((a, b) => a - b);
  const gaps = starts.length - 1;
  let sum = 0;
  for (let i = 1; i < starts.length; i++) sum += (starts[i] as number) - (starts[i - 1] as number);
  const mean = sum / gaps;
  let squares = 0;
  for (let i = 1; i < starts.length; i++) squares += ((starts[i] as number) - (starts[i - 1] as number) - mean) ** 2;
  if (!(mean > 0)) return { ratePerSecond };
  const cv = Math.sqrt(squares / (gaps - 1)) / mean;
  // A gamma renewal process of shape k has inter-arrival CV 1/sqrt(k): AIPerf's --arrival-smoothness and vLLM's --burstiness are k.
  return cv > 0 ? { ratePerSecond, interArrivalCv: cv, gammaShape: 1 / (cv * cv) } : { ratePerSecond, interArrivalCv: cv };
}

/** Mean (busy request-seconds over the window's seconds, Little's law) and peak requests in flight, of those started in the window. */
function concurrency(shapes: readonly RequestShape[], window: ProfileWindow): WorkloadProfile['concurrency'] {
  const events: Array<readonly [timeMs: number, change: 1 | -1]> = [];
  let busyMs = 0;
  for (const shape of shapes) {
    const end = Math.min(shape.startUnixMs + shape.durationMs, window.endUnixMs);
    busyMs += Math.max(0, end - shape.startUnixMs);
    events.push([shape.startUnixMs, 1], [end, -1]);
  }
  // Ends before starts at the same instant: a request that ends as another starts is not concurrent with it.
  events.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let inFlight = 0;
  let max = 0;
  for (const [, change] of events) {
    inFlight += change;
    if (inFlight > max) max = inFlight;
  }
  return { mean: window.seconds > 0 ? busyMs / 1000 / window.seconds : 0, max };
}

function prefixSharing(shapes: readonly RequestShape[], blockTokens: number): WorkloadProfile['prefixSharing'] {
  const firstBlockUses = new Map<number, number>();
  let withInput = 0;
  for (const shape of shapes) {
    if (!(shape.inputTokens > 0)) continue;
    withInput++;
    const first = usableHashes(shape, blockTokens)[0];
    if (first !== undefined) firstBlockUses.set(first, (firstBlockUses.get(first) ?? 0) + 1);
  }
  let sharedFirst = 0;
  for (const uses of firstBlockUses.values()) if (uses > 1) sharedFirst += uses;
  const seen = new Set<number>();
  let shareSum = 0;
  for (const shape of shapes) {
    if (!(shape.inputTokens > 0)) continue;
    const hashes = usableHashes(shape, blockTokens);
    let shared = 0;
    for (const hash of hashes) if (seen.has(hash)) shared++;
    for (const hash of hashes) seen.add(hash);
    shareSum += shared / blockCount(shape.inputTokens, blockTokens);
  }
  return {
    blockTokens,
    sharedPrefixShare: withInput === 0 ? 0 : sharedFirst / withInput,
    sharedBlockShare: withInput === 0 ? 0 : shareSum / withInput,
  };
}
