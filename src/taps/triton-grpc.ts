import type protobuf from 'protobufjs';
import { TRITON_STREAM_RESPONSE, type TritonStreamResponseView } from './grpc/engine-protos.js';
import { GrpcMessageTap } from './grpc/grpc-message-tap.js';
import type { Tap, TapContext } from './tap.js';
import { eventTokens, MAX_TOKENS_PER_EVENT } from './upstream-numbers.js';

/**
 * NVIDIA Triton's `inference.GRPCInferenceService/ModelStreamInfer` (proto/triton/grpc_service.proto),
 * the token output of a decoupled model: one `ModelStreamInferResponse` per response of the model.
 *
 * Content-bearing, with its token count:
 * - an `output_ids` output tensor (TensorRT-LLM's backend streams the new token ids, shape
 *   [batch, beam, tokens]): as many tokens as the tensor has elements, so per-token ITL is exact;
 * - otherwise a non-empty `text_output` (vLLM's and Python backends stream text): one token per
 *   response, as the SSE generate extension is counted (triton-sse.ts), since text carries no count.
 * A response with neither (the empty final response a client may ask for) is not content.
 *
 * Errors: Triton reports a failed inference in the stream, as a response whose `error_message` is
 * set, and the call itself still ends OK: that is an upstream error. The outcome otherwise follows
 * the call's grpc-status. One gRPC stream is one measured request: a client that sends several
 * inference requests on one stream has them measured together, from the first.
 */
export function createTritonGrpcTap(context: TapContext): Tap {
  return new TritonGrpcTap(context);
}

type Dimension = number | protobuf.Long;

class TritonGrpcTap extends GrpcMessageTap {
  protected override onMessage(message: Buffer): void {
    const response = this.decode<TritonStreamResponseView>(TRITON_STREAM_RESPONSE, message);
    if (response === undefined) return;
    const timeline = this.context.timeline;
    if (typeof response.error_message === 'string' && response.error_message.length > 0) {
      timeline.errorEvent = true;
      return;
    }
    const infer = response.infer_response;
    if (infer == null) return;
    const outputs = infer.outputs ?? [];
    let text = false;
    for (let i = 0; i < outputs.length; i++) {
      const output = outputs[i]!;
      if (output.name === 'output_ids') {
        const tokens = this.elements(output.shape ?? []);
        if (tokens > 0) timeline.content(this.nowMs, tokens);
        return;
      }
      if (output.name === 'text_output') text = nonEmptyBytes(infer.raw_output_contents?.[i], output.contents?.bytes_contents);
    }
    if (text) timeline.content(this.nowMs, 1);
  }

  /** The elements of a tensor of `shape`, bounded as tokens of one event (upstream-numbers.ts); 1 when implausible. */
  private elements(shape: readonly Dimension[]): number {
    let count = 1;
    for (const dimension of shape) {
      // An int64 beyond 2^53 decodes as a Long: its value from the two 32-bit halves (negative when the high half is).
      const value = typeof dimension === 'number' ? dimension : dimension.high * 0x1_0000_0000 + (dimension.low >>> 0);
      if (!Number.isSafeInteger(value) || value < 0) return eventTokens(MAX_TOKENS_PER_EVENT + 1, 1, this.context);
      count *= value;
      if (count > MAX_TOKENS_PER_EVENT) return eventTokens(count, 1, this.context);
    }
    return count;
  }
}

/**
 * A BYTES tensor holds text: as raw contents, each element a 4-byte length then its bytes (so more
 * than 4 bytes is a non-empty element), or as `bytes_contents` elements.
 */
function nonEmptyBytes(raw: Uint8Array | undefined, elements: readonly Uint8Array[] | undefined): boolean {
  if (raw !== undefined && raw.length > 0) return raw.length > 4;
  return elements !== undefined && elements.some((element) => element.length > 0);
}
