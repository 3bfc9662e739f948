import { randomBytes } from 'node:crypto';
import { OPENAI_CHAT } from './openai-protocol.js';
import { JSON_CONTENT_TYPE, type FinishReason } from './openai-wire.js';
import {
  countPromptTokens,
  messageTexts,
  parseJsonObject,
  type Protocol,
  type RequestProblem,
  type ResponseWriter,
} from './protocol.js';

/**
 * OpenAI's Responses API, `POST /v1/responses` (also served by vLLM), after the public reference
 * (platform.openai.com/docs/api-reference/responses and .../responses-streaming):
 *
 * - Streaming: SSE with a named event per payload, `event: <type>\ndata: <json>\n\n`, every payload
 *   carrying its `type` and a `sequence_number` counting from 0. Flow: `response.created` and
 *   `response.in_progress` (the Response, status "in_progress", output [], usage null), then when
 *   the first token is ready `response.output_item.added` (a message item, status "in_progress",
 *   content []) and `response.content_part.added` (an empty `output_text` part), one
 *   `response.output_text.delta` per chunk (`item_id`, `output_index`, `content_index`, `delta`,
 *   `logprobs` []), then `response.output_text.done` (the whole text), `response.content_part.done`,
 *   `response.output_item.done` (status "completed") and `response.completed` (the whole Response
 *   with `usage`). No `[DONE]`.
 * - A generation cut by max_output_tokens ends with `response.incomplete` instead: status
 *   "incomplete", `incomplete_details: {"reason":"max_output_tokens"}`, the item "incomplete".
 * - An in-stream failure is the `error` event: `{"type":"error","code","message","param","sequence_number"}`.
 * - The Response object's fields are written in the order of the reference's example; its
 *   `temperature`/`top_p` 1.0 are written 1 by JSON.stringify, the same number to every parser.
 * - Errors other than in-stream ones: the OpenAI error body, `{"error":{message,type,param,code}}`,
 *   as for chat completions (vLLM serves both with one ErrorResponse).
 */

const SSE_CONTENT_TYPE = 'text/event-stream; charset=utf-8';

/** `resp_` and `msg_` followed by 48 hex digits, as in the reference's examples. */
function responseId(prefix: string): string {
  return `${prefix}_${randomBytes(24).toString('hex')}`;
}

interface Usage {
  readonly input_tokens: number;
  readonly input_tokens_details: { readonly cached_tokens: number };
  readonly output_tokens: number;
  readonly output_tokens_details: { readonly reasoning_tokens: number };
  readonly total_tokens: number;
}

function usageOf(inputTokens: number, outputTokens: number): Usage {
  return {
    input_tokens: inputTokens,
    input_tokens_details: { cached_tokens: 0 },
    output_tokens: outputTokens,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: inputTokens + outputTokens,
  };
}

type Status = 'in_progress' | 'completed' | 'incomplete';

function outputText(text: string): Record<string, unknown> {
  return { type: 'output_text', text, annotations: [] };
}

function messageItem(id: string, status: Status, content: readonly Record<string, unknown>[]): Record<string, unknown> {
  return { id, type: 'message', status, role: 'assistant', content };
}

interface ResponseFields {
  readonly id: string;
  readonly createdAt: number;
  readonly model: string;
  readonly maxOutputTokens: number | null;
  readonly instructions: string | null;
}

function responseObject(
  fields: ResponseFields,
  status: Status,
  output: readonly Record<string, unknown>[],
  usage: Usage | null,
): Record<string, unknown> {
  return {
    id: fields.id,
    object: 'response',
    created_at: fields.createdAt,
    status,
    error: null,
    incomplete_details: status === 'incomplete' ? { reason: 'max_output_tokens' } : null,
    instructions: fields.instructions,
    max_output_tokens: fields.maxOutputTokens,
    model: fields.model,
    output,
    parallel_tool_calls: true,
    previous_response_id: null,
    reasoning: { effort: null, summary: null },
    store: true,
    temperature: 1.0,
    text: { format: { type: 'text' } },
    tool_choice: 'auto',
    tools: [],
    top_p: 1.0,
    truncation: 'disabled',
    usage,
    user: null,
    metadata: {},
  };
}

interface ResponsesRequestExtras {
  readonly instructions: string | null;
}

function invalid(message: string, param: string): { readonly problem: RequestProblem } {
  return { problem: { status: 400, message, type: 'invalid_request_error', param } };
}

