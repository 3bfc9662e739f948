import { GRPC_METHODS, TRITON_INFER_REQUEST_MODEL } from './engine-protos.js';
import { MAX_MESSAGE_BYTES } from './grpc-frame-decoder.js';

const PREFIX_BYTES = 5;

/**
 * Whether the requests of the gRPC method at `path` name their model (Triton's `model_name`). The
 * Generate requests of vLLM, SGLang and TensorRT-LLM carry none (an engine serves one model), so
 * their model label comes from the served model (model discovery) or is `unknown`.
 */
export function grpcRequestNamesModel(path: string): boolean {
  return path === GRPC_METHODS.tritonModelStreamInfer || path === GRPC_METHODS.tritonModelInfer;
}

/**
 * The model the first request message of a gRPC call names, for the model label: `body` is the
 * request body from its first byte, as much of it as the wire holds (it bounds that, as it bounds
 * the HTTP/1.1 body it sniffs). Undefined when the method names no model, when the first message is
 * not wholly in `body`, is compressed or over the message cap, or is not the method's protobuf.
 * Never throws; decodes the one message at most once.
 */
export function grpcRequestModel(path: string, body: Buffer): string | undefined {
  if (!grpcRequestNamesModel(path) || body.length < PREFIX_BYTES || body[0] !== 0) return undefined;
  const length = body.readUInt32BE(1);
  if (length > MAX_MESSAGE_BYTES || body.length - PREFIX_BYTES < length) return undefined;
  try {
    const request = TRITON_INFER_REQUEST_MODEL.decode(body.subarray(PREFIX_BYTES, PREFIX_BYTES + length)) as { model_name?: unknown };
    return typeof request.model_name === 'string' && request.model_name !== '' ? request.model_name : undefined;
  } catch {
    return undefined;
  }
}
