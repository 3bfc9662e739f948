import { TRTLLM_GENERATE_RESPONSE } from './grpc/engine-protos.js';
import { GenerateStreamTap } from './grpc/generate-stream-tap.js';
import type { Tap, TapContext } from './tap.js';

/** TensorRT-LLM's `trtllm.TrtllmService/Generate` (`trtllm-serve --grpc`): see grpc/generate-stream-tap.ts. */
export function createTrtllmGrpcTap(context: TapContext): Tap {
  return new GenerateStreamTap(context, TRTLLM_GENERATE_RESPONSE);
}
