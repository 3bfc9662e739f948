import type { IncomingHttpHeaders } from 'node:http';
import { ManualClock } from '../../src/clock/clock.js';
import { TokenTimeline } from '../../src/clock/token-timeline.js';
import { ENGINE_PROTOS } from '../../src/taps/grpc/engine-protos.js';
import type { TapFactory } from '../../src/taps/tap.js';
import type { TapRun } from './tap-harness.js';

/** One gRPC length-prefixed message: flag byte, big-endian length, the message. */
export function grpcFrame(message: Uint8Array, compressed = false): Buffer {
  const prefix = Buffer.alloc(5);
  prefix[0] = compressed ? 1 : 0;
  prefix.writeUInt32BE(message.length, 1);
  return Buffer.concat([prefix, message]);
}

/** `object` encoded as the engine's full message type `typeName` (from the in-tree protos). */
export function encode(typeName: string, object: Record<string, unknown>): Uint8Array {
  const root = typeName.startsWith('inference.') ? ENGINE_PROTOS.triton : ENGINE_PROTOS.smg;
  const type = root.lookupType(typeName);
  const problem = type.verify(object);
  if (problem !== null) throw new Error(`${typeName}: ${problem}`);
  return type.encode(type.fromObject(object)).finish();
}

/**
 * Feeds `chunks` to a gRPC tap as runTap does (chunk i at startMs + i * stepMs on a fake clock),
 * then the `trailers`, then the end of the body; the response declared `grpcEncoding` if given.
 */
export function runGrpcTap(create: TapFactory, chunks: readonly Buffer[], trailers: IncomingHttpHeaders | undefined, stepMs = 10, startMs = 100, grpcEncoding?: string): TapRun {
  const clock = new ManualClock(0);
  const gaps: Array<[number, number]> = [];
  const problems: TapRun['problems'] = [];
  const timeline = new TokenTimeline(clock.nowMs(), { interToken: (gapMs, tokens) => gaps.push([gapMs, tokens]) });
  const tap = create({ timeline, grpcEncoding, problem: (reason) => problems.push(reason) });
  clock.advance(startMs - stepMs);
  for (const chunk of chunks) {
    clock.advance(stepMs);
    timeline.bytes(clock.nowMs());
    tap.write(chunk, clock.nowMs());
  }
  if (trailers !== undefined) tap.trailers?.(trailers, clock.nowMs());
  tap.end(clock.nowMs());
  return { timeline, gaps, problems };
}