const FINAL_STATUS: Readonly<Record<FinishReason, Status>> = { stop: 'completed', length: 'incomplete' };

export const OPENAI_RESPONSES: Protocol = {
  parse: (bodyText) => {
    const parsed = parseJsonObject(bodyText);
    if ('message' in parsed) return invalid(parsed.message, 'body');
    const { body } = parsed;
    const model = body['model'];
    if (model !== undefined && typeof model !== 'string') return invalid('model: Input should be a valid string', 'model');
    const input = body['input'];
    const texts = typeof input === 'string' ? [input] : Array.isArray(input) ? messageTexts(input) : undefined;
    if (texts === undefined) return invalid("Missing required parameter: 'input'.", 'input');
    const instructions = body['instructions'];
    if (typeof instructions === 'string') texts.push(instructions);
    const stream = body['stream'];
    if (stream !== undefined && stream !== null && typeof stream !== 'boolean') {
      return invalid('stream: Input should be a valid boolean', 'stream');
    }
    const maxOutputTokens = body['max_output_tokens'];
    if (maxOutputTokens !== undefined && maxOutputTokens !== null) {
      if (!Number.isInteger(maxOutputTokens) || (maxOutputTokens as number) < 1) {
        return invalid('max_output_tokens: Input should be an integer greater than or equal to 1', 'max_output_tokens');
      }
    }
    const request = {
      model,
      stream: stream === true,
      maxTokens: (maxOutputTokens ?? undefined) as number | undefined,
      promptTokens: countPromptTokens(texts),
      instructions: typeof instructions === 'string' ? instructions : null,
    };
    return { request };
  },

  errorResponse: OPENAI_CHAT.errorResponse,

  respond: (request, context): ResponseWriter => {
    const fields: ResponseFields = {
      id: responseId('resp'),
      createdAt: Math.floor(Date.now() / 1000),
      model: context.model,
      maxOutputTokens: request.maxTokens ?? null,
      instructions: (request as typeof request & ResponsesRequestExtras).instructions,
    };
    const itemId = responseId('msg');
    let sequence = 0;
    let itemOpen = false;
    const event = (type: string, payload: Record<string, unknown>): string =>
      `event: ${type}\ndata: ${JSON.stringify({ type, ...payload, sequence_number: sequence++ })}\n\n`;
    const part = { item_id: itemId, output_index: 0, content_index: 0 };
    /** The item and its part open with the first token, as the API sends them when output begins. */
    const openItem = (events: string[]): void => {
      if (itemOpen) return;
      itemOpen = true;
      events.push(
        event('response.output_item.added', { output_index: 0, item: messageItem(itemId, 'in_progress', []) }),
        event('response.content_part.added', { ...part, part: outputText('') }),
      );
    };
    return {
      streamContentType: SSE_CONTENT_TYPE,
      keepAlive: undefined,
      open: () => [
        event('response.created', { response: responseObject(fields, 'in_progress', [], null) }),
        event('response.in_progress', { response: responseObject(fields, 'in_progress', [], null) }),
      ],
      step: (tokens, finish, progress) => {
        const events: string[] = [];
        if (tokens.length > 0) {
          openItem(events);
          events.push(event('response.output_text.delta', { ...part, delta: tokens.join(''), logprobs: [] }));
        }
        if (finish === null) return events;
        openItem(events);
        const text = progress.text();
        const status = FINAL_STATUS[finish];
        const item = messageItem(itemId, status, [outputText(text)]);
        events.push(
          event('response.output_text.done', { ...part, text, logprobs: [] }),
          event('response.content_part.done', { ...part, part: outputText(text) }),
          event('response.output_item.done', { output_index: 0, item }),
          event(`response.${status}`, {
            response: responseObject(fields, status, [item], usageOf(context.promptTokens, progress.tokens)),
          }),
        );
        return events;
      },
      streamError: (message) => [event('error', { code: 'server_error', message, param: null })],
      body: (tokens, finish) => {
        const status = FINAL_STATUS[finish];
        const item = messageItem(itemId, status, [outputText(tokens.join(''))]);
        return {
          contentType: JSON_CONTENT_TYPE,
          body: JSON.stringify(responseObject(fields, status, [item], usageOf(context.promptTokens, tokens.length))),
        };
      },
    };
  },
};
