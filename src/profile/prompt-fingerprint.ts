import { createHmac, randomBytes } from 'node:crypto';

/** Bytes of the per-process key: HMAC-SHA256's block is 64 bytes, and any key of 32 or more gives its full strength (RFC 2104 section 3). */
const KEY_BYTES = 32;

/** Bits of each block hash kept: a double holds 53 exactly; 48 give one collision in ~10^7 among 10^6 hashes. */
const KEPT_HASH_BYTES = 6;

/**
 * The request body's fields that become the prompt, in the order chat templates put them first
 * (system text and tools before the turns): OpenAI chat (`messages`, `tools`), completions
 * (`prompt`), Responses (`instructions`, `input`), Anthropic (`system`, `messages`), TGI
 * (`inputs`), Triton (`text_input`), Ollama and llama.cpp (`messages`, `prompt`).
 */
const PROMPT_FIELDS = ['system', 'instructions', 'tools', 'messages', 'prompt', 'input', 'inputs', 'text_input'] as const;

/** The fingerprint of one request's prompt: a keyed hash per complete block, and the prompt's size. */
export interface PromptBlocks {
  /** Block k's hash covers the whole prompt up to the end of block k (a chain), so equal hashes mean an equal prefix. */
  readonly hashes: readonly number[];
  /** Bytes of the prompt as serialised here (the ratio to the reported input tokens sets the block size). */
  readonly promptBytes: number;
}

/**
 * Keyed hashes of a request's prompt at block boundaries, so that requests sharing a prefix (a
 * system prompt, a conversation's history) share leading hashes, and nothing of the text can be
 * recovered from them: each is HMAC-SHA256 under a random key made when the process starts, held
 * in a private field, never exported, logged or written anywhere; without it a hash cannot even be
 * tested against a guessed prompt. The hashes themselves never leave the process either: exports
 * carry small integers from a table built per export (mooncake-export.ts).
 *
 * tokentap has no tokenizer: a block is `blockBytes` bytes of the serialised prompt, where the
 * caller sets blockBytes = block tokens x the workload's bytes per reported input token
 * (bytes-per-token.ts). Only complete blocks are hashed, as prefix caches only reuse complete blocks.
 */
export class PromptFingerprinter {
  readonly #key: Buffer;

  /** `key`: tests pass a known one to prove it never leaves; the sidecar lets it be drawn at random. */
  constructor(key: Buffer = randomBytes(KEY_BYTES)) {
    this.#key = Buffer.from(key);
  }

  /**
   * The prompt of a parsed request body, hashed once: at most `maxBlocks` blocks of `blockBytes`.
   * Undefined when the body names no prompt field. The serialised text is dropped before this returns.
   */
  blocks(body: unknown, blockBytes: number, maxBlocks: number): PromptBlocks | undefined {
    const prompt = promptBytes(body);
    if (prompt === undefined) return undefined;
    const complete = Math.min(maxBlocks, Math.floor(prompt.length / blockBytes));
    const hashes: number[] = new Array<number>(complete);
    let previous: Buffer | undefined;
    for (let k = 0; k < complete; k++) {
      const hmac = createHmac('sha256', this.#key);
      // Chained: block k's hash binds every byte before it, so it stands for the whole prefix.
      if (previous !== undefined) hmac.update(previous);
      previous = hmac.update(prompt.subarray(k * blockBytes, (k + 1) * blockBytes)).digest();
      hashes[k] = previous.readUIntBE(0, KEPT_HASH_BYTES);
    }
    return { hashes, promptBytes: prompt.length };
  }
}

/** The prompt fields of a body, each serialised as JSON, in PROMPT_FIELDS order; undefined without any. */
function promptBytes(body: unknown): Buffer | undefined {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return undefined;
  const record = body as Record<string, unknown>;
  const parts: string[] = [];
  for (const field of PROMPT_FIELDS) {
    const value = record[field];
    if (value !== undefined && value !== null) parts.push(JSON.stringify(value));
  }
  return parts.length === 0 ? undefined : Buffer.from(parts.join('\n'), 'utf8');
}
