import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../../src/clock/clock.js';
import { aiperfArguments, aiperfMixtureArguments } from '../../../src/profile/aiperf-export.js';
import { guidellmScenario } from '../../../src/profile/guidellm-export.js';
import { MAX_TRACE_HASH_IDS, mooncakeJsonl, mooncakeRows } from '../../../src/profile/mooncake-export.js';
import type { RequestShape } from '../../../src/profile/request-shape-ring.js';
import { ProfileStore } from '../../../src/profile/profile-store.js';
import type { WorkloadProfile } from '../../../src/profile/workload-profile.js';
import { SeededRandom } from '../../helpers/seeded-random.js';

/**
 * Each export checked against the definitions in the tools' own sources (docs/workload-profiles.md
 * cites file and commit):
 * - Mooncake trace: AIPerf src/aiperf/dataset/loader/models.py MooncakeTrace (timestamp in
 *   milliseconds, int or float; input_length, output_length int; hash_ids list of int) and
 *   src/aiperf/dataset/generator/prompt.py (final block 0 < input - (n-1) * block <= block);
 *   GuideLLM src/guidellm/data/deserializers/trace_mooncake.py validate_row (hash ids >= 0, int32,
 *   ceil(input_length / hash_id_block_size) == len(hash_ids)) and the hash-id tree (an id has one
 *   parent); trace_common.py (input and output lengths non-negative int32).
 * - GuideLLM scenario: benchmark/schemas/entrypoints.py BenchmarkScenario (`spec` with `profile`
 *   and `data`, unknown keys forbidden) and data/deserializers/synthetic.py SyntheticTextDataArgs
 *   and SyntheticTextPrefixBucketConfig (field names; integers, gt=0 or ge=0 as declared).
 * - AIPerf arguments: docs/cli_options.md (flag names, types, constraints) and
 *   src/aiperf/common/models/sequence_distribution_parser.py (the --seq-dist grammar, its regex
 *   copied below as it is there, and probabilities summing to 100 as np.isclose checks it).
 */
const BLOCK = 512;
const T0 = 1_800_000_000_000;

function scenario() {
  const random = new SeededRandom(42);
  const clock = new ManualClock(0);
  const store = new ProfileStore({ maxRequestsPerWorkload: 1000, blockTokens: BLOCK, workloads: ['chat', 'rag'] }, clock, { nowUnixMs: T0 });
  const system = random.letters(4 * 1024);
  const starts: number[] = [];
  let startMs = 0;
  for (let i = 0; i < 40; i++) {
    startMs += 50 + Math.floor(random.next() * 400);
    const shared = i % 2 === 0;
    // Reported tokens match the body at 4 bytes a token, as a real server's would: a shared request is the 1,024-token system prompt and more.
    const inputTokens = i === 5 ? 1024 : shared ? 1100 + Math.floor(random.next() * 2000) : 300 + Math.floor(random.next() * 2500);
    const user = random.letters(Math.max(1, inputTokens * 4 - (shared ? system.length : 0)));
    const body = { messages: [...(shared ? [{ role: 'system', content: system }] : []), { role: 'user', content: user }] };
    const blocks = store.fingerprint('chat', body);
    // Finished out of order (durations vary): the trace must still be in start order.
    store.record('chat', { startMs, durationMs: 2000 - i * 40, inputTokens, outputTokens: 20 + i, cachedInputTokens: Number.NaN, outcome: 'completed', blocks });
    starts.push(startMs);
  }
  for (let i = 0; i < 10; i++) {
    store.record('rag', { startMs: 100 + i * 900, durationMs: 500, inputTokens: 3000 + i * 10, outputTokens: 200, cachedInputTokens: 0, outcome: 'completed', blocks: undefined });
  }
  // Reported no usage: no input length, so no trace row and no length sample.
  store.record('chat', { startMs: startMs + 1, durationMs: 10, inputTokens: Number.NaN, outputTokens: 7, cachedInputTokens: Number.NaN, outcome: 'upstream_error', blocks: undefined });
  clock.advance(startMs + 1000);
  return { store, starts };
}

