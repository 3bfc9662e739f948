/**
 * Byte-exact bodies of vLLM's OpenAI-compatible server, pinned to vLLM 0.11.1 (November 2025).
 *
 * vLLM serialises pydantic models, so a field's position is its position in the model class
 * (vllm/entrypoints/openai/protocol.py) and which fields appear depends on how each call site
 * dumps them; every object literal below is written in that order and turned into compact JSON by
 * JSON.stringify, which writes non-ASCII as-is, as pydantic and Starlette's JSONResponse do.
 *
 * - Chat stream chunks: `model_dump_json(exclude_unset=True)` (serving_chat.py
 *   chat_completion_stream_generator), so only fields the call site sets appear: the role prelude
 *   carries `prompt_token_ids: null`, content chunks `token_ids: null`, and `stop_reason` appears
 *   only on the finish chunk.
 * - Completion stream chunks: `model_dump_json(exclude_unset=False)` (serving_completion.py), so
 *   every field appears, `usage: null` included. The first chunk's `prompt_token_ids` is null since
 *   vLLM PR #27561 (0.11.1); 0.10.2 to 0.11.0 sent the prompt's token ids there.
 * - The trailing usage-only chunk (`choices: []`): `exclude_none=True` on both endpoints, so usage
 *   is `{prompt_tokens, total_tokens, completion_tokens}`, in UsageInfo's field order.
 * - Non-streaming responses and errors: `JSONResponse(model.model_dump())`, every field.
 * - Errors: `{"error": {...}}` since vLLM PR #22099 (0.10.1); before it the object was flat
 *   (`{"object":"error","message":...}`).
 *
 * Checked against captures of vLLM 0.11 output published in issues and docs: PR #27561 (the
 * completion chunk), PR #19662 (`stop` comes in an empty-content chunk of its own: the EOS step,
 * whose text is empty) and issue #35705 (`length` rides on the last content chunk).
 */

import type { LoraAdapter } from './options.js';

export type FinishReason = 'stop' | 'length';

/** What every chunk of one response repeats. */
export interface ResponseIdentity {
  /** `chatcmpl-…` or `cmpl-…`. */
  readonly id: string;
  /** Unix seconds, the same for every chunk of a response. */
  readonly created: number;
  readonly model: string;
}

export interface TokenUsage {
  readonly promptTokens: number;
  readonly completionTokens: number;
}

/** Starlette adds the charset to every `text/*` media type; vLLM streams with `text/event-stream`. */
export const SSE_CONTENT_TYPE = 'text/event-stream; charset=utf-8';
export const JSON_CONTENT_TYPE = 'application/json';
export const SSE_DONE = 'data: [DONE]\n\n';

export function sseEvent(json: string): string {
  return `data: ${json}\n\n`;
}

function usageInfo(usage: TokenUsage): { prompt_tokens: number; total_tokens: number; completion_tokens: number } {
  return {
    prompt_tokens: usage.promptTokens,
    total_tokens: usage.promptTokens + usage.completionTokens,
    completion_tokens: usage.completionTokens,
  };
}

/** First chat chunk: role only. `usage` only with stream_options.continuous_usage_stats. */
export function chatRoleChunk(identity: ResponseIdentity, usage: TokenUsage | undefined): string {
  return JSON.stringify({
    id: identity.id,
    object: 'chat.completion.chunk',
    created: identity.created,
    model: identity.model,
    choices: [{ index: 0, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }],
    ...(usage === undefined ? {} : { usage: usageInfo(usage) }),
    prompt_token_ids: null,
  });
}

/** A chat content chunk; with a finish reason it is the stream's last choice chunk. */
export function chatContentChunk(
  identity: ResponseIdentity,
  content: string,
  finish: FinishReason | null,
  usage: TokenUsage | undefined,
): string {
  const choice =
    finish === null
      ? { index: 0, delta: { content }, logprobs: null, finish_reason: null, token_ids: null }
      : { index: 0, delta: { content }, logprobs: null, finish_reason: finish, stop_reason: null, token_ids: null };
  return JSON.stringify({
    id: identity.id,
    object: 'chat.completion.chunk',
    created: identity.created,
    model: identity.model,
    choices: [choice],
    ...(usage === undefined ? {} : { usage: usageInfo(usage) }),
  });
}

/**
 * The usage-only chunk sent after the finish chunk when stream_options.include_usage is set;
 * with `--enable-per-request-metrics` it also carries the request's `metrics` (vLLM 0.25, PR #46768).
 */
export function chatUsageChunk(identity: ResponseIdentity, usage: TokenUsage, metrics?: Record<string, number>): string {
  return JSON.stringify({
    id: identity.id,
    object: 'chat.completion.chunk',
    created: identity.created,
    model: identity.model,
    choices: [],
    usage: usageInfo(usage),
    ...(metrics === undefined ? {} : { metrics }),
  });
}

