/**
 * The parts of an OpenAI chat or completions request body the simulator honours, validated the way
 * vLLM rejects them: a body pydantic cannot parse is a 400 of type "Bad Request" (api_server.py's
 * RequestValidationError handler), a value the engine refuses is a 400 "BadRequestError"
 * (create_error_response in serving_engine.py). Everything else in the body is accepted and
 * ignored, as vLLM ignores (and logs) unknown fields.
 */
import { countPromptTokens, isRecord, messageTexts, type GenerationRequest } from './protocol.js';

export type Api = 'chat' | 'completion';

export interface OpenAIRequest extends GenerationRequest {
  /** stream_options.include_usage: pydantic defaults it to true once stream_options is present. */
  readonly includeUsage: boolean;
  readonly continuousUsage: boolean;
}

export interface BodyProblem {
  readonly message: string;
  readonly type: 'Bad Request' | 'BadRequestError';
  readonly param: string | null;
}

type Parsed = { readonly request: OpenAIRequest } | { readonly problem: BodyProblem };

function invalid(message: string): Parsed {
  return { problem: { message, type: 'Bad Request', param: null } };
}

function promptTokensOf(api: Api, body: Record<string, unknown>): number | undefined {
  if (api === 'chat') {
    const messages = body['messages'];
    return Array.isArray(messages) ? countPromptTokens(messageTexts(messages)) : undefined;
  }
  const prompt = body['prompt'];
  if (typeof prompt === 'string') return countPromptTokens([prompt]);
  if (!Array.isArray(prompt)) return undefined;
  const texts = prompt.filter((item): item is string => typeof item === 'string');
  const ids = prompt.flat().filter((item) => typeof item === 'number').length;
  return countPromptTokens(texts, ids);
}

/** Marks a field of the wrong type; absent and null fields are both `undefined`, as for pydantic's Optional. */
const WRONG_TYPE = Symbol('wrong type');

function optional<T>(value: unknown, check: (v: unknown) => v is T): T | undefined | typeof WRONG_TYPE {
  if (value === undefined || value === null) return undefined;
  return check(value) ? value : WRONG_TYPE;
}

const isString = (v: unknown): v is string => typeof v === 'string';
const isBoolean = (v: unknown): v is boolean => typeof v === 'boolean';
const isInteger = (v: unknown): v is number => Number.isInteger(v);

export function parseGenerationRequest(api: Api, bodyText: string): Parsed {
  let body: unknown;
  try {
    body = JSON.parse(bodyText);
  } catch (error) {
    return invalid(`JSON decode error: ${(error as Error).message}`);
  }
  if (!isRecord(body)) return invalid('body: Input should be a valid dictionary');

  const promptTokens = promptTokensOf(api, body);
  if (promptTokens === undefined) {
    return invalid(api === 'chat' ? 'messages: Field required (a list of messages)' : 'prompt: Field required (a string or a list)');
  }
  const model = optional(body['model'], isString);
  if (model === WRONG_TYPE) return invalid('model: Input should be a valid string');
  const stream = optional(body['stream'], isBoolean);
  if (stream === WRONG_TYPE) return invalid('stream: Input should be a valid boolean');

  const streamOptions = optional(body['stream_options'], isRecord);
  if (streamOptions === WRONG_TYPE) return invalid('stream_options: Input should be a valid dictionary');
  // vLLM's validate_stream_options: a model validator, hence "Bad Request".
  if (streamOptions !== undefined && stream !== true) {
    return invalid('Stream options can only be defined when `stream=True`.');
  }
  const includeUsage = streamOptions?.['include_usage'];
  if (optional(includeUsage, isBoolean) === WRONG_TYPE) {
    return invalid('stream_options.include_usage: Input should be a valid boolean');
  }
  const continuousUsage = optional(streamOptions?.['continuous_usage_stats'], isBoolean);
  if (continuousUsage === WRONG_TYPE) {
    return invalid('stream_options.continuous_usage_stats: Input should be a valid boolean');
  }

  const limitKey = api === 'chat' && optional(body['max_completion_tokens'], isInteger) !== undefined
    ? 'max_completion_tokens'
    : 'max_tokens';
  const maxTokens = optional(body[limitKey], isInteger);
  if (maxTokens === WRONG_TYPE) return invalid(`${limitKey}: Input should be a valid integer`);
  if (maxTokens !== undefined && maxTokens < 1) {
    // SamplingParams' own check, surfaced by the serving layer.
    return { problem: { message: `max_tokens must be at least 1, got ${maxTokens}.`, type: 'BadRequestError', param: null } };
  }

  return {
    request: {
      model,
      stream: stream === true,
      maxTokens,
      // StreamOptions.include_usage is `Optional[bool] = True`: absent means true, null means false.
      includeUsage: streamOptions !== undefined && (includeUsage === undefined || includeUsage === true),
      continuousUsage: continuousUsage === true,
      promptTokens,
    },
  };
}
