import { blockCount, usableHashes } from './profile-builder.js';
import type { RequestShape } from './request-shape-ring.js';

/**
 * One line of a Mooncake trace (kvcache-ai/Mooncake FAST25-release/traces; docs/workload-profiles.md
 * cites each reader): `timestamp` in integer milliseconds, as AIPerf's MooncakeTrace model and vLLM's
 * timed_trace (with --timed-trace-sec-multiplier 0.001) read it; token counts as integers;
 * `hash_ids` one per block of `block` tokens, ceil(input_length / block) of them, the last block
 * possibly partial (GuideLLM trace_mooncake.py validate_row, AIPerf prompt.py).
 */
export interface MooncakeRow {
  readonly timestamp: number;
  readonly input_length: number;
  readonly output_length: number;
  readonly hash_ids: readonly number[];
}

/**
 * Hash ids one trace may hold (at most 8 digits and a comma each: under 20 MB of JSON). Reported
 * input tokens are bounded at 10^7 a request (taps/upstream-numbers.ts), so without this bound a
 * broken upstream's usage reports could make one export of 10,000 rows 2 x 10^8 ids long.
 */
export const MAX_TRACE_HASH_IDS = 2_000_000;

/**
 * The trace of `shapes` (oldest first): one row per request that reported both its input and
 * output tokens (a row needs both lengths; others are left out), timestamps from the first row.
 * Hash ids are small integers from a table made for this export alone, in order of first
 * appearance: equal fingerprint hashes get equal ids, so shared prefixes stay shared, and the
 * hashes themselves never leave the process. A block without a stored hash (past the fingerprint's
 * reach, or the last, partial block) gets an id of its own, used nowhere else. Rows that would
 * take the trace past `maxHashIds` are left out and counted in `omitted`.
 */
export function mooncakeRows(shapes: readonly RequestShape[], blockTokens: number, maxHashIds = MAX_TRACE_HASH_IDS): { rows: MooncakeRow[]; omitted: number } {
  const ids = new Map<number, number>();
  let nextId = 0;
  const rows: MooncakeRow[] = [];
  let firstUnixMs: number | undefined;
  let omitted = 0;
  for (const shape of shapes) {
    if (!(shape.inputTokens > 0) || !(shape.outputTokens > 0)) continue;
    const count = blockCount(shape.inputTokens, blockTokens);
    if (nextId + count > maxHashIds) {
      omitted++;
      continue;
    }
    firstUnixMs ??= shape.startUnixMs;
    const hashes = usableHashes(shape, blockTokens);
    const hashIds = new Array<number>(count);
    for (let i = 0; i < count; i++) {
      const hash = hashes[i];
      if (hash === undefined) {
        hashIds[i] = nextId++;
        continue;
      }
      let id = ids.get(hash);
      if (id === undefined) {
        id = nextId++;
        ids.set(hash, id);
      }
      hashIds[i] = id;
    }
    rows.push({ timestamp: Math.round(shape.startUnixMs - firstUnixMs), input_length: shape.inputTokens, output_length: shape.outputTokens, hash_ids: hashIds });
  }
  return { rows, omitted };
}

/** JSON Lines: one object per line, each line ending in a newline. */
export function mooncakeJsonl(rows: readonly MooncakeRow[]): string {
  let text = '';
  for (const row of rows) text += `${JSON.stringify(row)}\n`;
  return text;
}
