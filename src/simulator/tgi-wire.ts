import type { FinishReason } from './openai-wire.js';
import {
  countPromptTokens,
  isRecord,
  parseJsonObject,
  type Progress,
  type Protocol,
  type RequestProblem,
  type ResponseWriter,
} from './protocol.js';
import { VOCABULARY } from './vocabulary.js';

/**
 * Hugging Face Text Generation Inference (TGI 2.x router), `POST /generate_stream` and
 * `POST /generate`, after its OpenAPI spec (huggingface.github.io/text-generation-inference; the
 * same schema huggingface.js generates its TextGenerationStreamOutput types from) and captures of
 * real output published in its docs and issues:
 *
 * - Streaming: axum's SSE writer, `data:<json>\n\n` with no space after the colon. One event per
 *   token: `{"index","token":{"id","text","logprob","special"},"generated_text":null,"details":null}`
 *   (`top_tokens` is skipped when empty). The last event carries `generated_text` (the decoded
 *   text without special tokens) and, only when the request asked `parameters.details`,
 *   `details: {"finish_reason","generated_tokens","seed","input_length"}`. A generation that ends on
 *   end-of-sequence ends with the special EOS token (`"special":true`), which counts in
 *   `generated_tokens` but not in `generated_text`; one cut by max_new_tokens ends on its last
 *   ordinary token with finish_reason "length".
 * - Idle streams get axum's keep-alive (KeepAlive::default(): an empty comment, `:\n\n`, after
 *   15 s without an event).
 * - Content type `text/event-stream`, as axum sets it, without a charset.
 * - An in-stream failure is `data:{"error":...,"error_type":"generation"}`; HTTP errors carry the same
 *   ErrorResponse with the status's error_type.
 * - `/generate`: `{"generated_text"}`, plus `details` (`finish_reason`, `generated_tokens`, `seed`,
 *   `prefill`, `tokens`) when asked.
 */

const SSE_CONTENT_TYPE = 'text/event-stream';
const JSON_CONTENT_TYPE = 'application/json';
const KEEP_ALIVE = ':\n\n';

/** Llama's `</s>`, the end-of-sequence token a TGI stream ends with. */
const EOS_TOKEN = { id: 2, text: '</s>', logprob: -0.0078125, special: true } as const;

const FINISH: Readonly<Record<FinishReason, string>> = { stop: 'eos_token', length: 'length' };

/** A token's id and logprob: fixed per vocabulary entry, so a seed fixes every byte but stamps. */
const TOKEN_INFO: ReadonlyMap<string, { readonly id: number; readonly logprob: number }> = new Map(
  VOCABULARY.map((text, index) => [text, { id: 1000 + index, logprob: -((index % 8) + 1) / 16 }]),
);
/** A stamped token is no vocabulary entry. */
const UNKNOWN_TOKEN = { id: 0, logprob: -1 };

function tokenObject(text: string): { id: number; text: string; logprob: number; special: boolean } {
  const info = TOKEN_INFO.get(text) ?? UNKNOWN_TOKEN;
  return { id: info.id, text, logprob: info.logprob, special: false };
}

/** The error_type TGI's router reports for each status (server.rs, impl From<InferError>). */
function errorType(status: number): string {
  if (status === 429) return 'overloaded';
  if (status === 400 || status === 422) return 'validation';
  return 'generation';
}

function errorJson(error: string, type: string): string {
  return JSON.stringify({ error, error_type: type });
}

function invalid(message: string): { readonly problem: RequestProblem } {
  return { problem: { status: 422, message } };
}

interface TgiExtras {
  readonly details: boolean;
}

function tgiProtocol(stream: boolean): Protocol {
  return {
    parse: (bodyText) => {
      const parsed = parseJsonObject(bodyText);
      if ('message' in parsed) return invalid(parsed.message);
      const { body } = parsed;
      const inputs = body['inputs'];
      if (typeof inputs !== 'string') return invalid('Failed to deserialize the JSON body into the target type: missing field `inputs`');
      const parameters = body['parameters'] ?? {};
      if (!isRecord(parameters)) return invalid('parameters: expected a map');
      const maxNewTokens = parameters['max_new_tokens'];
      if (maxNewTokens !== undefined && maxNewTokens !== null && (!Number.isInteger(maxNewTokens) || (maxNewTokens as number) < 1)) {
        return invalid('`max_new_tokens` must be strictly positive');
      }
      const request = {
        model: undefined,
        stream,
        maxTokens: (maxNewTokens ?? undefined) as number | undefined,
        promptTokens: countPromptTokens([inputs]),
        details: parameters['details'] === true,
      };
      return { request };
    },

    errorResponse: (status, message) => ({ contentType: JSON_CONTENT_TYPE, body: errorJson(message, errorType(status)) }),

    respond: (request, context): ResponseWriter => {
      const { details } = request as typeof request & TgiExtras;
      let index = 0;
      const streamDetails = (finish: FinishReason, generated: number): Record<string, unknown> | null =>
        details ? { finish_reason: FINISH[finish], generated_tokens: generated, seed: null, input_length: context.promptTokens } : null;
      const tokenEvent = (token: object, generatedText: string | null, detail: Record<string, unknown> | null): string => {
        index += 1;
        return `data:${JSON.stringify({ index, token, generated_text: generatedText, details: detail })}\n\n`;
      };
      const step = (tokens: readonly string[], finish: FinishReason | null, progress: Progress): string[] => {
        const events: string[] = [];
        const lastOrdinary = finish === 'length' ? tokens.length - 1 : -1;
        tokens.forEach((text, k) => {
          events.push(
            k === lastOrdinary
              ? tokenEvent(tokenObject(text), progress.text(), streamDetails('length', progress.tokens))
              : tokenEvent(tokenObject(text), null, null),
          );
        });
        if (finish === 'stop') {
          events.push(tokenEvent(EOS_TOKEN, progress.text(), streamDetails('stop', progress.tokens + 1)));
        }
        return events;
      };
      return {
        streamContentType: SSE_CONTENT_TYPE,
        keepAlive: KEEP_ALIVE,
        open: () => [],
        step,
        streamError: (message) => [`data:${errorJson(message, 'generation')}\n\n`],
        body: (tokens, finish) => {
          const generatedText = tokens.join('');
          const generated = finish === 'stop' ? tokens.length + 1 : tokens.length;
          const body = details
            ? {
                generated_text: generatedText,
                details: {
                  finish_reason: FINISH[finish],
                  generated_tokens: generated,
                  seed: null,
                  prefill: [],
                  tokens: [...tokens.map(tokenObject), ...(finish === 'stop' ? [EOS_TOKEN] : [])],
                },
              }
            : { generated_text: generatedText };
          return { contentType: JSON_CONTENT_TYPE, body: JSON.stringify(body) };
        },
      };
    },
  };
}

export const TGI_GENERATE_STREAM: Protocol = tgiProtocol(true);
export const TGI_GENERATE: Protocol = tgiProtocol(false);
