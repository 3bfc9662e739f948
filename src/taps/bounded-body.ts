/**
 * Keeps a body beside the forwarded stream for one parse at its end: chunks are held by reference
 * (no copy) up to a cap, then concatenated once. Never per chunk work beyond a push.
 */
export class BoundedBody {
  private readonly chunks: Buffer[] = [];
  private size = 0;
  private readonly maxBytes: number;
  /** The body grew past the cap; what was kept is dropped. */
  oversized = false;

  constructor(maxBytes: number) {
    this.maxBytes = maxBytes;
  }

  push(chunk: Buffer): void {
    if (this.oversized) return;
    this.size += chunk.length;
    if (this.size > this.maxBytes) {
      this.oversized = true;
      this.chunks.length = 0;
      return;
    }
    this.chunks.push(chunk);
  }

  /** The whole body as JSON; undefined when it was empty, oversized or not JSON. Releases the chunks. */
  json(): unknown {
    if (this.oversized || this.size === 0) return undefined;
    try {
      // A body of one chunk (most small requests and answers) is read in place: no copy.
      const whole = this.chunks.length === 1 ? (this.chunks[0] as Buffer) : Buffer.concat(this.chunks, this.size);
      return JSON.parse(whole.toString('utf8'));
    } catch {
      return undefined;
    } finally {
      this.chunks.length = 0;
    }
  }
}
