import type { IncomingHttpHeaders } from 'node:http';
import type { TokenTimeline } from '../clock/token-timeline.js';

/**
 * A protocol tap observes a response body beside the stream: it sees every chunk exactly as it is
 * forwarded and reports to the request's timeline. It never sees the client's socket, so it cannot
 * change, delay or break what the client receives; if it throws, the proxy counts the error and
 * stops feeding it for that request.
 */
export interface Tap {
  /** Called with each body chunk, in order, at the time it arrived. Must not keep or mutate `chunk`. */
  write(chunk: Buffer, nowMs: number): void;
  /** The body ended cleanly. */
  end(nowMs: number): void;
  /**
   * The response's trailers (HTTP/2), or for a trailers-only response its headers: the gRPC taps
   * read `grpc-status` here. Called before end(). Protocols without trailers leave it out.
   */
  trailers?(trailers: IncomingHttpHeaders, nowMs: number): void;
}

/**
 * Problems counted per reason, never thrown: the first six a tap finds in the data
 * (`data_after_end`: events after the protocol's terminal event, ignored; `implausible_value`: a
 * token count or duration outside its plausible range, dropped: upstream-numbers.ts;
 * `compressed_message`: a gRPC response whose messages are compressed, measured by their arrival
 * only and never decompressed: grpc/grpc-message-tap.ts; `compressed_body`: a response with a
 * Content-Encoding, left untapped by the request monitor);
 * `tap_exception` is the tap itself throwing, counted by the request monitor, which then stops it.
 */
export type TapProblemReason = 'malformed_event' | 'oversized_event' | 'oversized_body' | 'data_after_end' | 'implausible_value' | 'compressed_message' | 'compressed_body' | 'tap_exception';

export interface TapContext {
  readonly timeline: TokenTimeline;
  /** The response's `grpc-encoding` (HTTP/2 only): whether a gRPC message's compressed flag is allowed (grpc/grpc-frame-decoder.ts). */
  readonly grpcEncoding?: string | undefined;
  /** The request set a deadline (`grpc-timeout`): a DEADLINE_EXCEEDED is then the client's deadline running out (grpc/grpc-status.ts). */
  readonly clientDeadline?: boolean;
  problem(reason: TapProblemReason): void;
}

export type TapFactory = (context: TapContext) => Tap;
