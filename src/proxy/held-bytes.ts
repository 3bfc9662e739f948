/**
 * The budget of request-body bytes held across every request at once (`limits.held_body_bytes`):
 * the model sniffer and `inject_usage` take from it as they hold a chunk and give back when they
 * let go. A holder refused by it forwards its body without holding it (nothing is lost: the model
 * is then unknown, or the body goes upstream unrewritten).
 */
export class HeldBytesBudget {
  private readonly maxBytes: number;
  private heldBytes = 0;

  constructor(maxBytes: number) {
    this.maxBytes = maxBytes;
  }

  get held(): number {
    return this.heldBytes;
  }

  /** Takes `bytes` from the budget; false (and nothing taken) when they do not fit. */
  take(bytes: number): boolean {
    if (this.heldBytes + bytes > this.maxBytes) return false;
    this.heldBytes += bytes;
    return true;
  }

  give(bytes: number): void {
    this.heldBytes -= bytes;
  }
}
