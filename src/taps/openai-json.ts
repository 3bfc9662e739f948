import { anthropicInputTokens } from './anthropic-sse.js';
import { BoundedBody, tokenCount } from './bounded-body.js';
import type { Tap, TapContext } from './tap.js';

/**
 * Non-streaming responses: the whole JSON body carries the usage, which is all there is to measure
 * besides TTFB and e2e. Parsed once at the end, off the per-chunk path. Reads OpenAI chat and
 * completions `usage` {prompt_tokens, completion_tokens}, the Responses API's and Anthropic's
 * `usage` {input_tokens, output_tokens} (Anthropic's cache reads and writes added to the input, as in
 * anthropic-sse.ts), and Ollama's top-level `prompt_eval_count`/`eval_count`.
 */
export const MAX_JSON_BODY_BYTES = 4 << 20;

interface Completion {
  usage?: {
    prompt_tokens?: unknown;
    completion_tokens?: unknown;
    input_tokens?: unknown;
    output_tokens?: unknown;
    cache_creation_input_tokens?: unknown;
    cache_read_input_tokens?: unknown;
  } | null;
  prompt_eval_count?: unknown;
  eval_count?: unknown;
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
      if (completion == null || typeof completion !== 'object') return;
      const usage = completion.usage;
      if (usage != null && typeof usage === 'object') {
        const input = usage.prompt_tokens != null ? tokenCount(usage.prompt_tokens) : anthropicInputTokens(usage);
        context.timeline.usage(input, tokenCount(usage.completion_tokens ?? usage.output_tokens));
      } else {
        context.timeline.usage(tokenCount(completion.prompt_eval_count), tokenCount(completion.eval_count));
      }
    },
  };
}
