import { anthropicInputTokens } from './anthropic-sse.js';
import { BoundedBody } from './bounded-body.js';
import { llamaCppCacheHits, llamaCppTimings, ollamaTimings, vllmMetrics } from './server-timings.js';
import type { Tap, TapContext } from './tap.js';
import { cachedTokenCount, detailsCachedTokens, tokenCount } from './upstream-numbers.js';

/**
 * Non-streaming responses: the whole JSON body carries the usage, which is all there is to measure
 * besides TTFB and e2e. Parsed once at the end, off the per-chunk path. Reads OpenAI chat and
 * completions `usage` {prompt_tokens, completion_tokens}, the Responses API's and Anthropic's
 * `usage` {input_tokens, output_tokens} (Anthropic's cache reads and writes added to the input, as in
 * anthropic-sse.ts), Ollama's top-level `prompt_eval_count`/`eval_count` and llama.cpp native
 * `/completion`'s `tokens_evaluated`/`tokens_predicted`. Prefix-cache hits as the streams carry them:
 * `prompt_tokens_details.cached_tokens` (else llama.cpp `timings.cache_n`), the Responses API's
 * `input_tokens_details.cached_tokens`, Anthropic's `cache_read_input_tokens`.
 *
 * Engine timings, as the streams carry them on their final event (server-timings.ts): vLLM's
 * per-request `metrics`, llama.cpp's `timings` (OpenAI-compatible routes and `/completion`) and
 * Ollama's `*_duration` fields.
 *
 * A 2xx body that is not JSON (cut short, or bytes no JSON parser reads) is counted as
 * `malformed_event` and makes the request an upstream error, as does a JSON answer carrying a
 * non-null `error`: neither is a completion its client could use.
 */
export const MAX_JSON_BODY_BYTES = 4 << 20;

interface Completion {
  error?: unknown;
  usage?: {
    prompt_tokens?: unknown;
    completion_tokens?: unknown;
    input_tokens?: unknown;
    output_tokens?: unknown;
    cache_creation_input_tokens?: unknown;
    cache_read_input_tokens?: unknown;
    prompt_tokens_details?: unknown;
    input_tokens_details?: unknown;
  } | null;
  prompt_eval_count?: unknown;
  eval_count?: unknown;
  tokens_evaluated?: unknown;
  tokens_predicted?: unknown;
  timings?: unknown;
  metrics?: unknown;
  load_duration?: unknown;
  prompt_eval_duration?: unknown;
  eval_duration?: unknown;
  total_duration?: unknown;
}

export function createOpenAIJsonTap(context: TapContext): Tap {
  const body = new BoundedBody(MAX_JSON_BODY_BYTES);
  return {
    write(chunk) {
      body.push(chunk);
    },
    end() {
      if (body.oversized) {
        context.problem('oversized_body');
        return;
      }
      const completion = body.json() as Completion | null | undefined;
      const timeline = context.timeline;
      if (body.invalidJson) {
        // Every client library parses the answer and fails on it (the OpenAI and Anthropic SDKs
        // throw a SyntaxError): the request failed for its client, whatever the status said.
        context.problem('malformed_event');
        timeline.errorEvent = true;
        return;
      }
      if (completion == null || typeof completion !== 'object') return;
      // A 2xx answer that is an error object (`{"error": {...}}`, Anthropic's `{"type":"error"}`,
      // a Responses object whose `error` is set): the client got no completion.
      if (completion.error != null) timeline.errorEvent = true;
      const usage = completion.usage;
      if (usage != null && typeof usage === 'object') {
        const openAI = usage.prompt_tokens != null;
        const input = openAI ? tokenCount(usage.prompt_tokens, context) : anthropicInputTokens(usage, context);
        const cached = openAI
          ? (detailsCachedTokens(usage.prompt_tokens_details, input, context) ?? llamaCppCacheHits(completion.timings, input, context))
          : usage.input_tokens_details != null
            ? detailsCachedTokens(usage.input_tokens_details, input, context)
            : cachedTokenCount(usage.cache_read_input_tokens, input, context);
        timeline.usage(input, tokenCount(usage.completion_tokens ?? usage.output_tokens, context), cached);
      } else if (completion.tokens_predicted !== undefined) {
        const input = tokenCount(completion.tokens_evaluated, context);
        timeline.usage(input, tokenCount(completion.tokens_predicted, context), llamaCppCacheHits(completion.timings, input, context));
      } else {
        timeline.usage(tokenCount(completion.prompt_eval_count, context), tokenCount(completion.eval_count, context));
      }
      const timings =
        vllmMetrics(completion.metrics, context) ??
        llamaCppTimings(completion.timings, context) ??
        (completion.total_duration !== undefined ? ollamaTimings(completion, context) : undefined);
      if (timings !== undefined) timeline.serverTimings = timings;
    },
  };
}
