import { reportedTimings } from './engine-timings.js';
import type { FinishReason } from './openai-wire.js';
import {
  countPromptTokens,
  parseJsonObject,
  type Progress,
  type Protocol,
  type RequestProblem,
  type ResponseWriter,
} from './protocol.js';
import { VOCABULARY } from './vocabulary.js';

/**
 * llama.cpp's native completion endpoint, `POST /completion` (alias `/completions`), pinned to the
 * server build the repository's captures come from (b4747; test/fixtures/streams/llamacpp/
 * completion-native.sse) and its README (tools/server/README.md, "POST /completion"):
 *
 * - Streaming: `data: <json>\n\n`, `Content-Type: text/event-stream`, no `[DONE]`. One event per
 *   chunk: `{"index":0,"content","tokens":[ids],"stop":false,"id_slot":-1,"tokens_predicted",
 *   "tokens_evaluated"}`, `tokens_predicted` counting the tokens so far.
 * - Then a final event with empty `content` and `tokens`, `"stop":true`, and the request summary:
 *   `id_slot`, `model`, `tokens_predicted`, `tokens_evaluated`, `generation_settings`, `prompt`,
 *   `has_new_line`, `truncated`, `stop_type` ("eos" or "limit"), `stopping_word`,
 *   `tokens_cached` and `timings` (prompt_n/ms/per_token_ms/per_second, predicted_n/...), here
 *   from the simulator's measured times.
 * - Non-streaming: that final object with the whole `content` and its token ids,
 *   `application/json; charset=utf-8`.
 * - Errors: `{"error":{"code","message","type"}}`; mid-stream the server sends an SSE event named
 *   `error` with the same object: `error: {...}\n\n`.
 */

const SSE_CONTENT_TYPE = 'text/event-stream';
const JSON_CONTENT_TYPE = 'application/json; charset=utf-8';
/** The slot that served the request; -1 on partial results, as in the capture. */
const SLOT_ID = 0;

const STOP_TYPE: Readonly<Record<FinishReason, string>> = { stop: 'eos', length: 'limit' };

const TOKEN_IDS: ReadonlyMap<string, number> = new Map(VOCABULARY.map((text, index) => [text, 1000 + index]));
/** A stamped token is no vocabulary entry. */
const UNKNOWN_TOKEN_ID = 0;

function tokenIds(tokens: readonly string[]): number[] {
  return tokens.map((token) => TOKEN_IDS.get(token) ?? UNKNOWN_TOKEN_ID);
}

/** llama.cpp's error types per status (server utils: format_error_response). */
function errorType(status: number): string {
  if (status === 400) return 'invalid_request_error';
  if (status === 401) return 'authentication_error';
  if (status === 404) return 'not_found_error';
  if (status === 501) return 'not_supported_error';
  if (status === 503) return 'unavailable_error';
  return 'server_error';
}

function errorJson(status: number, message: string): string {
  return JSON.stringify({ error: { code: status, message, type: errorType(status) } });
}

function invalid(message: string): { readonly problem: RequestProblem } {
  return { problem: { status: 400, message } };
}

/** nlohmann::json writes a non-finite double as null. */
function finite(value: number): number | null {
  return Number.isFinite(value) ? value : null;
}

/**
 * The b4747 defaults, as its final event reports them (the capture's values, but `logit_bias`,
 * which there holds the capture's own request setting). nlohmann::json writes 0.0 and 1.0 with
 * their decimal point; JSON.stringify writes 0 and 1, the same numbers to every parser.
 */
function generationSettings(nPredict: number, stream: boolean): Record<string, unknown> {
  return {
    n_predict: nPredict,
    seed: 4294967295,
    temperature: 0.800000011920929,
    dynatemp_range: 0.0,
    dynatemp_exponent: 1.0,
    top_k: 40,
    top_p: 0.949999988079071,
    min_p: 0.05000000074505806,
    xtc_probability: 0.0,
    xtc_threshold: 0.10000000149011612,
    typical_p: 1.0,
    repeat_last_n: 64,
    repeat_penalty: 1.0,
    presence_penalty: 0.0,
    frequency_penalty: 0.0,
    dry_multiplier: 0.0,
    dry_base: 1.75,
    dry_allowed_length: 2,
    // -1 ("the whole context") is reported resolved, as the capture's 2048-token context.
    dry_penalty_last_n: 2048,
    dry_sequence_breakers: ['\n', ':', '"', '*'],
    mirostat: 0,
    mirostat_tau: 5.0,
    mirostat_eta: 0.10000000149011612,
    stop: [],
    max_tokens: nPredict,
    n_keep: 0,
    n_discard: 0,
    ignore_eos: false,
    stream,
    logit_bias: [],
    n_probs: 0,
    min_keep: 0,
    grammar: '',
    grammar_trigger_words: [],
    grammar_trigger_tokens: [],
    preserved_tokens: [],
    chat_format: 'Content-only',
    samplers: ['penalties', 'dry', 'top_k', 'typ_p', 'top_p', 'min_p', 'xtc', 'temperature'],
    'speculative.n_max': 16,
    'speculative.n_min': 0,
    'speculative.p_min': 0.75,
    timings_per_token: false,
    post_sampling_probs: false,
    lora: [],
  };
}

