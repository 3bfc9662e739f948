import type { FinishReason } from './openai-wire.js';
import type { Behaviour } from './options.js';

/**
 * What every simulated API provides, one module per API (`<vendor>-wire.ts`): how to read its
 * request body, how it frames a generation (streaming and not), and what its errors look like.
 * The runner (generation-runner.ts) owns timing, chunking and faults, so every API honours the
 * same `x-sim-*` headers; a wire module only turns tokens into that API's exact bytes.
 */

/** What the simulator needs from any generation request. */
export interface GenerationRequest {
  /** The model the request names, if it names one. */
  readonly model: string | undefined;
  readonly stream: boolean;
  /** The request's cap on generated tokens (max_tokens, num_predict, max_new_tokens, ...). */
  readonly maxTokens: number | undefined;
  readonly promptTokens: number;
}

/** A request the API would refuse: answered with `status` and the API's error body. */
export interface RequestProblem {
  readonly status: number;
  readonly message: string;
  /** vLLM's `type` for this problem ("Bad Request" or "BadRequestError"); other APIs pick their own. */
  readonly type?: string;
  readonly param?: string | null;
}

/** How far a response has got, for the events that report totals and timings. */
export interface Progress {
  /** Content tokens written so far. */
  readonly tokens: number;
  /** The text of those tokens. */
  text(): string;
  /** performance.now() when the request body was received. */
  readonly startMs: number;
  /** performance.now() when the first content token was written; undefined before that. */
  readonly firstTokenMs: number | undefined;
}

/** Per-response context handed to a wire module when the response starts. */
export interface ResponseContext {
  /** The caller's X-Request-Id, which vLLM (and so the OpenAI wire) uses in its ids. */
  readonly requestId: string | undefined;
  /** The model to report: the request's, else the simulator's. */
  readonly model: string;
  readonly behaviour: Behaviour;
  readonly promptTokens: number;
  /** performance.now() when the request body was received. */
  readonly startMs: number;
}

/**
 * One response's bytes. Every string a method returns goes out in its own `res.write()`, so each
 * event leaves as its own HTTP chunk, as the real servers flush each event they yield.
 */
export interface ResponseWriter {
  /** Content type of the event stream. */
  readonly streamContentType: string;
  /** Events sent with the response head, before any token (preludes, `message_start`, ...). */
  open(): readonly string[];
  /**
   * The events for one step of the generation: `tokens` (one or more, or none for the end-of-
   * sequence step) and, on the generation's last step, its finish reason, after which the writer
   * adds the API's terminal events. `progress` already counts these tokens.
   */
  step(tokens: readonly string[], finish: FinishReason | null, progress: Progress): readonly string[];
  /** The API's in-stream error event(s), for the `error` fault; the response ends after them. */
  streamError(message: string, progress: Progress): readonly string[];
  /** The comment the API sends on an idle stream, if it sends one (TGI's `:` line). */
  readonly keepAlive: string | undefined;
  /** The whole non-streaming body for `tokens` and its content type. */
  body(tokens: readonly string[], finish: FinishReason, progress: Progress): { contentType: string; body: string };
}

export interface ErrorResponse {
  readonly contentType: string;
  readonly body: string;
}

export interface Protocol {
  /** Parses a request body; `params` holds path parameters (Triton's model name). */
  parse(bodyText: string, params: RouteParams): { readonly request: GenerationRequest } | { readonly problem: RequestProblem };
  /** The API's error body for an HTTP error (a refused request, an injected status fault). */
  errorResponse(status: number, message: string, problem?: RequestProblem): ErrorResponse;
  /** Starts one response to a request `parse` accepted. */
  respond(request: GenerationRequest, context: ResponseContext, params: RouteParams): ResponseWriter;
}

export type RouteParams = Readonly<Record<string, string>>;

const encoder = new TextEncoder();

/**
 * A deterministic stand-in for the tokenizer: a quarter of the prompt's UTF-8 bytes (about what
 * BPE tokenizers average on English), plus any token ids given directly, and never 0.
 */
export function countPromptTokens(texts: readonly string[], tokenIds = 0): number {
  let bytes = 0;
  for (const text of texts) bytes += encoder.encode(text).length;
  return Math.max(1, Math.ceil(bytes / 4) + tokenIds);
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The text of chat messages whose `content` is a string or a list of `{text}` parts. */
export function messageTexts(messages: readonly unknown[]): string[] {
  const texts: string[] = [];
  for (const message of messages) {
    if (!isRecord(message)) continue;
    const content = message['content'];
    if (typeof content === 'string') texts.push(content);
    else if (Array.isArray(content)) {
      for (const part of content) {
        if (isRecord(part) && typeof part['text'] === 'string') texts.push(part['text']);
      }
    }
  }
  return texts;
}

/** Parses a JSON object body, or says what is wrong with it. */
export function parseJsonObject(bodyText: string): { readonly body: Record<string, unknown> } | { readonly message: string } {
  let body: unknown;
  try {
    body = JSON.parse(bodyText);
  } catch (error) {
    return { message: `JSON decode error: ${(error as Error).message}` };
  }
  return isRecord(body) ? { body } : { message: 'body: Input should be a valid dictionary' };
}

/** Nanoseconds from a performance.now() difference, as the integer the APIs report. */
export function nanoseconds(ms: number): number {
  return Math.max(0, Math.round(ms * 1e6));
}
