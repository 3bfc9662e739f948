import type { IncomingHttpHeaders } from 'node:http';
import type protobuf from 'protobufjs';
import type { Tap, TapContext } from '../tap.js';
import { GrpcFrameDecoder } from './grpc-frame-decoder.js';
import { grpcStatusOf, outcomeOfGrpcStatus } from './grpc-status.js';

/**
 * The call's end from its `grpc-status` (grpc-status.ts): a status other than OK names the
 * outcome, and with `terminates` any status is the protocol's terminal event (trailers without one
 * then leave the call unterminated: `truncated` at the body's end). A status that is not a code is
 * counted `malformed_event` and makes the call an upstream error (gRPC clients read it as INTERNAL
 * or UNKNOWN).
 */
export function readGrpcStatus(trailers: IncomingHttpHeaders, context: TapContext, terminates: boolean): void {
  const code = grpcStatusOf(trailers);
  if (code === undefined) return;
  const timeline = context.timeline;
  if (terminates) timeline.terminal = true;
  if (Number.isNaN(code)) {
    context.problem('malformed_event');
    timeline.statusOutcome = 'upstream_error';
    return;
  }
  const outcome = outcomeOfGrpcStatus(code, context.clientDeadline === true);
  // Success leaves the outcome to the stream (an error it reported in a message still counts).
  if (outcome !== 'completed') timeline.statusOutcome = outcome;
}

/**
 * A gRPC call whose messages tokentap does not read (a method without a tap: a health check, model
 * info): only a failure's outcome, from the trailers. Its body is not decoded at all, and its
 * status is not a terminal event, so such a call stays an `other` operation, not a generation, and
 * is not a stream that can be truncated (the tap is chosen as not streaming: select.ts). A body
 * that ends without any grpc-status is an upstream error: its client fails the call (grpc-js:
 * INTERNAL, "Call ended without gRPC status").
 */
export function createGrpcStatusTap(context: TapContext): Tap {
  let statusSeen = false;
  return {
    write() {},
    end() {
      if (!statusSeen) context.timeline.errorEvent = true;
    },
    trailers(trailers) {
      if (trailers['grpc-status'] !== undefined) statusSeen = true;
      readGrpcStatus(trailers, context, false);
    },
  };
}

/**
 * What every gRPC streaming tap shares: the body's DATA through one GrpcFrameDecoder (framing,
 * splits, the message size cap: grpc-frame-decoder.ts), each message reaching the subclass's
 * onMessage with the arrival time of the chunk that completed it in `nowMs`, and the outcome from
 * the trailers. Counted, never thrown: a message over the cap (`oversized_event`), one that is not
 * the engine's protobuf or a prefix cut off by the end of the body (`malformed_event`), and a
 * response with compressed messages (`compressed_message`, once per response).
 *
 * Framing a gRPC client cannot read makes the call an upstream error whatever grpc-status follows
 * (a failing status still names its own outcome): a prefix that is not gRPC framing (its flag
 * neither 0 nor 1, or 1 with no `grpc-encoding` declared), after which nothing is read, and a
 * message cut off by a status that says the call ended. grpc-go fails such a call (INTERNAL),
 * so a `completed` here would count as served an answer its client did not get. A message cut
 * off by a body that ends without a status leaves the call `truncated`, as any stream cut short.
 */
export abstract class GrpcMessageTap implements Tap {
  protected readonly context: TapContext;
  /** Arrival time of the chunk being decoded: every message completed by it arrived then. */
  protected nowMs = 0;
  private readonly decoder: GrpcFrameDecoder;
  private compressedCounted = false;

  constructor(context: TapContext) {
    this.context = context;
    this.decoder = new GrpcFrameDecoder(
      {
        onMessage: (message) => this.onMessage(message),
        onCompressed: () => this.compressed(),
        onOversized: () => context.problem('oversized_event'),
        onTruncated: () => this.unreadable(context.timeline.terminal),
        onMalformed: () => this.unreadable(true),
      },
      { compressionDeclared: declaresCompression(context.grpcEncoding) },
    );
  }

  write(chunk: Buffer, nowMs: number): void {
    this.nowMs = nowMs;
    this.decoder.write(chunk);
  }

  trailers(trailers: IncomingHttpHeaders): void {
    readGrpcStatus(trailers, this.context, true);
  }

  end(nowMs: number): void {
    this.nowMs = nowMs;
    this.decoder.end();
  }

  /** `message` decoded as `type`, or undefined (counted `malformed_event`) when it is not one. */
  protected decode<T>(type: protobuf.Type, message: Buffer): T | undefined {
    try {
      return type.decode(message) as T;
    } catch {
      this.context.problem('malformed_event');
      return undefined;
    }
  }

  /**
   * A compressed message arrived. It is not decompressed (its size is unknown until it is): its
   * arrival is all that is measured, as one content event of one token, so TTFT is the first
   * message and ITL is per message. The counted tokens are then messages, and the final message
   * (which carries no new tokens) counts as one.
   */
  private compressed(): void {
    if (!this.compressedCounted) {
      this.compressedCounted = true;
      this.context.problem('compressed_message');
    }
    this.context.timeline.content(this.nowMs, 1);
  }

  /** Framing the client cannot read: counted, and with `failsCall` the call is an upstream error. */
  private unreadable(failsCall: boolean): void {
    this.context.problem('malformed_event');
    if (failsCall) this.context.timeline.errorEvent = true;
  }

  /** One uncompressed message, valid only during this call. */
  protected abstract onMessage(message: Buffer): void;
}

/** A `grpc-encoding` that names a compression (anything but absent, empty or `identity`, per PROTOCOL-HTTP2.md). */
function declaresCompression(encoding: string | undefined): boolean {
  if (encoding === undefined) return false;
  const name = encoding.trim().toLowerCase();
  return name !== '' && name !== 'identity';
}
