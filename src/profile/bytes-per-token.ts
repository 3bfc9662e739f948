/** Before any usage report: the common rule of thumb for English text with BPE tokenizers (about 4 characters a token). */
const INITIAL_BYTES_PER_TOKEN = 4;

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
    this.bytes += promptBytes;
    this.tokens += inputTokens;
    const measured = this.bytes / this.tokens;
    if (Math.abs(measured / this.current - 1) > HYSTERESIS) this.current = Math.round(measured * 4) / 4 || 0.25;
  }
}
