import { randomBytes } from 'node:crypto';
import { STATUS_CODES } from 'node:http';
import {
  JSON_CONTENT_TYPE,
  SSE_CONTENT_TYPE,
  SSE_DONE,
  chatCompletionBody,
  chatContentChunk,
  chatRoleChunk,
  chatUsageChunk,
  completionBody,
  completionChunk,
  completionUsageChunk,
  errorBody,
  sseEvent,
  streamingErrorData,
  type ResponseIdentity,
  type TokenUsage,
} from './openai-wire.js';
import { reportedTimings, vllmRequestMetrics } from './engine-timings.js';
import type { Progress, Protocol, ResponseWriter } from './protocol.js';
import { parseGenerationRequest, type Api, type OpenAIRequest } from './request-body.js';

/**
 * vLLM's OpenAI-compatible chat and completions endpoints as Protocols: request validation from
 * request-body.ts, bytes from openai-wire.ts.
 */

const ID_PREFIX: Readonly<Record<Api, string>> = { chat: 'chatcmpl-', completion: 'cmpl-' };

/** vLLM's error types for the statuses its serving layer raises; other codes get the reason phrase. */
const ERROR_TYPES: Readonly<Record<number, string>> = {
  400: 'BadRequestError',
  404: 'NotFoundError',
  500: 'InternalServerError',
};

/** vLLM's random_uuid(): uuid4().hex. */
export function randomHex(): string {
  return randomBytes(16).toString('hex');
}

/** vLLM's ErrorResponse `type` for a status: its serving layer's name, else the HTTP reason phrase. */
export function openAIErrorType(status: number): string {
  return ERROR_TYPES[status] ?? STATUS_CODES[status] ?? 'Error';
}

function openAIProtocol(api: Api): Protocol {
  return {
    parse: (bodyText) => {
      const parsed = parseGenerationRequest(api, bodyText);
      if ('request' in parsed) return parsed;
      return { problem: { status: 400, ...parsed.problem } };
    },
    errorResponse: (status, message, problem) => ({
      contentType: JSON_CONTENT_TYPE,
      body: errorBody(message, problem?.type ?? openAIErrorType(status), status, problem?.param ?? null),
    }),
    respond: (request, context): ResponseWriter => {
      const { includeUsage, continuousUsage } = request as OpenAIRequest;
      const { behaviour } = context;
      const identity: ResponseIdentity = {
        // vLLM names the response after the caller's X-Request-Id when there is one (_base_request_id).
        id: ID_PREFIX[api] + (context.requestId ?? randomHex()),
        created: Math.floor(Date.now() / 1000),
        model: context.model,
      };
      const finalUsage = behaviour.usage === 'always' || (behaviour.usage === 'auto' && includeUsage);
      // vLLM's should_include_usage: continuous stats only ride along with usage.
      const continuous = finalUsage && continuousUsage;
      const usageOf = (completionTokens: number): TokenUsage => ({ promptTokens: context.promptTokens, completionTokens });
      const openedMs = performance.now();
      // vLLM attaches them to the final usage chunk only, so without usage there are none.
      const metricsOf = (progress: Progress): Record<string, number> | undefined =>
        behaviour.perRequestMetrics ? vllmRequestMetrics(reportedTimings(context, progress, openedMs, performance.now()), progress.tokens) : undefined;
      return {
        streamContentType: SSE_CONTENT_TYPE,
        keepAlive: undefined,
        open: () =>
          api === 'chat' && behaviour.rolePrelude
            ? [sseEvent(chatRoleChunk(identity, continuous ? usageOf(0) : undefined))]
            : [],
        step: (tokens, finish, progress) => {
          const text = tokens.join('');
          const usage = continuous ? usageOf(progress.tokens) : undefined;
          const chunk =
            api === 'chat'
              ? chatContentChunk(identity, text, finish, usage)
              : completionChunk(identity, text, finish, usage);
          if (finish === null) return [sseEvent(chunk)];
          const events = [sseEvent(chunk)];
          if (finalUsage) {
            const final = api === 'chat' ? chatUsageChunk : completionUsageChunk;
            events.push(sseEvent(final(identity, usageOf(progress.tokens), metricsOf(progress))));
          }
          events.push(SSE_DONE);
          return events;
        },
        streamError: (message) => [sseEvent(streamingErrorData(message, 'InternalServerError', 500)), SSE_DONE],
        body: (tokens, finish) => {
          const text = tokens.join('');
          const usage = usageOf(tokens.length);
          return {
            contentType: JSON_CONTENT_TYPE,
            body:
              api === 'chat'
                ? chatCompletionBody(identity, text, finish, usage)
                : completionBody(identity, text, finish, usage),
          };
        },
      };
    },
  };
}

export const OPENAI_CHAT: Protocol = openAIProtocol('chat');
export const OPENAI_COMPLETIONS: Protocol = openAIProtocol('completion');