describe('the Mooncake trace export', () => {
  const { store, starts } = scenario();
  const held = store.shapes('chat', 600_000);
  const text = mooncakeJsonl(mooncakeRows(held?.shapes ?? [], BLOCK).rows);
  const lines = text.split('\n');
  const rows = lines.slice(0, -1).map((line) => JSON.parse(line) as Record<string, unknown>);

  it('is JSON Lines: one object per line, each line ending in a newline, one row per request that reported both lengths', () => {
    expect(lines.at(-1)).toBe('');
    expect(rows).toHaveLength(40);
  });

  it('has exactly the fields timestamp, input_length, output_length, hash_ids, all integers, timestamps in milliseconds from the first request in start order', () => {
    for (const row of rows) {
      expect(Object.keys(row)).toEqual(['timestamp', 'input_length', 'output_length', 'hash_ids']);
      for (const field of ['timestamp', 'input_length', 'output_length'] as const) {
        expect(Number.isInteger(row[field])).toBe(true);
        expect(row[field] as number).toBeGreaterThanOrEqual(0);
        expect(row[field] as number).toBeLessThanOrEqual(2 ** 31 - 1);
      }
    }
    expect(rows.map((r) => r['timestamp'])).toEqual(starts.map((s) => Math.round(s - (starts[0] as number))));
  });

  it('gives each row ceil(input_length / block) hash ids, non-negative int32, with a last block of 1..block tokens', () => {
    for (const row of rows) {
      const ids = row['hash_ids'] as number[];
      const input = row['input_length'] as number;
      expect(ids).toHaveLength(Math.ceil(input / BLOCK));
      for (const id of ids) {
        expect(Number.isInteger(id)).toBe(true);
        expect(id).toBeGreaterThanOrEqual(0);
        expect(id).toBeLessThanOrEqual(2 ** 31 - 1);
      }
      const finalBlock = input - (ids.length - 1) * BLOCK;
      expect(finalBlock).toBeGreaterThan(0);
      expect(finalBlock).toBeLessThanOrEqual(BLOCK);
    }
  });

  it('shares the leading ids of the requests that share a system prompt, and no id of the others', () => {
    const shared = rows.filter((_, i) => i % 2 === 0).map((r) => r['hash_ids'] as number[]);
    const unique = rows.filter((_, i) => i % 2 === 1).map((r) => r['hash_ids'] as number[]);
    // The system prompt is 1,024 tokens: two complete blocks, the same two in every shared request.
    for (const ids of shared) expect(ids.slice(0, 2)).toEqual((shared[0] as number[]).slice(0, 2));
    const counts = new Map<number, number>();
    for (const ids of [...shared, ...unique]) for (const id of ids) counts.set(id, (counts.get(id) ?? 0) + 1);
    for (const ids of unique) for (const id of ids) expect(counts.get(id)).toBe(1);
  });

  it('keeps the hash-id tree: an id always follows the same parent, and never stands for a partial last block where it is a complete one elsewhere', () => {
    const parent = new Map<number, number | null>();
    const partialLast = new Set<number>();
    const complete = new Set<number>();
    for (const row of rows) {
      const ids = row['hash_ids'] as number[];
      ids.forEach((id, i) => {
        const before = i === 0 ? null : (ids[i - 1] as number);
        if (parent.has(id)) expect(parent.get(id)).toBe(before);
        parent.set(id, before);
        const isPartialLast = i === ids.length - 1 && (row['input_length'] as number) % BLOCK !== 0;
        (isPartialLast ? partialLast : complete).add(id);
      });
    }
    for (const id of partialLast) expect(complete.has(id)).toBe(false);
  });

  it('exports ids from a small table, never the fingerprint hashes', () => {
    const ids = rows.flatMap((r) => r['hash_ids'] as number[]);
    expect(Math.max(...ids)).toBeLessThan(ids.length);
    const hashes = new Set((held?.shapes ?? []).flatMap((s) => s.blockHashes));
    expect(hashes.size).toBeGreaterThan(0);
    for (const id of ids) expect(hashes.has(id)).toBe(false);
  });
});

describe('the Mooncake trace ids across exports', () => {
  it('numbers ids by first appearance in the window: the same window twice alike, a later window differently', () => {
    const { store } = scenario();
    const ids = (shapes: readonly RequestShape[]) => mooncakeRows(shapes, BLOCK).rows.map((r) => r.hash_ids);
    const held = store.shapes('chat', 600_000)?.shapes ?? [];
    expect(ids(held)).toEqual(ids(store.shapes('chat', 600_000)?.shapes ?? []));
    // Without the first request (a window starting after it), the shared system prompt's blocks get
    // other ids: request 2 is the first behind it there, after request 1's own blocks.
    const later = ids(held.slice(1));
    expect(later[1]?.slice(0, 2)).not.toEqual(ids(held)[0]?.slice(0, 2));
    expect(later[1]?.slice(0, 2)).toEqual(later[3]?.slice(0, 2));
  });
});

