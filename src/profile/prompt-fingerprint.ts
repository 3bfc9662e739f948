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
  /** Bytes of the prompt's text as written here (the ratio to the reported input tokens sets the block size). */
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
 * tokentap has no tokenizer: a block is `blockBytes` bytes of the prompt's text, where the
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
   * Undefined when the body names no prompt field. The text is dropped before this returns.
   */
  blocks(body: unknown, blockBytes: number, maxBlocks: number): PromptBlocks | undefined {
    const prompt = promptText(body, maxBlocks * blockBytes);
    if (prompt === undefined) return undefined;
    const complete = Math.min(maxBlocks, Math.floor(prompt.bytes / blockBytes));
    // A prompt shorter than one block (most requests) has nothing to hash.
    if (complete === 0) return { hashes: [], promptBytes: prompt.bytes };
    const hashed = Buffer.from(prompt.kept, 'utf8');
    const hashes: number[] = new Array<number>(complete);
    let previous: Buffer | undefined;
    for (let k = 0; k < complete; k++) {
      const hmac = createHmac('sha256', this.#key);
      // Chained: block k's hash binds every byte before it, so it stands for the whole prefix.
      if (previous !== undefined) hmac.update(previous);
      previous = hmac.update(hashed.subarray(k * blockBytes, (k + 1) * blockBytes)).digest();
      hashes[k] = previous.readUIntBE(0, KEPT_HASH_BYTES);
    }
    return { hashes, promptBytes: prompt.bytes };
  }
}

/** Nesting below this depth is left out of the prompt text: message content sits at depth 4 or 5, tool schemas a few more. */
const MAX_DEPTH = 32;

/**
 * The prompt fields of a body as one text, in PROMPT_FIELDS order: each string as it is, keys and
 * scalars as text, a newline after each value. Not JSON.stringify, whose escaping pass cost 6 to 10 ms
 * on a 1 MB prompt here (measured), for a text that is only ever hashed. `bytes` counts all of it
 * (UTF-8); `kept` is its first `keepChars` characters only (a character is at least one byte, so
 * they hold the first keepChars bytes), the only part that is hashed. Undefined without any field.
 */
function promptText(body: unknown, keepChars: number): { kept: string; bytes: number } | undefined {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return undefined;
  const record = body as Record<string, unknown>;
  const text = new PromptText(keepChars);
  let found = false;
  for (const field of PROMPT_FIELDS) {
    const value = record[field];
    if (value === undefined || value === null) continue;
    found = true;
    text.add(field);
    text.add('\n');
    text.value(value, 0);
  }
  if (!found) return undefined;
  const kept = text.parts.join('');
  return { kept, bytes: text.bytes + Buffer.byteLength(kept.length === text.wholeChars ? kept : kept.slice(0, text.wholeChars), 'utf8') };
}

/**
 * The prompt's text in fragments. A fragment kept whole is measured in UTF-8 bytes once, with all
 * the others kept whole, at the end (one call in place of one per fragment: those calls were most
 * of the fingerprint's cost on a small prompt); the fragment cut at `keepChars` and every one after
 * it are measured as they come. The sum is the same: fragments never abut (a key, a value and its
 * separator are fragments apart), so no surrogate pair forms across two of them.
 */
class PromptText {
  readonly parts: string[] = [];
  /** Bytes of the fragments not kept whole. */
  bytes = 0;
  /** Characters at the start of the kept text that are fragments kept whole (not yet in `bytes`). */
  wholeChars = 0;
  private chars = 0;
  private readonly keepChars: number;

  constructor(keepChars: number) {
    this.keepChars = keepChars;
  }

  value(value: unknown, depth: number): void {
    if (typeof value === 'string') this.add(value);
    else if (typeof value === 'number' || typeof value === 'boolean') this.add(String(value));
    else if (typeof value === 'object' && value !== null && depth < MAX_DEPTH) {
      if (Array.isArray(value)) {
        for (const item of value) this.value(item, depth + 1);
      } else {
        for (const [key, item] of Object.entries(value)) {
          this.add(key);
          this.add(':');
          this.value(item, depth + 1);
        }
      }
    }
    this.add('\n');
  }

  add(text: string): void {
    if (this.chars + text.length <= this.keepChars && this.wholeChars === this.chars) {
      this.parts.push(text);
      this.chars += text.length;
      this.wholeChars = this.chars;
      return;
    }
    this.bytes += Buffer.byteLength(text, 'utf8');
    if (this.chars >= this.keepChars) return;
    const kept = text.slice(0, this.keepChars - this.chars);
    this.parts.push(kept);
    this.chars += kept.length;
  }
}
