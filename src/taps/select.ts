import { createAnthropicSseTap } from './anthropic-sse.js';
import { createLlamaCppSseTap } from './llamacpp-sse.js';
import { createOllamaNdjsonTap } from './ollama-ndjson.js';
import { createOpenAIJsonTap } from './openai-json.js';
import { createOpenAIResponsesSseTap } from './openai-responses-sse.js';
import { createOpenAISseTap } from './openai-sse.js';
import { RouteTable, type Protocol } from './route-table.js';
import type { TapFactory } from './tap.js';
import { createTgiSseTap } from './tgi-sse.js';
import { createTritonSseTap } from './triton-sse.js';

export interface TapChoice {
  readonly create: TapFactory;
  /** A streamed protocol: it has a terminal event, and ending without one is `truncated`. */
  readonly streaming: boolean;
}

const SSE = 'text/event-stream';
const JSON_TYPE = 'application/json';
const NDJSON = 'application/x-ndjson';

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

  constructor(routes: RouteTable) {
    this.routes = routes;
  }

  /**
   * The request is on an inference route (any route, `none` included): a generation even when its
   * answer has no tap (an error, an unobserved protocol). Anything else is a generation only if its
   * response turns out to be one a tap reads (see select()).
   */
  routed(method: string, path: string): boolean {
    return this.routes.protocolFor(method, path) !== undefined;
  }

  /** The protocol of the route the request is on, `none` included; undefined off the routes. */
  protocolFor(method: string, path: string): Protocol | undefined {
    return this.routes.protocolFor(method, path);
  }

  select(method: string, path: string, contentType: string | undefined): TapChoice | undefined {
    const protocol = this.routes.protocolFor(method, path);
    if (protocol === 'none' || contentType === undefined) return undefined;
    const mediaType = contentType.split(';', 1)[0]!.trim().toLowerCase();
    const routed = protocol === undefined ? undefined : TAPS[protocol][mediaType];
    if (routed !== undefined) return routed;
    if (mediaType === SSE) return OPENAI_SSE;
    if (mediaType === JSON_TYPE && method === 'POST') return OPENAI_JSON;
    return undefined;
  }
}

/** The built-in routes alone, for a monitor built without configuration. */
export const DEFAULT_TAP_SELECTOR = new TapSelector(new RouteTable([]));
