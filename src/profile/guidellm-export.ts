import { summarize } from './distribution-fit.js';
import { ExportRefused, formatDecimal } from './export-format.js';
import { usableHashes } from './profile-builder.js';
import type { RequestShape } from './request-shape-ring.js';
import type { WorkloadProfile } from './workload-profile.js';

/** SyntheticTextPrefixBucketConfig (guidellm data/deserializers/synthetic.py): weight > 0, count >= 1, tokens >= 0. */
export interface GuidellmPrefixBucket {
  readonly bucket_weight: number;
  readonly prefix_count: number;
  readonly prefix_tokens: number;
}

/** SyntheticTextDataArgs, the fields tokentap sets: every count an integer above 0. */
export interface GuidellmSyntheticText {
  readonly kind: 'synthetic_text';
  readonly prompt_tokens: number;
  readonly prompt_tokens_stdev?: number;
  readonly prompt_tokens_min?: number;
  readonly prompt_tokens_max?: number;
  readonly output_tokens?: number;
  readonly output_tokens_stdev?: number;
  readonly output_tokens_min?: number;
  readonly output_tokens_max?: number;
  readonly prefix_buckets?: readonly GuidellmPrefixBucket[];
}

/**
 * A GuideLLM scenario file (BenchmarkScenario, guidellm benchmark/schemas/entrypoints.py: the
 * built-in scenarios chat.json and rag.json have this shape): `guidellm run --scenario FILE
 * --backend ...` runs it. Its `spec` forbids unknown keys, so nothing else goes in.
 */
export interface GuidellmScenario {
  readonly spec: {
    readonly profile: { readonly kind: 'poisson'; readonly rate: number };
    readonly data: readonly [GuidellmSyntheticText];
  };
}

/**
 * The workload's shape as GuideLLM's synthetic data and a Poisson profile at its measured rate
 * (GuideLLM has no gamma arrivals: for bursty traffic replay the Mooncake trace instead).
 *
 * Prefix sharing becomes `prefix_buckets`: a request's shared prefix is its leading blocks whose
 * hashes some other request in the window has too. Requests are grouped by that length; a bucket's
 * weight is its request count, its prefix_count the distinct prefixes among them. GuideLLM adds the
 * prefix to `prompt_tokens` (synthetic.py: the prefix column is separate), so the prompt figures are
 * those of the rest of each prompt: input tokens less the shared prefix.
 */
export function guidellmScenario(profile: WorkloadProfile, shapes: readonly RequestShape[], blockTokens: number): GuidellmScenario {
  const withInput = shapes.filter((s) => s.inputTokens > 0);
  if (withInput.length === 0) throw new ExportRefused(`no request of workload "${profile.workload}" in the window reported its input tokens: nothing to fit (ask the server for usage, e.g. inject_usage: true)`);
  const prefixes = sharedPrefixes(withInput, blockTokens);
  const rests = withInput.map((s, i) => Math.max(1, s.inputTokens - (prefixes[i]?.blocks ?? 0) * blockTokens));
  const data: GuidellmSyntheticText = {
    kind: 'synthetic_text',
    ...tokenFields('prompt_tokens', summarize(rests)),
    ...(profile.outputTokens.count > 0 && (profile.outputTokens.mean ?? 0) >= 0.5 ? tokenFields('output_tokens', profile.outputTokens) : {}),
    ...(prefixes.some((p) => p.blocks > 0) ? { prefix_buckets: buckets(prefixes, blockTokens) } : {}),
  };
  return { spec: { profile: { kind: 'poisson', rate: Number(formatDecimal(profile.arrivals.ratePerSecond, 6)) }, data: [data] } };
}

/** `prompt_tokens`, `_stdev`, `_min`, `_max` (or output_tokens...): integers above 0; a zero stdev is left out (pydantic gt=0). */
function tokenFields<N extends 'prompt_tokens' | 'output_tokens'>(
  name: N,
  d: { mean?: number; stdev?: number; min?: number; max?: number },
): Record<N, number> & Partial<Record<`${N}_stdev` | `${N}_min` | `${N}_max`, number>> {
  const mean = Math.max(1, Math.round(d.mean ?? 1));
  const stdev = Math.round(d.stdev ?? 0);
  const min = Math.max(1, Math.round(d.min ?? 1));
  const max = Math.max(min, Math.round(d.max ?? min));
  // Computed keys widen to string in TypeScript; the names are exactly those of the return type.
  return { [name]: mean, ...(stdev > 0 ? { [`${name}_stdev`]: stdev } : {}), [`${name}_min`]: min, [`${name}_max`]: max } as Record<N, number> &
    Partial<Record<`${N}_stdev` | `${N}_min` | `${N}_max`, number>>;
}

interface SharedPrefix {
  /** Leading blocks shared with another request in the window. */
  readonly blocks: number;
  /** The hash of the last shared block: the prefix's identity (a chain hash stands for all before it). */
  readonly last: number | undefined;
}

function sharedPrefixes(shapes: readonly RequestShape[], blockTokens: number): SharedPrefix[] {
  const uses = new Map<number, number>();
  const hashesOf = shapes.map((s) => usableHashes(s, blockTokens));
  for (const hashes of hashesOf) for (const hash of hashes) uses.set(hash, (uses.get(hash) ?? 0) + 1);
  return hashesOf.map((hashes) => {
    let blocks = 0;
    while (blocks < hashes.length && (uses.get(hashes[blocks] as number) ?? 0) > 1) blocks++;
    return { blocks, last: blocks === 0 ? undefined : hashes[blocks - 1] };
  });
}

function buckets(prefixes: readonly SharedPrefix[], blockTokens: number): GuidellmPrefixBucket[] {
  const byLength = new Map<number, { requests: number; prefixes: Set<number | undefined> }>();
  for (const prefix of prefixes) {
    let bucket = byLength.get(prefix.blocks);
    if (bucket === undefined) byLength.set(prefix.blocks, (bucket = { requests: 0, prefixes: new Set() }));
    bucket.requests++;
    bucket.prefixes.add(prefix.last);
  }
  return [...byLength]
    .sort(([a], [b]) => a - b)
    .map(([blocks, bucket]) => ({ bucket_weight: bucket.requests, prefix_count: blocks === 0 ? 1 : bucket.prefixes.size, prefix_tokens: blocks * blockTokens }));
}
