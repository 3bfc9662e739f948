import { reportedTimings } from './engine-timings.js';
import type { FinishReason } from './openai-wire.js';
import {
  countPromptTokens,
  isRecord,
  messageTexts,
  nanoseconds,
  parseJsonObject,
  type Progress,
  type Protocol,
  type RequestProblem,
  type ResponseWriter,
} from './protocol.js';

/**
 * Ollama's native API, `POST /api/chat` and `POST /api/generate`, after its reference
 * (github.com/ollama/ollama docs/api.md) and the Go structs that write it (api/types.go), whose
 * field order and `omitempty` tags decide the bytes:
 *
 * - Streaming is the default (`stream` absent means true): NDJSON, one compact JSON object per
 *   line, `Content-Type: application/x-ndjson`. Chat objects: `{"model","created_at","message":
 *   {"role":"assistant","content"},"done":false}`; generate objects: `{"model","created_at",
 *   "response","done":false}`.
 * - The last object has `done: true`, `done_reason` ("stop" or "length") and the Metrics, all
 *   `omitempty`: `total_duration`, `load_duration`, `prompt_eval_count`, `prompt_eval_duration`,
 *   `eval_count`, `eval_duration`, durations in nanoseconds (Go's time.Duration). ChatResponse
 *   puts `done_reason` before `done`, GenerateResponse after it, followed by `context`.
 * - The simulator reports its own measured times: load = request received to response start,
 *   prompt eval = response start to first token (the simulated prefill), eval = first token to the
 *   end, total = request received to the end.
 * - `created_at` is Go's RFC 3339 with nanoseconds and trailing zeros trimmed, in UTC.
 * - Non-streaming: the final object alone with the whole text, `application/json; charset=utf-8`
 *   (gin's c.JSON). Errors, in a stream or not: `{"error":"..."}`.
 */

const NDJSON_CONTENT_TYPE = 'application/x-ndjson';
const JSON_CONTENT_TYPE = 'application/json; charset=utf-8';

/** Go's time.Time JSON: RFC 3339 with the fraction's trailing zeros (and a bare dot) removed. */
function goTime(date: Date): string {
  return date.toISOString().replace(/\.?0*Z$/, 'Z');
}

function invalid(message: string): { readonly problem: RequestProblem } {
  return { problem: { status: 400, message } };
}

type Endpoint = 'chat' | 'generate';

function ollamaProtocol(endpoint: Endpoint): Protocol {
  return {
    parse: (bodyText) => {
      const parsed = parseJsonObject(bodyText);
      if ('message' in parsed) return invalid(parsed.message);
      const { body } = parsed;
      const model = body['model'];
      if (typeof model !== 'string' || model === '') return invalid('model is required');
      const stream = body['stream'];
      if (stream !== undefined && stream !== null && typeof stream !== 'boolean') {
        return invalid('json: cannot unmarshal into Go struct field .stream of type bool');
      }
      let texts: string[];
      if (endpoint === 'chat') {
        const messages = body['messages'] ?? [];
        if (!Array.isArray(messages)) return invalid('json: cannot unmarshal into Go struct field .messages of type []api.Message');
        texts = messageTexts(messages);
      } else {
        const prompt = body['prompt'] ?? '';
        if (typeof prompt !== 'string') return invalid('json: cannot unmarshal into Go struct field .prompt of type string');
        texts = [prompt];
      }
      const options = body['options'] ?? {};
      if (!isRecord(options)) return invalid('json: cannot unmarshal into Go struct field .options of type map[string]interface {}');
      // num_predict -1 (or any value below 1) means "no limit" in Ollama.
      const numPredict = options['num_predict'];
      if (numPredict !== undefined && !Number.isInteger(numPredict)) return invalid('option "num_predict" must be of type integer');
      const maxTokens = typeof numPredict === 'number' && numPredict > 0 ? numPredict : undefined;
      return { request: { model, stream: stream !== false, maxTokens, promptTokens: countPromptTokens(texts) } };
    },

    errorResponse: (_status, message) => ({ contentType: JSON_CONTENT_TYPE, body: JSON.stringify({ error: message }) }),

    respond: (_request, context): ResponseWriter => {
      const openedMs = performance.now();
      const content = (text: string): Record<string, unknown> =>
        endpoint === 'chat' ? { message: { role: 'assistant', content: text } } : { response: text };

      /** Go drops each zero metric (`omitempty`); the load time is never zero, being measured. */
      const metrics = (progress: Progress, evalCount: number): Record<string, number> => {
        const nowMs = performance.now();
        const reported = reportedTimings(context, progress, openedMs, nowMs);
        // Measured, the prefill runs from opening the response (after the load) to the first token.
        const prefillMs = context.behaviour.enginePrefillMs === 'measured' ? Math.max(0, (progress.firstTokenMs ?? nowMs) - openedMs) : reported.prefillMs;
        const all: Record<string, number> = {
          total_duration: nanoseconds(nowMs - context.startMs),
          load_duration: Math.max(1, nanoseconds(reported.loadMs)),
          prompt_eval_count: context.promptTokens,
          prompt_eval_duration: nanoseconds(prefillMs),
          eval_count: evalCount,
          eval_duration: nanoseconds(reported.generationMs),
        };
        return Object.fromEntries(Object.entries(all).filter(([, value]) => value !== 0));
      };

      const final = (text: string, finish: FinishReason, progress: Progress, evalCount: number): string => {
        const head = { model: context.model, created_at: goTime(new Date()), ...content(text) };
        const object =
          endpoint === 'chat'
            ? { ...head, done_reason: finish, done: true, ...metrics(progress, evalCount) }
            : {
                ...head,
                done: true,
                done_reason: finish,
                // The conversation's token ids, for the next request's `context`.
                context: Array.from({ length: context.promptTokens + evalCount }, (_, i) => 1000 + i),
                ...metrics(progress, evalCount),
              };
        return JSON.stringify(object);
      };

      return {
        streamContentType: NDJSON_CONTENT_TYPE,
        keepAlive: undefined,
        open: () => [],
        step: (tokens, finish, progress) => {
          const lines: string[] = [];
          if (tokens.length > 0) {
            const object = { model: context.model, created_at: goTime(new Date()), ...content(tokens.join('')), done: false };
            lines.push(`${JSON.stringify(object)}\n`);
          }
          if (finish !== null) lines.push(`${final('', finish, progress, progress.tokens)}\n`);
          return lines;
        },
        streamError: (message) => [`${JSON.stringify({ error: message })}\n`],
        body: (tokens, finish, progress) => ({
          contentType: JSON_CONTENT_TYPE,
          body: final(tokens.join(''), finish, progress, tokens.length),
        }),
      };
    },
  };
}

export const OLLAMA_CHAT: Protocol = ollamaProtocol('chat');
export const OLLAMA_GENERATE: Protocol = ollamaProtocol('generate');
