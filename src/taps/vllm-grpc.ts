import { VLLM_GENERATE_RESPONSE } from './grpc/engine-protos.js';
import { GenerateStreamTap } from './grpc/generate-stream-tap.js';
import type { Tap, TapContext } from './tap.js';

/** vLLM's `vllm.grpc.engine.VllmEngine/Generate` (`python -m vllm.entrypoints.grpc_server`, `vllm serve --grpc`): see grpc/generate-stream-tap.ts. */
export function createVllmGrpcTap(context: TapContext): Tap {
  return new GenerateStreamTap(context, VLLM_GENERATE_RESPONSE);
}
