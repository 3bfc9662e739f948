import { fileURLToPath } from 'node:url';
import protobuf from 'protobufjs';

/**
 * The message types the gRPC taps decode, taken from the engines' own `.proto` files (proto/, with
 * their licences and source commits in proto/README.md), parsed by protobufjs once when this
 * module loads.
 *
 * Each tap decodes a view of its engine's response holding only the fields it reads, with the
 * names and numbers of the engine's file: protobufjs skips every other field without building it,
 * so a chunk's logprobs or hidden states, or a final message's full `output_ids`, cost the tap no
 * allocation. A view names its fields; a field the engine's file no longer has (renamed or
 * removed upstream) fails here, at start-up, naming it, never as silently wrong numbers.
 */

const PROTO_DIR = new URL('./proto/', import.meta.url);

/** Which fields of a message to keep: `true` for a scalar, a nested view for a message-typed field. */
interface View {
  readonly [field: string]: View | true;
}

function loadRoot(files: readonly string[]): protobuf.Root {
  const root = new protobuf.Root();
  root.loadSync(
    files.map((file) => fileURLToPath(new URL(file, PROTO_DIR))),
    { keepCase: true },
  );
  root.resolveAll();
  return root;
}

/** A type with only `view`'s fields of `source`, added to `into` as `name` (nested views beside it). */
function prune(source: protobuf.Type, view: View, into: protobuf.Namespace, name: string): protobuf.Type {
  const type = new protobuf.Type(name);
  into.add(type);
  for (const [fieldName, nested] of Object.entries(view)) {
    const field = source.fields[fieldName];
    if (field === undefined) throw new Error(`${source.fullName} has no field "${fieldName}": the engine's proto changed; see src/taps/grpc/proto/README.md`);
    const rule = field.repeated ? 'repeated' : undefined;
    if (nested === true) {
      if (field.resolvedType instanceof protobuf.Type) throw new Error(`${source.fullName}.${fieldName} is a message, not a scalar`);
      type.add(new protobuf.Field(fieldName, field.id, field.type, rule));
    } else {
      if (!(field.resolvedType instanceof protobuf.Type)) throw new Error(`${source.fullName}.${fieldName} is not a message`);
      const nestedName = `${name}_${fieldName}`;
      prune(field.resolvedType, nested, into, nestedName);
      type.add(new protobuf.Field(fieldName, field.id, nestedName, rule));
    }
  }
  return type;
}

function view(root: protobuf.Root, typeName: string, fields: View, viewName: string): protobuf.Type {
  return prune(root.lookupType(typeName), fields, VIEWS, viewName);
}

const VIEWS = new protobuf.Root();

const SMG = loadRoot(['smg/vllm_engine.proto', 'smg/sglang_scheduler.proto', 'smg/trtllm_service.proto']);
const TRITON = loadRoot(['triton/grpc_service.proto']);

/** The engines' full definitions, for what writes their messages (the simulator, tests). */
export const ENGINE_PROTOS: { readonly smg: protobuf.Root; readonly triton: protobuf.Root } = { smg: SMG, triton: TRITON };

/** A streamed chunk of new tokens, with the engine's cumulative counts. */
const CHUNK: View = { token_ids: true, prompt_tokens: true, completion_tokens: true, cached_tokens: true };
/** The final message of one output sequence. */
const COMPLETE: View = { finish_reason: true, prompt_tokens: true, completion_tokens: true, cached_tokens: true };
const GENERATE_RESPONSE: View = { chunk: CHUNK, complete: COMPLETE };

/**
 * What the taps read of a Generate response (vLLM, SGLang and TensorRT-LLM name these fields alike).
 * protobufjs gives an absent repeated field as an empty array and an absent scalar as its default.
 */
export interface GenerateResponseView {
  chunk?: { token_ids: number[]; prompt_tokens?: number; completion_tokens?: number; cached_tokens?: number } | null;
  complete?: { finish_reason?: string; prompt_tokens?: number; completion_tokens?: number; cached_tokens?: number } | null;
}

export const VLLM_GENERATE_RESPONSE = view(SMG, 'vllm.grpc.engine.GenerateResponse', GENERATE_RESPONSE, 'VllmGenerateResponse');
export const SGLANG_GENERATE_RESPONSE = view(SMG, 'sglang.grpc.scheduler.GenerateResponse', GENERATE_RESPONSE, 'SglangGenerateResponse');
export const TRTLLM_GENERATE_RESPONSE = view(SMG, 'trtllm.GenerateResponse', GENERATE_RESPONSE, 'TrtllmGenerateResponse');

/** What the Triton tap reads of one `ModelStreamInfer` response. */
export interface TritonStreamResponseView {
  error_message?: string;
  infer_response?: {
    outputs?: Array<{ name?: string; datatype?: string; shape?: Array<number | protobuf.Long>; contents?: { bytes_contents?: Uint8Array[] } | null }>;
    raw_output_contents?: Uint8Array[];
  } | null;
}

export const TRITON_STREAM_RESPONSE = view(
  TRITON,
  'inference.ModelStreamInferResponse',
  { error_message: true, infer_response: { outputs: { name: true, datatype: true, shape: true, contents: { bytes_contents: true } }, raw_output_contents: true } },
  'TritonStreamResponse',
);

/** The model a Triton request names (`ModelInferRequest.model_name`), for the model label. */
export const TRITON_INFER_REQUEST_MODEL = view(TRITON, 'inference.ModelInferRequest', { model_name: true }, 'TritonInferRequestModel');

VIEWS.resolveAll();

/** The gRPC method paths (`/package.Service/Method`) of the streams the taps read, from the engines' files. */
export const GRPC_METHODS = {
  vllmGenerate: methodPath(SMG, 'vllm.grpc.engine.VllmEngine', 'Generate'),
  sglangGenerate: methodPath(SMG, 'sglang.grpc.scheduler.SglangScheduler', 'Generate'),
  trtllmGenerate: methodPath(SMG, 'trtllm.TrtllmService', 'Generate'),
  tritonModelStreamInfer: methodPath(TRITON, 'inference.GRPCInferenceService', 'ModelStreamInfer'),
  tritonModelInfer: methodPath(TRITON, 'inference.GRPCInferenceService', 'ModelInfer'),
} as const;

function methodPath(root: protobuf.Root, serviceName: string, method: string): string {
  const service = root.lookupService(serviceName);
  if (service.methods[method] === undefined) throw new Error(`${serviceName} has no method ${method}: the engine's proto changed; see src/taps/grpc/proto/README.md`);
  // The service's full name starts with a dot (".vllm.grpc.engine.VllmEngine").
  return `/${service.fullName.slice(1)}/${method}`;
}
