import { SGLANG_GENERATE_RESPONSE } from './grpc/engine-protos.js';
import { GenerateStreamTap } from './grpc/generate-stream-tap.js';
import type { Tap, TapContext } from './tap.js';

/** SGLang's scheduler `sglang.grpc.scheduler.SglangScheduler/Generate` (`--grpc-mode`): see grpc/generate-stream-tap.ts. */
export function createSglangGrpcTap(context: TapContext): Tap {
  return new GenerateStreamTap(context, SGLANG_GENERATE_RESPONSE);
}
