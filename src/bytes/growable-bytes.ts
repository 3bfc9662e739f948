const EMPTY = Buffer.alloc(0);

/** The first capacity: a token event or a short JSON line fits without growing. */
const INITIAL_BYTES = 1024;

/**
 * Bytes gathered from many pieces into one buffer that doubles as it fills: appending is linear in
 * the bytes appended however small the pieces are. Holding each piece instead (an array of
 * Buffers, or a concat per piece) costs an object per piece, or quadratic copying: an upstream
 * sending a body in one-byte chunks made a 4 MB answer hold hundreds of MiB that way.
 */
export class GrowableBytes {
  private buffer: Buffer = EMPTY;
  private used = 0;
  private readonly maxBytes: number;

  /** `maxBytes`: the most the caller means to hold; capacity grows past it only for bytes that do not fit. */
  constructor(maxBytes: number) {
    this.maxBytes = maxBytes;
  }

  get length(): number {
    return this.used;
  }

  append(part: Buffer): void {
    const needed = this.used + part.length;
    if (needed > this.buffer.length) {
      // Doubling, but not past maxBytes while the bytes fit in it. allocUnsafe: only [0, used) is
      // ever read, and every byte of it was written here.
      const doubled = Math.max(INITIAL_BYTES, this.buffer.length * 2, needed);
      const grown = Buffer.allocUnsafe(needed <= this.maxBytes ? Math.min(this.maxBytes, doubled) : doubled);
      this.buffer.copy(grown, 0, 0, this.used);
      this.buffer = grown;
    }
    part.copy(this.buffer, this.used);
    this.used = needed;
  }

  /** The bytes held, as a view: valid until the next append(), dropFirst() or clear(). */
  view(): Buffer {
    return this.buffer.subarray(0, this.used);
  }

  /** Forgets the first `count` bytes, moving the rest to the front. */
  dropFirst(count: number): void {
    this.buffer.copyWithin(0, count, this.used);
    this.used -= count;
  }

  /** Forgets everything and releases the buffer. */
  clear(): void {
    this.buffer = EMPTY;
    this.used = 0;
  }
}
