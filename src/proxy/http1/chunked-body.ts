/**
 * Follows the framing of a chunked body (RFC 9112 section 7.1) as its bytes pass through the relay
 * unchanged: where each chunk's data lies (for the tap) and where the message ends (to reuse the
 * connection). It never rewrites a byte; the bytes on the wire stay the upstream's (gather() copies
 * the data of many tiny chunks into one buffer for the taps, beside the wire).
 *
 * Written here, not taken from a package, because it runs on every upstream chunk: one pass over
 * the few framing bytes, the data skipped by length, and no object made per chunk (the data's
 * places are kept in two reused arrays). Strict: a malformed size line or a missing CRLF after the
 * data is an error, never a guess, so the relay cannot fall out of step with the upstream.
 */

const enum State {
  Size,
  Extension,
  SizeLf,
  Data,
  DataCr,
  DataLf,
  Trailer,
  TrailerLf,
  Done,
}

/** 2^52: the largest chunk a Number counts exactly. 13 hex digits always fit. */
const MAX_SIZE_DIGITS = 13;
/** Chunk extensions and trailer fields are not forwarded specially: this bounds what is scanned. */
const MAX_LINE_BYTES = 16 * 1024;

/**
 * These lines are forwarded as the upstream wrote them, so they must end where every reader ends
 * them: at CRLF (RFC 9112 section 7.1). nginx, Go's net/http and Python's http.client also end a
 * line at a bare LF (RFC 9112 section 2.2 allows it), so one forwarded in an extension or a trailer
 * line would make a client, or an ingress pooling its connections to tokentap, split the body
 * elsewhere than tokentap did (test/security/review-chunked-bare-lf.test.ts).
 */
const BARE_LF = 'bare LF in a chunk size line or trailer line (lines end with CRLF)';

export class ChunkedBodyError extends Error {}

export class ChunkedBody {
  /** Start and end offsets of the chunk data found by the last feed(), `pieces` of them. */
  readonly pieceStarts: number[] = [];
  readonly pieceEnds: number[] = [];
  pieces = 0;
  private state = State.Size;
  private size = 0;
  private digits = 0;
  private remaining = 0;
  private lineBytes = 0;

  /** The data of the last feed()'s pieces of `buffer`, copied into one buffer. */
  gather(buffer: Buffer): Buffer {
    let bytes = 0;
    for (let k = 0; k < this.pieces; k++) bytes += (this.pieceEnds[k] as number) - (this.pieceStarts[k] as number);
    const gathered = Buffer.allocUnsafe(bytes);
    let at = 0;
    for (let k = 0; k < this.pieces; k++) at += buffer.copy(gathered, at, this.pieceStarts[k] as number, this.pieceEnds[k] as number);
    return gathered;
  }

  get done(): boolean {
    return this.state === State.Done;
  }

  /**
   * Reads `buffer` from `start`. Returns the offset just past the message's end when it ends in
   * this buffer, or -1; throws ChunkedBodyError on bytes that are not chunked framing.
   */
  feed(buffer: Buffer, start: number): number {
    this.pieces = 0;
    const length = buffer.length;
    let i = start;
    while (i < length) {
      if (this.state === State.Data) {
        const end = Math.min(length, i + this.remaining);
        this.pieceStarts[this.pieces] = i;
        this.pieceEnds[this.pieces] = end;
        this.pieces++;
        this.remaining -= end - i;
        i = end;
        if (this.remaining === 0) this.state = State.DataCr;
        continue;
      }
      const byte = buffer[i++] as number;
      switch (this.state) {
        case State.Size: {
          const value = hexValue(byte);
          if (value !== -1) {
            if (++this.digits > MAX_SIZE_DIGITS) throw new ChunkedBodyError('chunk size has too many digits');
            this.size = this.size * 16 + value;
          } else if (this.digits === 0) {
            throw new ChunkedBodyError(`chunk size expected, found byte 0x${byte.toString(16)}`);
          } else if (byte === 0x0d) {
            this.state = State.SizeLf;
          } else if (byte === 0x3b || byte === 0x20 || byte === 0x09) {
            // A chunk extension (or whitespace before one): skipped to the end of the line.
            this.state = State.Extension;
            this.lineBytes = 0;
          } else {
            throw new ChunkedBodyError(`invalid byte 0x${byte.toString(16)} in a chunk size`);
          }
          break;
        }
        case State.Extension:
          if (byte === 0x0d) this.state = State.SizeLf;
          else if (byte === 0x0a) throw new ChunkedBodyError(BARE_LF);
          else if (++this.lineBytes > MAX_LINE_BYTES) throw new ChunkedBodyError('chunk extension too long');
          break;
        case State.SizeLf:
          if (byte !== 0x0a) throw new ChunkedBodyError('chunk size line not ended by CRLF');
          if (this.size === 0) {
            this.state = State.Trailer;
          } else {
            this.remaining = this.size;
            this.state = State.Data;
          }
          this.size = 0;
          this.digits = 0;
          this.lineBytes = 0;
          break;
        case State.DataCr:
          if (byte !== 0x0d) throw new ChunkedBodyError('chunk data not followed by CRLF');
          this.state = State.DataLf;
          break;
        case State.DataLf:
          if (byte !== 0x0a) throw new ChunkedBodyError('chunk data not followed by CRLF');
          this.state = State.Size;
          break;
        case State.Trailer:
          if (byte === 0x0d) this.state = State.TrailerLf;
          else if (byte === 0x0a) throw new ChunkedBodyError(BARE_LF);
          else if (++this.lineBytes > MAX_LINE_BYTES) throw new ChunkedBodyError('trailer field too long');
          break;
        case State.TrailerLf:
          if (byte !== 0x0a) throw new ChunkedBodyError('trailer line not ended by CRLF');
          if (this.lineBytes === 0) {
            this.state = State.Done;
            return i;
          }
          this.lineBytes = 0;
          this.state = State.Trailer;
          break;
        case State.Done:
          throw new ChunkedBodyError('bytes after the end of the chunked body');
      }
    }
    return -1;
  }
}

function hexValue(byte: number): number {
  if (byte >= 0x30 && byte <= 0x39) return byte - 0x30;
  const lower = byte | 0x20;
  if (lower >= 0x61 && lower <= 0x66) return lower - 0x57;
  return -1;
}
