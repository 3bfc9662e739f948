/**
 * gRPC's message framing over an HTTP/2 stream's DATA (PROTOCOL-HTTP2.md in grpc/grpc,
 * "Length-Prefixed-Message"): a 1-byte compressed flag, a 4-byte big-endian message length, then
 * the message. Followed across any split of the bytes: a prefix or a message may end in any chunk.
 *
 * Bounds: a message longer than `maxMessageBytes` is never held; its bytes are skipped as they
 * pass and it is reported once through onOversized (the length is the upstream's claim, up to 4 GiB,
 * so nothing is allocated from it beyond the cap). A compressed message (flag 1, the stream's
 * `grpc-encoding` other than identity) is never decompressed, since its decompressed size is
 * unknown until it is decompressed: it is skipped the same way and reported through onCompressed,
 * which gives its arrival. A message cut off by the end of the body is reported through onTruncated.
 *
 * A prefix that is not gRPC framing stops the decoding for good, reported once through onMalformed:
 * a flag other than 0 or 1, or flag 1 on a response that declared no `grpc-encoding` (PROTOCOL-HTTP2.md:
 * "If the Message-Encoding header is omitted then the Compressed-Flag must be 0"; grpc-go fails the
 * call on either). What follows such a prefix has no known message boundary: read on, its bytes
 * would be taken for messages and tokens. Nothing of it is held; the bytes still reach the client.
 *
 * A message wholly inside one chunk is handed over as a view of that chunk (no copy); one spread
 * over chunks is gathered into a buffer that starts at one HTTP/2 DATA frame (16 KiB) and doubles as
 * bytes arrive, up to the announced length: what is held is at most twice what was received, never
 * the length a prefix claims (allocated up front, an upstream announcing 1 MiB and sending nothing
 * more on 1,000 streams made 1,000 MiB of buffers). Either is valid only during the onMessage call.
 */
export const MAX_MESSAGE_BYTES = 1 << 20;

const PREFIX_BYTES = 5;
/** The first buffer of a gathered message: HTTP/2's default SETTINGS_MAX_FRAME_SIZE (RFC 9113 section 6.5.2). */
const FIRST_GATHER_BYTES = 16_384;

export interface GrpcFrameHandlers {
  onMessage(message: Buffer): void;
  onCompressed(): void;
  onOversized(): void;
  onTruncated(): void;
  onMalformed(): void;
}

export interface GrpcFrameOptions {
  /** Messages over this are skipped by their length, never held. */
  readonly maxMessageBytes?: number;
  /** The response declared a `grpc-encoding` other than identity: flag 1 is a compressed message, not malformed framing. */
  readonly compressionDeclared: boolean;
}

export class GrpcFrameDecoder {
  private readonly handlers: GrpcFrameHandlers;
  private readonly maxMessageBytes: number;
  private readonly compressionDeclared: boolean;
  private readonly prefix = Buffer.alloc(PREFIX_BYTES);
  private prefixFilled = 0;
  /** Bytes of the current message still to come; 0 while reading a prefix. */
  private remaining = 0;
  /** The current message's bytes being gathered; undefined while one is skipped (compressed, oversized). */
  private gathered: Buffer | undefined;
  private gatheredLength = 0;
  /** Inside a message (its prefix was read and it has bytes to come). */
  private inMessage = false;
  /** A prefix was not gRPC framing: nothing more is decoded. */
  private stopped = false;

  constructor(handlers: GrpcFrameHandlers, options: GrpcFrameOptions) {
    this.handlers = handlers;
    this.maxMessageBytes = options.maxMessageBytes ?? MAX_MESSAGE_BYTES;
    this.compressionDeclared = options.compressionDeclared;
  }

  write(chunk: Buffer): void {
    if (this.stopped) return;
    let offset = 0;
    const length = chunk.length;
    while (offset < length) {
      if (!this.inMessage) {
        if (this.prefixFilled === 0 && length - offset >= PREFIX_BYTES) {
          // The common case: the whole prefix in this chunk.
          offset = this.startMessage(chunk[offset] as number, chunk.readUInt32BE(offset + 1), chunk, offset + PREFIX_BYTES);
          continue;
        }
        const take = Math.min(PREFIX_BYTES - this.prefixFilled, length - offset);
        chunk.copy(this.prefix, this.prefixFilled, offset, offset + take);
        this.prefixFilled += take;
        offset += take;
        if (this.prefixFilled < PREFIX_BYTES) return;
        this.prefixFilled = 0;
        offset = this.startMessage(this.prefix[0] as number, this.prefix.readUInt32BE(1), chunk, offset);
        continue;
      }
      const take = Math.min(this.remaining, length - offset);
      if (this.gathered !== undefined) this.gather(chunk, offset, take);
      this.remaining -= take;
      offset += take;
      if (this.remaining === 0) this.finishMessage();
    }
  }

  /** The body ended: a prefix or message left incomplete was cut off. */
  end(): void {
    // A malformed prefix left neither a message nor a prefix open (startMessage), so nothing is cut off after it.
    if (this.inMessage || this.prefixFilled > 0) this.handlers.onTruncated();
    this.inMessage = false;
    this.prefixFilled = 0;
    this.gathered = undefined;
  }

  /** A prefix was read; the message's bytes start at `offset` of `chunk`. Returns the offset after what it consumed. */
  private startMessage(flag: number, messageLength: number, chunk: Buffer, offset: number): number {
    if (flag > 1 || (flag === 1 && !this.compressionDeclared)) {
      this.stopped = true;
      this.handlers.onMalformed();
      return chunk.length;
    }
    if (flag === 1) {
      this.handlers.onCompressed();
    } else if (messageLength > this.maxMessageBytes) {
      this.handlers.onOversized();
    } else {
      if (chunk.length - offset >= messageLength) {
        this.handlers.onMessage(chunk.subarray(offset, offset + messageLength));
        return offset + messageLength;
      }
      this.gathered = Buffer.allocUnsafe(Math.min(messageLength, FIRST_GATHER_BYTES));
      this.gatheredLength = 0;
    }
    if (messageLength === 0) return offset;
    this.inMessage = true;
    this.remaining = messageLength;
    return offset;
  }

  /** Appends `take` bytes of `chunk` to the message gathered, doubling its buffer as needed (never past the message's length). */
  private gather(chunk: Buffer, offset: number, take: number): void {
    let gathered = this.gathered as Buffer;
    const needed = this.gatheredLength + take;
    if (needed > gathered.length) {
      const grown = Buffer.allocUnsafe(Math.min(needed + this.remaining - take, Math.max(needed, gathered.length * 2)));
      gathered.copy(grown, 0, 0, this.gatheredLength);
      this.gathered = gathered = grown;
    }
    chunk.copy(gathered, this.gatheredLength, offset, offset + take);
    this.gatheredLength = needed;
  }

  private finishMessage(): void {
    this.inMessage = false;
    const gathered = this.gathered;
    this.gathered = undefined;
    if (gathered !== undefined) this.handlers.onMessage(gathered);
  }
}