describe('the Mooncake trace of a broken upstream', () => {
  it('leaves out the rows past 2,000,000 hash ids when every request claims 10^7 input tokens, and counts them', () => {
    const claimed: RequestShape = { startUnixMs: T0, durationMs: 1, inputTokens: 10_000_000, outputTokens: 1, cachedInputTokens: Number.NaN, outcome: 'completed', blockHashes: [] };
    const { rows, omitted } = mooncakeRows(Array.from({ length: 120 }, () => claimed), BLOCK);
    const ids = rows.reduce((sum, row) => sum + row.hash_ids.length, 0);
    expect(ids).toBeLessThanOrEqual(MAX_TRACE_HASH_IDS);
    expect(rows).toHaveLength(Math.floor(MAX_TRACE_HASH_IDS / Math.ceil(10_000_000 / BLOCK)));
    expect(omitted).toBe(120 - rows.length);
  });
});

describe('the GuideLLM scenario export', () => {
  const { store } = scenario();
  const held = store.shapes('chat', 600_000);
  const profile = store.profile('chat', 600_000) as WorkloadProfile;
  const file = guidellmScenario(profile, held?.shapes ?? [], BLOCK);
  const round = JSON.parse(JSON.stringify(file)) as { spec: Record<string, unknown> };

  it('is a BenchmarkScenario: spec with profile and data only (spec forbids other keys)', () => {
    expect(Object.keys(round)).toEqual(['spec']);
    expect(Object.keys(round.spec).sort()).toEqual(['data', 'profile']);
    expect(round.spec['profile']).toEqual({ kind: 'poisson', rate: expect.any(Number) });
    expect((round.spec['profile'] as { rate: number }).rate).toBeCloseTo(profile.arrivals.ratePerSecond, 6);
  });

  it('has a synthetic_text data config with SyntheticTextDataArgs field names, each count an integer above 0', () => {
    const data = (round.spec['data'] as Array<Record<string, unknown>>)[0] as Record<string, unknown>;
    const fields = ['kind', 'prompt_tokens', 'prompt_tokens_stdev', 'prompt_tokens_min', 'prompt_tokens_max', 'output_tokens', 'output_tokens_stdev', 'output_tokens_min', 'output_tokens_max', 'prefix_buckets'];
    expect(Object.keys(data).sort()).toEqual([...fields].sort());
    expect(data['kind']).toBe('synthetic_text');
    for (const field of fields.slice(1, -1)) {
      expect(Number.isInteger(data[field])).toBe(true);
      expect(data[field] as number).toBeGreaterThan(0);
    }
    expect(data['prompt_tokens_min'] as number).toBeLessThanOrEqual(data['prompt_tokens'] as number);
    expect(data['prompt_tokens'] as number).toBeLessThanOrEqual(data['prompt_tokens_max'] as number);
    expect(data['output_tokens']).toBe(Math.round(profile.outputTokens.mean as number));
    expect(data['output_tokens_max']).toBe(profile.outputTokens.max);
  });

  it('turns the measured prefix sharing into prefix_buckets: half the requests behind one prefix of two blocks, the rest behind none', () => {
    const data = (round.spec['data'] as Array<Record<string, unknown>>)[0] as Record<string, unknown>;
    const buckets = data['prefix_buckets'] as Array<Record<string, number>>;
    for (const bucket of buckets) {
      expect(Object.keys(bucket).sort()).toEqual(['bucket_weight', 'prefix_count', 'prefix_tokens']);
      expect(Number.isInteger(bucket['bucket_weight']) && (bucket['bucket_weight'] as number) > 0).toBe(true);
      expect(Number.isInteger(bucket['prefix_count']) && (bucket['prefix_count'] as number) >= 1).toBe(true);
      expect(Number.isInteger(bucket['prefix_tokens']) && (bucket['prefix_tokens'] as number) >= 0).toBe(true);
    }
    const shared = buckets.find((b) => b['prefix_tokens'] === 2 * BLOCK);
    expect(shared).toMatchObject({ prefix_count: 1 });
    expect(buckets.reduce((sum, b) => sum + (b['bucket_weight'] as number), 0)).toBe(40);
    expect(shared?.['bucket_weight']).toBe(20);
    expect(buckets.find((b) => b['prefix_tokens'] === 0)).toEqual({ bucket_weight: 20, prefix_count: 1, prefix_tokens: 0 });
  });
});

