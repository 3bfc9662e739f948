import { BoundedBody, tokenCount } from './bounded-body.js';
import type { Tap, TapContext } from './tap.js';

/**
 * Non-streaming OpenAI-compatible responses: the whole JSON body carries `usage`, which is all
 * there is to measure besides TTFB and e2e. Parsed once at the end, off the per-chunk path.
 */
export const MAX_JSON_BODY_BYTES = 4 << 20;

interface Completion {
  usage?: { prompt_tokens?: unknown; completion_tokens?: unknown } | null;
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
      const completion = body.json() as Completion | undefined;
      const usage = completion?.usage;
      if (usage != null && typeof usage === 'object') {
        context.timeline.usage(tokenCount(usage.prompt_tokens), tokenCount(usage.completion_tokens));
      }
    },
  };
}
