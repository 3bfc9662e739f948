/**
 * The simulator's "model": deterministic pseudo-words drawn from a fixed vocabulary.
 *
 * Every entry is exactly one token and never empty, so a decoder that counts one token per content
 * delta agrees with the usage the simulator reports. Most entries carry a leading space, as BPE
 * tokenizers emit them; a few are multi-byte UTF-8 (2, 3 and 4 bytes, one of them a surrogate pair
 * in JavaScript) and one is a newline, so byte-level decoders meet split characters and JSON
 * escapes in ordinary traffic rather than only in hand-made fixtures.
 */
export const VOCABULARY: readonly string[] = Object.freeze([
  ' the',
  ' model',
  ' token',
  ' stream',
  ' latency',
  ' server',
  ' request',
  ' batch',
  ' cache',
  ' first',
  ' time',
  ' of',
  ' and',
  ' to',
  ' a',
  ' is',
  ' in',
  'ing',
  'ed',
  's',
  ',',
  '.',
  '\n',
  ' café',
  'é',
  ' naïve',
  ' 日本',
  '語',
  ' 🙂',
  '🚀',
]);

/**
 * mulberry32 (Tommy Ettinger, public domain; collected in https://github.com/bryc/code/blob/master/jshash/PRNGs.md):
 * a 32-bit generator that is tiny, fast and good enough for picking words and jitter, and unlike
 * `Math.random` it can be seeded, which is what makes a test's content reproducible. Returns floats
 * in [0, 1).
 */
export function createRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** `count` tokens drawn from the vocabulary; the same generator state gives the same tokens. */
export function pickTokens(count: number, random: () => number): string[] {
  const tokens = new Array<string>(count);
  for (let i = 0; i < count; i++) {
    tokens[i] = VOCABULARY[Math.floor(random() * VOCABULARY.length)] as string;
  }
  return tokens;
}
