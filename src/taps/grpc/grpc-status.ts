import type { IncomingHttpHeaders } from 'node:http';
import type { Outcome } from '../../metrics/recorder.js';

/**
 * A gRPC call's outcome from its `grpc-status` (the status codes of grpc/grpc doc/statuscodes.md),
 * carried in the trailers, or in the only HEADERS frame of a trailers-only response. The table is
 * in docs/protocols.md#grpc-status; it follows the codes' HTTP equivalents in google/rpc/code.proto
 * and the rule tokentap applies to HTTP statuses (slo-events.ts isClientErrorStatus): what the
 * client asked for wrong is `client_error`, what the server failed to do is `upstream_error`.
 *
 * - OK: `completed` (unless the stream itself reported an error, as Triton does in a message).
 * - CANCELLED: `upstream_error`. A client cancels by resetting its stream (RST_STREAM), never with a
 *   status: the proxy sees that reset first and records the request `client_cancelled` there
 *   (stream-relay.ts clientClosed), before any trailer could arrive. A CANCELLED that reaches the
 *   monitor in trailers was sent by the engine (or a proxy before it) to a client still waiting:
 *   the server side gave up, and counting it as the client's would keep it out of the SLO.
 * - DEADLINE_EXCEEDED: `timeout` when the client set no deadline (the server's own ran out). When
 *   the request carried `grpc-timeout`, `client_cancelled`: the client's deadline ran out, the same
 *   event as a client that resets its stream when its own timer fires first (which of the two
 *   timers wins is a race), judged as a client that left after waiting that long (slo-events.ts:
 *   bad once it waited past a threshold). As `timeout`, any client could burn the SLO at any
 *   speed of service by asking for `grpc-timeout: 1m`.
 * - INVALID_ARGUMENT, NOT_FOUND, ALREADY_EXISTS, PERMISSION_DENIED, FAILED_PRECONDITION,
 *   OUT_OF_RANGE, UNAUTHENTICATED: `client_error` (HTTP 400, 404, 409, 403, 400, 400, 401).
 * - UNKNOWN, RESOURCE_EXHAUSTED (the engine is full: HTTP 429, counted as a failure like 429),
 *   ABORTED (the engine aborted the request), UNIMPLEMENTED (501), INTERNAL, UNAVAILABLE, DATA_LOSS,
 *   and any code outside the table: `upstream_error`.
 */
const OUTCOME_BY_CODE: readonly Outcome[] = [
  'completed', // 0 OK
  'upstream_error', // 1 CANCELLED (sent by the server: a client's cancel is its RST_STREAM, seen by the proxy)
  'upstream_error', // 2 UNKNOWN
  'client_error', // 3 INVALID_ARGUMENT
  'timeout', // 4 DEADLINE_EXCEEDED
  'client_error', // 5 NOT_FOUND
  'client_error', // 6 ALREADY_EXISTS
  'client_error', // 7 PERMISSION_DENIED
  'upstream_error', // 8 RESOURCE_EXHAUSTED
  'client_error', // 9 FAILED_PRECONDITION
  'upstream_error', // 10 ABORTED
  'client_error', // 11 OUT_OF_RANGE
  'upstream_error', // 12 UNIMPLEMENTED
  'upstream_error', // 13 INTERNAL
  'upstream_error', // 14 UNAVAILABLE
  'upstream_error', // 15 DATA_LOSS
  'client_error', // 16 UNAUTHENTICATED
];

const DEADLINE_EXCEEDED = 4;

/** The outcome of a call that ended with status `code`; `clientDeadline`: the request set `grpc-timeout`. */
export function outcomeOfGrpcStatus(code: number, clientDeadline: boolean): Outcome {
  if (code === DEADLINE_EXCEEDED && clientDeadline) return 'client_cancelled';
  return OUTCOME_BY_CODE[code] ?? 'upstream_error';
}

/** A decimal code of at most 10 digits (a 32-bit value); anything else is not a status. */
const STATUS_PATTERN = /^\d{1,10}$/;

/**
 * The status code in `headers` (trailers, or a trailers-only response's headers): a number, or
 * undefined when there is no `grpc-status`, or `NaN` when there is one that is not a status code
 * (repeated, empty, not decimal).
 */
export function grpcStatusOf(headers: IncomingHttpHeaders): number | undefined {
  const value = headers['grpc-status'];
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || !STATUS_PATTERN.test(value)) return Number.NaN;
  return Number(value);
}
