/** Before any usage report: the common rule of thumb for English text with BPE tokenizers (about 4 characters a token). */
const INITIAL_BYTES_PER_TOKEN = 4;

/**
 * A request whose own ratio lies outside these bounds does not move the estimate. Text runs from
 * about 1 byte a token (CJK, 3 bytes a character, 2-3 characters a token) to 6 or so (code,
 * English); far outside are a prompt padded with fields the server never tokenizes (1 MiB of
 * them over 10 tokens: 5 such requests after 1,000 of 4 KB moved the blocks from 2 KB to 4.7 KB,
 * and a 4 KB prompt then had no block at all) and image inputs (a URL of 60 bytes counted as
 * thousands of tokens, or base64 counted as a few hundred): none of these says how the text tokenizes.
 */
const MIN_PLAUSIBLE_BYTES_PER_TOKEN = 0.25;
const MAX_PLAUSIBLE_BYTES_PER_TOKEN = 16;

/** The estimate in force changes only when the measured ratio departs from it by more than this share. */
const HYSTERESIS = 0.25;

/**
 * A workload's bytes of prompt text (prompt-fingerprint.ts) per reported input token, which places its fingerprint's
 * block boundaries (prompt-fingerprint.ts). It must hold still: two requests sharing a prefix share
 * hashes only if their boundaries fall at the same bytes, so the estimate moves only when the
 * running ratio (all requests so far, bytes over tokens) leaves it by more than 25 %, which after
 * the first requests it does not do again unless the traffic itself changes.
 */
export class BytesPerToken {
  private current = INITIAL_BYTES_PER_TOKEN;
  private bytes = 0;
  private tokens = 0;

  get value(): number {
    return this.current;
  }

  /** A finished request: its prompt text's size in bytes and the server's input token count. */
  observe(promptBytes: number, inputTokens: number): void {
    if (!(promptBytes > 0) || !(inputTokens > 0)) return;
    const own = promptBytes / inputTokens;
    if (own < MIN_PLAUSIBLE_BYTES_PER_TOKEN || own > MAX_PLAUSIBLE_BYTES_PER_TOKEN) return;
    this.bytes += promptBytes;
    this.tokens += inputTokens;
    const measured = this.bytes / this.tokens;
    if (Math.abs(measured / this.current - 1) > HYSTERESIS) this.current = Math.round(measured * 4) / 4 || 0.25;
  }
}
