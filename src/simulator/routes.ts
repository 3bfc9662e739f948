import { ANTHROPIC_MESSAGES } from './anthropic-wire.js';
import { LLAMACPP_COMPLETION } from './llamacpp-wire.js';
import { OLLAMA_CHAT, OLLAMA_GENERATE } from './ollama-wire.js';
import { OPENAI_CHAT, OPENAI_COMPLETIONS } from './openai-protocol.js';
import { OPENAI_RESPONSES } from './openai-responses-wire.js';
import type { Protocol, RouteParams } from './protocol.js';
import { TGI_GENERATE, TGI_GENERATE_STREAM } from './tgi-wire.js';
import { TRITON_GENERATE, TRITON_GENERATE_STREAM } from './triton-wire.js';

/**
 * The simulator's generation endpoints: each path at the place the real server serves it
 * (DESIGN.md section 4), all POST.
 */

const EXACT_ROUTES: ReadonlyMap<string, Protocol> = new Map([
  ['/v1/chat/completions', OPENAI_CHAT],
  ['/v1/completions', OPENAI_COMPLETIONS],
  ['/v1/responses', OPENAI_RESPONSES],
  ['/v1/messages', ANTHROPIC_MESSAGES],
  ['/generate_stream', TGI_GENERATE_STREAM],
  ['/generate', TGI_GENERATE],
  ['/api/chat', OLLAMA_CHAT],
  ['/api/generate', OLLAMA_GENERATE],
  ['/completion', LLAMACPP_COMPLETION],
  // llama.cpp serves its native endpoint under both names.
  ['/completions', LLAMACPP_COMPLETION],
]);

/** Triton: /v2/models/{model}[/versions/{version}]/generate[_stream]. */
const TRITON_ROUTE = /^\/v2\/models\/([^/]+)(?:\/versions\/([^/]+))?\/(generate|generate_stream)$/;

/** For `simulate --help`: every endpoint and the API it speaks. */
export const ENDPOINTS_HELP = [
  '  POST /v1/chat/completions, /v1/completions   OpenAI chat and completions (vLLM 0.11 bytes)',
  '  POST /v1/responses                           OpenAI Responses API (typed SSE events)',
  '  POST /v1/messages                            Anthropic Messages',
  '  POST /generate_stream, /generate             Hugging Face TGI',
  '  POST /api/chat, /api/generate                Ollama (NDJSON)',
  '  POST /completion                             llama.cpp native',
  '  POST /v2/models/{model}/generate[_stream]    Triton generate extension',
  '  GET  /v1/models, /health                     vLLM model list and health',
  '  GET  /metrics                                vLLM engine series (num_requests_running, kv_cache_usage_perc, ...)',
  'With --h2c-port, on that port (HTTP/2 cleartext, prior knowledge): every endpoint above, and',
  '  gRPC /vllm.grpc.engine.VllmEngine/Generate     vLLM gRPC (server streaming)',
  '  gRPC /inference.GRPCInferenceService/ModelStreamInfer   Triton decoupled streaming',
].join('\n');

export interface GenerationRoute {
  readonly protocol: Protocol;
  readonly params: RouteParams;
}

const NO_PARAMS: RouteParams = Object.freeze({});

export function matchGenerationRoute(path: string): GenerationRoute | undefined {
  const exact = EXACT_ROUTES.get(path);
  if (exact !== undefined) return { protocol: exact, params: NO_PARAMS };
  const triton = TRITON_ROUTE.exec(path);
  if (triton === null) return undefined;
  const [, model = '', version, endpoint] = triton;
  let name: string;
  try {
    name = decodeURIComponent(model);
  } catch {
    return undefined;
  }
  return {
    protocol: endpoint === 'generate_stream' ? TRITON_GENERATE_STREAM : TRITON_GENERATE,
    params: version === undefined ? { model: name } : { model: name, version },
  };
}