interface LlamaExtras {
  readonly prompt: string;
  readonly nPredict: number;
}

export const LLAMACPP_COMPLETION: Protocol = {
  parse: (bodyText) => {
    const parsed = parseJsonObject(bodyText);
    if ('message' in parsed) return invalid(parsed.message);
    const { body } = parsed;
    const prompt = body['prompt'];
    if (prompt === undefined) return invalid('"prompt" must be provided');
    const texts = typeof prompt === 'string' ? [prompt] : Array.isArray(prompt) ? prompt.filter((p) => typeof p === 'string') : undefined;
    if (texts === undefined) return invalid('"prompt" must be a string, an list of tokens, a list of mixed strings & tokens, or a list of prompts');
    const ids = Array.isArray(prompt) ? prompt.flat().filter((item) => typeof item === 'number').length : 0;
    const nPredict = body['n_predict'] ?? body['max_tokens'] ?? -1;
    if (!Number.isInteger(nPredict)) return invalid('n_predict: expected an integer');
    const stream = body['stream'];
    const request = {
      model: typeof body['model'] === 'string' ? body['model'] : undefined,
      stream: stream === true,
      // n_predict -1 means "until end of sequence".
      maxTokens: (nPredict as number) > 0 ? (nPredict as number) : undefined,
      promptTokens: countPromptTokens(texts, ids),
      prompt: typeof prompt === 'string' ? prompt : texts.join(''),
      nPredict: nPredict as number,
    };
    return { request };
  },

  errorResponse: (status, message) => ({ contentType: JSON_CONTENT_TYPE, body: errorJson(status, message) }),

  respond: (request, context): ResponseWriter => {
    const { prompt, nPredict } = request as typeof request & LlamaExtras;
    const evaluated = context.promptTokens;

    const final = (content: string, ids: number[], finish: FinishReason, progress: Progress, predicted: number): string => {
      const nowMs = performance.now();
      // llama.cpp reports no queue time; prompt_ms is its prefill (configurable: engine-timings.ts).
      const { prefillMs: promptMs, generationMs: predictedMs } = reportedTimings(context, progress, context.startMs, nowMs);
      const text = progress.text();
      return JSON.stringify({
        index: 0,
        content,
        tokens: ids,
        id_slot: SLOT_ID,
        stop: true,
        model: context.model,
        tokens_predicted: predicted,
        tokens_evaluated: evaluated,
        generation_settings: generationSettings(nPredict, request.stream),
        prompt,
        has_new_line: text.includes('\n'),
        truncated: false,
        stop_type: STOP_TYPE[finish],
        stopping_word: '',
        tokens_cached: evaluated + predicted,
        timings: {
          prompt_n: evaluated,
          prompt_ms: promptMs,
          prompt_per_token_ms: promptMs / evaluated,
          prompt_per_second: finite((1e3 * evaluated) / promptMs),
          predicted_n: predicted,
          predicted_ms: predictedMs,
          predicted_per_token_ms: finite(predictedMs / predicted),
          predicted_per_second: finite((1e3 * predicted) / predictedMs),
        },
      });
    };

    return {
      streamContentType: SSE_CONTENT_TYPE,
      keepAlive: undefined,
      open: () => [],
      step: (tokens, finish, progress) => {
        const events: string[] = [];
        if (tokens.length > 0) {
          const partial = {
            index: 0,
            content: tokens.join(''),
            tokens: tokenIds(tokens),
            stop: false,
            id_slot: -1,
            tokens_predicted: progress.tokens,
            tokens_evaluated: evaluated,
          };
          events.push(`data: ${JSON.stringify(partial)}\n\n`);
        }
        if (finish !== null) events.push(`data: ${final('', [], finish, progress, progress.tokens)}\n\n`);
        return events;
      },
      streamError: (message) => [`error: ${errorJson(500, message)}\n\n`],
      body: (tokens, finish, progress) => ({
        contentType: JSON_CONTENT_TYPE,
        body: final(tokens.join(''), tokenIds(tokens), finish, progress, tokens.length),
      }),
    };
  },
};