/** AIPerf sequence_distribution_parser.py, as it is there. */
const NUM = String.raw`(?:\d+(?:\.\d+)?|\.\d+)`;
const SEMICOLON_PATTERN = new RegExp(String.raw`^(\d+)(?:\|(${NUM}))?\s*,\s*(\d+)(?:\|(${NUM}))?\s*:\s*(${NUM})$`);
/** docs/cli_options.md: the flags tokentap writes, and what each takes. */
const AIPERF_FLAGS: Record<string, (value: string) => boolean> = {
  '--isl': (v) => /^\d+$/.test(v),
  '--isl-stddev': (v) => /^\d+(\.\d+)?$/.test(v),
  '--osl': (v) => /^\d+$/.test(v),
  '--osl-stddev': (v) => /^\d+(\.\d+)?$/.test(v),
  '--request-rate': (v) => /^\d+(\.\d+)?$/.test(v) && Number(v) > 0,
  '--arrival-pattern': (v) => ['concurrency_burst', 'constant', 'gamma', 'poisson'].includes(v),
  '--arrival-smoothness': (v) => /^\d+(\.\d+)?$/.test(v) && Number(v) > 0,
  '--seq-dist': (v) => v.length > 0,
};

function parseAiperf(line: string): Map<string, string> {
  expect(line.endsWith('\n')).toBe(true);
  const words = line.trimEnd().split(' ');
  expect(words.length % 2).toBe(0);
  const flags = new Map<string, string>();
  for (let i = 0; i < words.length; i += 2) {
    const [flag, value] = [words[i] as string, words[i + 1] as string];
    expect(Object.keys(AIPERF_FLAGS)).toContain(flag);
    expect(AIPERF_FLAGS[flag]?.(value), `${flag} ${value}`).toBe(true);
    expect(flags.has(flag)).toBe(false);
    flags.set(flag, value);
  }
  return flags;
}

describe('the AIPerf export', () => {
  const { store } = scenario();
  const chat = store.profile('chat', 600_000) as WorkloadProfile;

  it('gives --isl/--isl-stddev/--osl/--osl-stddev and gamma arrivals of smoothness 1 / CV^2 at the measured rate', () => {
    const flags = parseAiperf(aiperfArguments(chat));
    expect(Number(flags.get('--isl'))).toBe(Math.round(chat.inputTokens.mean as number));
    expect(Number(flags.get('--isl-stddev'))).toBeCloseTo(chat.inputTokens.stdev as number, 2);
    expect(Number(flags.get('--osl'))).toBe(Math.round(chat.outputTokens.mean as number));
    expect(Number(flags.get('--request-rate'))).toBeCloseTo(chat.arrivals.ratePerSecond, 5);
    expect(flags.get('--arrival-pattern')).toBe('gamma');
    expect(Number(flags.get('--arrival-smoothness'))).toBeCloseTo(1 / (chat.arrivals.interArrivalCv as number) ** 2, 3);
  });

  it('gives every workload as one --seq-dist mixture that parses by AIPerf\'s grammar, probabilities summing to 100', () => {
    const set = store.profileSet(600_000);
    const flags = parseAiperf(aiperfMixtureArguments(set, store.mergedArrivals(600_000)));
    const pairs = (flags.get('--seq-dist') as string).split(';').map((pair) => SEMICOLON_PATTERN.exec(pair));
    expect(pairs).toHaveLength(2);
    for (const match of pairs) expect(match).not.toBeNull();
    const total = pairs.reduce((sum, m) => sum + Number(m?.[5]), 0);
    // np.isclose(total, 100.0, rtol=1e-6, atol=1e-6)
    expect(Math.abs(total - 100)).toBeLessThanOrEqual(1e-6 + 1e-6 * 100);
    expect(Number(pairs[0]?.[5])).toBeCloseTo(80, 4);
    expect(Number(pairs[1]?.[1])).toBe(3045);
    expect(Number(flags.get('--request-rate'))).toBeGreaterThan(chat.arrivals.ratePerSecond);
  });

  it('falls back to --arrival-pattern poisson when too few arrivals give no CV', () => {
    const clock = new ManualClock(0);
    const store2 = new ProfileStore({ maxRequestsPerWorkload: 10, blockTokens: BLOCK, workloads: ['w'] }, clock, { nowUnixMs: T0 });
    store2.record('w', { startMs: 0, durationMs: 5, inputTokens: 10, outputTokens: 3, cachedInputTokens: Number.NaN, outcome: 'completed', blocks: undefined });
    clock.advance(1000);
    const flags = parseAiperf(aiperfArguments(store2.profile('w', 60_000) as WorkloadProfile));
    expect(flags.get('--arrival-pattern')).toBe('poisson');
    expect(flags.has('--arrival-smoothness')).toBe(false);
  });
});