export function completionChunk(
  identity: ResponseIdentity,
  text: string,
  finish: FinishReason | null,
  usage: TokenUsage | undefined,
): string {
  return JSON.stringify({
    id: identity.id,
    object: 'text_completion',
    created: identity.created,
    model: identity.model,
    choices: [
      { index: 0, text, logprobs: null, finish_reason: finish, stop_reason: null, prompt_token_ids: null, token_ids: null },
    ],
    usage: usage === undefined ? null : { ...usageInfo(usage), prompt_tokens_details: null },
  });
}

export function completionUsageChunk(identity: ResponseIdentity, usage: TokenUsage, metrics?: Record<string, number>): string {
  return JSON.stringify({
    id: identity.id,
    object: 'text_completion',
    created: identity.created,
    model: identity.model,
    choices: [],
    usage: usageInfo(usage),
    ...(metrics === undefined ? {} : { metrics }),
  });
}

export function chatCompletionBody(
  identity: ResponseIdentity,
  content: string,
  finish: FinishReason,
  usage: TokenUsage,
): string {
  return JSON.stringify({
    id: identity.id,
    object: 'chat.completion',
    created: identity.created,
    model: identity.model,
    choices: [
      {
        index: 0,
        message: {
          role: 'assistant',
          content,
          refusal: null,
          annotations: null,
          audio: null,
          function_call: null,
          tool_calls: [],
          reasoning_content: null,
        },
        logprobs: null,
        finish_reason: finish,
        stop_reason: null,
        token_ids: null,
      },
    ],
    service_tier: null,
    system_fingerprint: null,
    usage: { ...usageInfo(usage), prompt_tokens_details: null },
    prompt_logprobs: null,
    prompt_token_ids: null,
    kv_transfer_params: null,
  });
}

export function completionBody(
  identity: ResponseIdentity,
  text: string,
  finish: FinishReason,
  usage: TokenUsage,
): string {
  return JSON.stringify({
    id: identity.id,
    object: 'text_completion',
    created: identity.created,
    model: identity.model,
    choices: [
      {
        index: 0,
        text,
        logprobs: null,
        finish_reason: finish,
        stop_reason: null,
        token_ids: null,
        prompt_logprobs: null,
        prompt_token_ids: null,
      },
    ],
    service_tier: null,
    system_fingerprint: null,
    usage: { ...usageInfo(usage), prompt_tokens_details: null },
    kv_transfer_params: null,
  });
}

/**
 * `GET /v1/models`: vLLM's ModelList, the served model's card (its name as id and root, parent
 * null) then one card per LoRA adapter, as vLLM's `show_available_models` builds them
 * (vllm/entrypoints/openai/serving_models.py, vllm-project/vllm@075e9ba825513f0e50ae1a5185d6db0ee405f84e):
 * root the adapter's path, parent its base model, max_model_len null.
 */
export function modelList(model: string, loras: readonly LoraAdapter[], created: number, permissionId: () => string, maxModelLen: number): string {
  const card = (id: string, root: string, parent: string | null, maxLen: number | null) => ({
    id,
    object: 'model',
    created,
    owned_by: 'vllm',
    root,
    parent,
    max_model_len: maxLen,
    permission: [
      {
        id: permissionId(),
        object: 'model_permission',
        created,
        allow_create_engine: false,
        allow_sampling: true,
        allow_logprobs: true,
        allow_search_indices: false,
        allow_view: true,
        allow_fine_tuning: false,
        organization: '*',
        group: null,
        is_blocking: false,
      },
    ],
  });
  return JSON.stringify({
    object: 'list',
    data: [card(model, model, null, maxModelLen), ...loras.map((lora) => card(lora.name, `/adapters/${lora.name}`, lora.base, null))],
  });
}

/**
 * vLLM's ErrorResponse. `type` is "BadRequestError", "NotFoundError" or "InternalServerError" from
 * the serving layer (create_error_response), or the HTTP reason phrase ("Bad Request") from the
 * request-validation and HTTPException handlers in api_server.py.
 */
export function errorBody(message: string, type: string, code: number, param: string | null): string {
  return JSON.stringify({ error: { message, type, param, code } });
}

/**
 * The event vLLM yields when generation fails mid-stream (create_streaming_error_response in
 * serving_engine.py), followed by `data: [DONE]`. Unlike every other body it is written by Python's
 * `json.dumps` with its default separators, hence the spaces after `:` and `,`; the simulator's
 * messages are ASCII, so `ensure_ascii` changes nothing.
 */
export function streamingErrorData(message: string, type: string, code: number): string {
  return `{"error": {"message": ${JSON.stringify(message)}, "type": ${JSON.stringify(type)}, "param": null, "code": ${code}}}`;
}

/**
 * FastAPI's own body for routing errors. vLLM registers its error handler for fastapi's
 * HTTPException, but the router raises Starlette's base class, so an unknown path or a wrong
 * method gets FastAPI's default `{"detail": ...}`.
 */
export function detailBody(detail: string): string {
  return JSON.stringify({ detail });
}
