import { GrowableBytes } from '../bytes/growable-bytes.js';

/**
 * A piece smaller than this is copied into a run of small pieces rather than held by reference:
 * each Buffer held costs about a hundred bytes besides its data, so a body sent a byte per chunk
 * held as its pieces cost a hundred times its size (two 4 MB answers: +925 MiB).
 */
const SMALL_PIECE_BYTES = 1024;
/** A run of small pieces is closed at this size: the slack of the run being filled is all a body wastes. */
const RUN_BYTES = 64 * 1024;

/**
 * Keeps a body beside the forwarded stream for one parse at its end, up to a cap, then joins it
 * once. Pieces of a useful size (a socket read, an HTTP/2 frame) are held by reference, as they
 * came, so a held body costs its bytes (the held-bytes budget counts them); small pieces are
 * gathered into runs of up to 64 KiB (growable-bytes.ts). A body of one piece is parsed in place.
 */
export class BoundedBody {
  private readonly chunks: Buffer[] = [];
  private run: GrowableBytes | undefined;
  private size = 0;
  private readonly maxBytes: number;
  /** The body grew past the cap; what was kept is dropped. */
  oversized = false;
  /** json() found bytes that are not JSON (a cut or compressed body, a page). */
  invalidJson = false;

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
    if (chunk.length >= SMALL_PIECE_BYTES) {
      this.closeRun();
      this.chunks.push(chunk);
      return;
    }
    const run = (this.run ??= new GrowableBytes(RUN_BYTES));
    run.append(chunk);
    if (run.length >= RUN_BYTES) this.closeRun();
  }

  /** The whole body as JSON; undefined when it was empty, oversized or not JSON. Releases the bytes. */
  json(): unknown {
    if (this.oversized || this.size === 0) return undefined;
    this.closeRun();
    try {
      const chunks = this.chunks;
      const whole = chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, this.size);
      return JSON.parse(whole.toString('utf8'));
    } catch {
      this.invalidJson = true;
      return undefined;
    } finally {
      this.release();
    }
  }

  private closeRun(): void {
    if (this.run === undefined) return;
    this.chunks.push(this.run.view());
    this.run = undefined;
  }

  private release(): void {
    this.chunks.length = 0;
    this.run = undefined;
  }
}
