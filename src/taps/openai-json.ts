import type { Tap, TapContext } from './tap.js';

/**
 * Non-streaming OpenAI-compatible responses: the whole JSON body carries `usage`, which is all
 * there is to measure besides TTFB and e2e. The body is kept (by reference, no copy) up to a cap and
 * parsed once at the end, off the per-chunk path.
 */
export const MAX_JSON_BODY_BYTES = 4 << 20;

export function createOpenAIJsonTap(context: TapContext): Tap {
  const chunks: Buffer[] = [];
  let size = 0;
  let oversized = false;
  return {
    write(chunk) {
      if (oversized) return;
      size += chunk.length;
      if (size > MAX_JSON_BODY_BYTES) {
        oversized = true;
        chunks.length = 0;
        context.problem('oversized_body');
        return;
      }
      chunks.push(chunk);
    },
    end() {
      if (oversized || size === 0) return;
      let body: { usage?: { prompt_tokens?: unknown; completion_tokens?: unknown } | null };
      try {
        body = JSON.parse(Buffer.concat(chunks, size).toString('utf8'));
      } catch {
        context.problem('malformed_event');
        return;
      }
      const usage = body?.usage;
      if (usage != null && typeof usage === 'object') {
        context.timeline.usage(count(usage.prompt_tokens), count(usage.completion_tokens));
      }
    },
  };
}

function count(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isInteger(value) && value >= 0 ? value : undefined;
}
