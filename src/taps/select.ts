import { createAnthropicSseTap } from './anthropic-sse.js';
import { GRPC_METHODS } from './grpc/engine-protos.js';
import { createGrpcStatusTap } from './grpc/grpc-message-tap.js';
import { createLlamaCppSseTap } from './llamacpp-sse.js';
import { createOllamaNdjsonTap } from './ollama-ndjson.js';
import { createOpenAIJsonTap } from './openai-json.js';
import { createOpenAIResponsesSseTap } from './openai-responses-sse.js';
import { createOpenAISseTap } from './openai-sse.js';
import { RouteTable, type Protocol } from './route-table.js';
import type { TapFactory } from './tap.js';
import { createTgiSseTap } from './tgi-sse.js';
import { createSglangGrpcTap } from './sglang-grpc.js';
import { createTritonGrpcTap } from './triton-grpc.js';
import { createTritonSseTap } from './triton-sse.js';
import { createTrtllmGrpcTap } from './trtllm-grpc.js';
import { createVllmGrpcTap } from './vllm-grpc.js';

export interface TapChoice {
  readonly create: TapFactory;
  /** A streamed protocol: it has a terminal event, and ending without one is `truncated`. */
  readonly streaming: boolean;
}

const SSE = 'text/event-stream';
const JSON_TYPE = 'application/json';
const NDJSON = 'application/x-ndjson';

/**
 * gRPC responses (`application/grpc`, `application/grpc+proto`): the tap of the method named by the
 * path (`/package.Service/Method`, from the engines' own protos: grpc/engine-protos.ts), a stream
 * whose end without a grpc-status is `truncated`; for any other method the outcome of a failure
 * alone, from its grpc-status.
 */
const GRPC_MEDIA_TYPES: ReadonlySet<string> = new Set(['application/grpc', 'application/grpc+proto']);
const GRPC_TAPS: ReadonlyMap<string, TapChoice> = new Map([
  [GRPC_METHODS.vllmGenerate, { create: createVllmGrpcTap, streaming: true }],
  [GRPC_METHODS.sglangGenerate, { create: createSglangGrpcTap, streaming: true }],
  [GRPC_METHODS.trtllmGenerate, { create: createTrtllmGrpcTap, streaming: true }],
  [GRPC_METHODS.tritonModelStreamInfer, { create: createTritonGrpcTap, streaming: true }],
]);
const GRPC_STATUS_ONLY: TapChoice = { create: createGrpcStatusTap, streaming: false };

const OPENAI_SSE: TapChoice = { create: createOpenAISseTap, streaming: true };
const OPENAI_JSON: TapChoice = { create: createOpenAIJsonTap, streaming: false };

/** Per protocol: the tap for each response media type it streams in. */
const TAPS: Readonly<Record<Exclude<Protocol, 'none'>, Readonly<Record<string, TapChoice>>>> = {
  'openai-chat': { [SSE]: OPENAI_SSE, [JSON_TYPE]: OPENAI_JSON },
  'openai-completions': { [SSE]: OPENAI_SSE, [JSON_TYPE]: OPENAI_JSON },
  'openai-responses': { [SSE]: { create: createOpenAIResponsesSseTap, streaming: true }, [JSON_TYPE]: OPENAI_JSON },
  'anthropic-messages': { [SSE]: { create: createAnthropicSseTap, streaming: true }, [JSON_TYPE]: OPENAI_JSON },
  tgi: { [SSE]: { create: createTgiSseTap, streaming: true } },
  ollama: { [NDJSON]: { create: createOllamaNdjsonTap, streaming: true }, [JSON_TYPE]: OPENAI_JSON },
  llamacpp: { [SSE]: { create: createLlamaCppSseTap, streaming: true } },
  triton: { [SSE]: { create: createTritonSseTap, streaming: true } },
};

/**
 * Chooses the tap for a response from the request's method and path (through the route table) and
 * the response's content type. A routed protocol whose usual media type does not match falls back
 * to the content type alone (llama.cpp answers `/api/chat` in OpenAI SSE, not Ollama NDJSON): SSE
 * is read as OpenAI chat/completions, which most servers speak, and a POST's JSON as an OpenAI-style
 * body with `usage`. Anything else, and a route to `none`, passes through unobserved except for
 * TTFB and e2e.
 */
export class TapSelector {
  private readonly routes: RouteTable;
  /** The last Content-Type seen and its media type: a server answers every response with the same one. */
  private lastContentType: string | undefined;
  private lastMediaType = '';

  constructor(routes: RouteTable) {
    this.routes = routes;
  }

  /** The media type of a Content-Type value, lower-cased, without parameters. */
  private mediaTypeOf(contentType: string): string {
    if (contentType !== this.lastContentType) {
      this.lastMediaType = contentType.split(';', 1)[0]!.trim().toLowerCase();
      this.lastContentType = contentType;
    }
    return this.lastMediaType;
  }

  /**
   * The request is on an inference route (any route, `none` included) or is a gRPC generation
   * method with a tap: a generation even when its answer has no tap (an error, an unobserved protocol). Anything else is a generation only if its
   * response turns out to be one a tap reads (see select()).
   */
  routed(method: string, path: string): boolean {
    return this.routedOn(this.routes.protocolFor(method, path), path);
  }

  /** routed(), for a request whose route's protocol (protocolFor()) is known already. */
  routedOn(protocol: Protocol | undefined, path: string): boolean {
    return protocol !== undefined || GRPC_TAPS.has(path);
  }

  /** The protocol of the route the request is on, `none` included; undefined off the routes. */
  protocolFor(method: string, path: string): Protocol | undefined {
    return this.routes.protocolFor(method, path);
  }

  select(method: string, path: string, contentType: string | undefined): TapChoice | undefined {
    return this.selectOn(this.routes.protocolFor(method, path), method, path, contentType);
  }

  /** select(), for a request whose route's protocol (protocolFor()) is known already: one route lookup per request. */
  selectOn(protocol: Protocol | undefined, method: string, path: string, contentType: string | undefined): TapChoice | undefined {
    if (protocol === 'none' || contentType === undefined) return undefined;
    const mediaType = this.mediaTypeOf(contentType);
    if (GRPC_MEDIA_TYPES.has(mediaType)) return GRPC_TAPS.get(path) ?? GRPC_STATUS_ONLY;
    const routed = protocol === undefined ? undefined : TAPS[protocol][mediaType];
    if (routed !== undefined) return routed;
    if (mediaType === SSE) return OPENAI_SSE;
    if (mediaType === JSON_TYPE && method === 'POST') return OPENAI_JSON;
    return undefined;
  }
}

/** The built-in routes alone, for a monitor built without configuration. */
export const DEFAULT_TAP_SELECTOR = new TapSelector(new RouteTable([]));
