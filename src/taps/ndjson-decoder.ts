import { GrowableBytes } from '../bytes/growable-bytes.js';

/**
 * Newline-delimited JSON (Ollama's streaming framing) from response bytes: one JSON value per line.
 *
 * Hand-written rather than a library: splitting bytes at line ends is a few lines, runs once per
 * chunk on the hot path, and the NDJSON packages in use (ndjson, split2) are Node Transform streams,
 * which DESIGN.md section 9 measured at about twice the cost of a plain listener. Lines are cut on
 * bytes and decoded only when complete, so a multi-byte character split across chunks stays whole.
 * LF, CRLF and a lone CR all end a line (JSON text cannot hold a raw CR or LF, so this is never
 * wrong); empty lines are skipped. A byte-order mark is dropped at the start of the body only, as
 * the ollama client's streaming TextDecoder drops it: one at the start of a later line is part of
 * that line, which then is not JSON (the client skips such a line, ollama-js parseJSON).
 *
 * A line longer than `maxLineBytes` is reported once through `onOversized` and skipped up to its
 * end; the lines after it are decoded as usual.
 */

/** Default line size cap: 1 MiB, far above any token line (a few hundred bytes). */
const MAX_LINE_BYTES = 1 << 20;

const LF = 10;
const CR = 13;
const BOM = 0xfeff;

export class NdjsonDecoder {
  /** ignoreBOM: a non-streaming decode would otherwise drop a byte-order mark at the start of every line. */
  private readonly decoder = new TextDecoder('utf-8', { ignoreBOM: true });
  private readonly onLine: (line: string) => void;
  private readonly onOversized: () => void;
  private readonly maxLineBytes: number;
  /** The start of an unfinished line, copied (a tap must not keep the chunks it is shown) into one growing buffer. */
  private readonly pending: GrowableBytes;
  /** Discarding an oversized line until its end. */
  private skipping = false;
  /** A first line (even empty or oversized) has ended: a byte-order mark is no longer the body's. */
  private pastFirstLine = false;

  constructor(onLine: (line: string) => void, onOversized: () => void, maxLineBytes = MAX_LINE_BYTES) {
    this.onLine = onLine;
    this.onOversized = onOversized;
    this.maxLineBytes = maxLineBytes;
    this.pending = new GrowableBytes(maxLineBytes);
  }

  write(chunk: Buffer): void {
    let start = 0;
    let lf = chunk.indexOf(LF);
    let cr = chunk.indexOf(CR);
    while (start < chunk.length) {
      if (lf !== -1 && lf < start) lf = chunk.indexOf(LF, start);
      if (cr !== -1 && cr < start) cr = chunk.indexOf(CR, start);
      const end = lf === -1 ? cr : cr === -1 ? lf : Math.min(lf, cr);
      if (end === -1) {
        this.keep(chunk.subarray(start));
        return;
      }
      this.lineEnd(chunk.subarray(start, end));
      start = end + 1;
    }
  }

  /** The body ended: a last line without a line end still counts. */
  end(): void {
    if (this.pending.length > 0 && !this.skipping) this.lineEnd(Buffer.alloc(0));
    this.pending.clear();
    this.skipping = false;
  }

  private keep(part: Buffer): void {
    if (this.skipping || part.length === 0) return;
    if (this.pending.length + part.length > this.maxLineBytes) {
      this.oversized();
      return;
    }
    this.pending.append(part);
  }

  private lineEnd(last: Buffer): void {
    const firstLine = !this.pastFirstLine;
    this.pastFirstLine = true;
    if (this.skipping) {
      this.skipping = false;
      return;
    }
    if (this.pending.length + last.length > this.maxLineBytes) {
      this.pending.clear();
      this.onOversized();
      return;
    }
    let bytes = last;
    if (this.pending.length > 0) {
      this.pending.append(last);
      bytes = this.pending.view();
    }
    if (bytes.length > 0) {
      let text = this.decoder.decode(bytes);
      if (firstLine && text.charCodeAt(0) === BOM) text = text.slice(1);
      if (text.length > 0) this.onLine(text);
    }
    this.pending.clear();
  }

  private oversized(): void {
    this.onOversized();
    this.pending.clear();
    this.skipping = true;
  }
}
