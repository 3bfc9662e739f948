import { GrowableBytes } from '../bytes/growable-bytes.js';

/**
 * Keeps a body beside the forwarded stream for one parse at its end, up to a cap. A body of one
 * chunk (most small requests and answers) is held by reference and parsed in place; from a second
 * chunk on the bytes are gathered into one growing buffer (growable-bytes.ts), so a body sent in
 * tiny pieces costs its bytes, not an object per piece.
 */
export class BoundedBody {
  private first: Buffer | undefined;
  private rest: GrowableBytes | undefined;
  private size = 0;
  private readonly maxBytes: number;
  /** The body grew past the cap; what was kept is dropped. */
  oversized = false;

  constructor(maxBytes: number) {
    this.maxBytes = maxBytes;
  }

  push(chunk: Buffer): void {
    if (this.oversized || chunk.length === 0) return;
    this.size += chunk.length;
    if (this.size > this.maxBytes) {
      this.oversized = true;
      this.release();
      return;
    }
    if (this.first === undefined && this.rest === undefined) {
      this.first = chunk;
      return;
    }
    if (this.rest === undefined) {
      this.rest = new GrowableBytes(this.maxBytes);
      this.rest.append(this.first as Buffer);
      this.first = undefined;
    }
    this.rest.append(chunk);
  }

  /** The whole body as JSON; undefined when it was empty, oversized or not JSON. Releases the bytes. */
  json(): unknown {
    if (this.oversized || this.size === 0) return undefined;
    try {
      const whole = this.first ?? (this.rest as GrowableBytes).view();
      return JSON.parse(whole.toString('utf8'));
    } catch {
      return undefined;
    } finally {
      this.release();
    }
  }

  private release(): void {
    this.first = undefined;
    this.rest = undefined;
  }
}
