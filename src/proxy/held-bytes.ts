/**
 * The budget of request-body bytes held across every request at once (`limits.held_body_bytes`):
 * the model sniffer and `inject_usage` take from it as they hold a chunk and give back when they
 * let go; the bodies of pipelined requests waiting their turn count too (their connection stops
 * being read while the budget is spent). A holder refused by it forwards its body without holding it (nothing is lost: the model
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

  /** Takes `bytes` that are already held and must stay (a queued request's body): the budget may go over. */
  add(bytes: number): void {
    this.heldBytes += bytes;
  }

  /** At or over the budget: holders that can wait (queued requests) stop reading more. */
  get spent(): boolean {
    return this.heldBytes >= this.maxBytes;
  }

  give(bytes: number): void {
    this.heldBytes -= bytes;
  }
}
