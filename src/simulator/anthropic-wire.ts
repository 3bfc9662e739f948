import { randomBytes } from 'node:crypto';
import type { FinishReason } from './openai-wire.js';
import {
  countPromptTokens,
  messageTexts,
  parseJsonObject,
  type Protocol,
  type RequestProblem,
  type ResponseWriter,
} from './protocol.js';

/**
 * Anthropic's Messages API, `POST /v1/messages` (also served by vLLM and llama.cpp), after the
 * public reference (docs.anthropic.com/en/api/messages, .../messages-streaming, .../errors):
 *
 * - Streaming: SSE with a named event per payload, `event: <type>\ndata: <json>\n\n`, the event name
 *   repeated as the payload's `type`. Flow: `message_start` (a Message with empty `content` and
 *   usage: input_tokens and output_tokens 1), `content_block_start` (index 0, an empty text block),
 *   `ping`, one `content_block_delta` (`text_delta`) per chunk, `content_block_stop`,
 *   `message_delta` (`stop_reason`, `stop_sequence`, and cumulative usage: output_tokens), then
 *   `message_stop`. A failure mid-stream is `event: error` with an error object (the reference's
 *   example is `overloaded_error`, the streaming twin of HTTP 529).
 * - The docs print payloads with a space after `:` and `,` for readability; the API itself sends
 *   compact JSON, which is what the simulator writes.
 * - Non-streaming: the Message object, `stop_reason` "end_turn" or "max_tokens".
 * - Errors: `{"type":"error","error":{"type":...,"message":...},"request_id":...}` with the type
 *   for each status from the errors page.
 */

const SSE_CONTENT_TYPE = 'text/event-stream; charset=utf-8';
const JSON_CONTENT_TYPE = 'application/json';

/** The error `type` per HTTP status (docs.anthropic.com/en/api/errors). */
const ERROR_TYPES: Readonly<Record<number, string>> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  403: 'permission_error',
  404: 'not_found_error',
  413: 'request_too_large',
  429: 'rate_limit_error',
  500: 'api_error',
  529: 'overloaded_error',
};

const STOP_REASON: Readonly<Record<FinishReason, string>> = { stop: 'end_turn', length: 'max_tokens' };

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/** Ids like the API's (`msg_01XFDUDYJgAACzvnptvVoYEL`): a prefix, "01" and 22 base-62 characters. */
function anthropicId(prefix: string): string {
  let id = `${prefix}_01`;
  for (const byte of randomBytes(22)) id += BASE62[byte % 62];
  return id;
}

function event(type: string, json: string): string {
  return `event: ${type}\ndata: ${json}\n\n`;
}

function errorJson(type: string, message: string): string {
  return JSON.stringify({ type: 'error', error: { type, message } });
}

function invalid(message: string): { readonly problem: RequestProblem } {
  return { problem: { status: 400, message } };
}

function message(
  id: string,
  model: string,
  content: readonly { type: 'text'; text: string }[],
  stopReason: string | null,
  usage: { input_tokens: number; output_tokens: number },
): Record<string, unknown> {
  return { id, type: 'message', role: 'assistant', model, content, stop_reason: stopReason, stop_sequence: null, usage };
}

export const ANTHROPIC_MESSAGES: Protocol = {
  parse: (bodyText) => {
    const parsed = parseJsonObject(bodyText);
    if ('message' in parsed) return invalid(parsed.message);
    const { body } = parsed;
    const model = body['model'];
    if (typeof model !== 'string') return invalid('model: Field required');
    const maxTokens = body['max_tokens'];
    if (maxTokens === undefined) return invalid('max_tokens: Field required');
    if (!Number.isInteger(maxTokens) || (maxTokens as number) < 1) {
      return invalid('max_tokens: Input should be an integer greater than or equal to 1');
    }
    const messages = body['messages'];
    if (!Array.isArray(messages)) return invalid('messages: Field required');
    const stream = body['stream'];
    if (stream !== undefined && typeof stream !== 'boolean') return invalid('stream: Input should be a valid boolean');
    const system = body['system'];
    const texts = messageTexts(messages);
    if (typeof system === 'string') texts.push(system);
    else if (Array.isArray(system)) texts.push(...messageTexts([{ content: system }]));
    return {
      request: { model, stream: stream === true, maxTokens: maxTokens as number, promptTokens: countPromptTokens(texts) },
    };
  },

  errorResponse: (status, text) => ({
    contentType: JSON_CONTENT_TYPE,
    body: JSON.stringify({
      type: 'error',
      error: { type: ERROR_TYPES[status] ?? 'api_error', message: text },
      request_id: anthropicId('req'),
    }),
  }),

  respond: (_request, context): ResponseWriter => {
    const id = anthropicId('msg');
    const inputTokens = context.promptTokens;
    return {
      streamContentType: SSE_CONTENT_TYPE,
      keepAlive: undefined,
      open: () => [
        event(
          'message_start',
          JSON.stringify({
            type: 'message_start',
            message: message(id, context.model, [], null, { input_tokens: inputTokens, output_tokens: 1 }),
          }),
        ),
        event('content_block_start', '{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}'),
        event('ping', '{"type":"ping"}'),
      ],
      step: (tokens, finish, progress) => {
        const events: string[] = [];
        if (tokens.length > 0) {
          const delta = { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: tokens.join('') } };
          events.push(event('content_block_delta', JSON.stringify(delta)));
        }
        if (finish === null) return events;
        events.push(
          event('content_block_stop', '{"type":"content_block_stop","index":0}'),
          event(
            'message_delta',
            JSON.stringify({
              type: 'message_delta',
              delta: { stop_reason: STOP_REASON[finish], stop_sequence: null },
              usage: { output_tokens: progress.tokens },
            }),
          ),
          event('message_stop', '{"type":"message_stop"}'),
        );
        return events;
      },
      streamError: () => [event('error', errorJson('overloaded_error', 'Overloaded'))],
      body: (tokens, finish) => ({
        contentType: JSON_CONTENT_TYPE,
        body: JSON.stringify(
          message(id, context.model, [{ type: 'text', text: tokens.join('') }], STOP_REASON[finish], {
            input_tokens: inputTokens,
            output_tokens: tokens.length,
          }),
        ),
      }),
    };
  },
};

