import { createOpenAIJsonTap } from './openai-json.js';
import { createOpenAISseTap } from './openai-sse.js';
import type { TapFactory } from './tap.js';

export interface TapChoice {
  readonly create: TapFactory;
  /** A streamed protocol: it has a terminal event, and ending without one is `truncated`. */
  readonly streaming: boolean;
}

const OPENAI_SSE: TapChoice = { create: createOpenAISseTap, streaming: true };
const OPENAI_JSON: TapChoice = { create: createOpenAIJsonTap, streaming: false };

/**
 * Chooses the tap for a response from its content type. Anything not recognised passes through
 * unobserved except for TTFB and e2e.
 */
export function selectTap(method: string, contentType: string | undefined): TapChoice | undefined {
  if (contentType === undefined) return undefined;
  const mediaType = contentType.split(';', 1)[0]!.trim().toLowerCase();
  if (mediaType === 'text/event-stream') return OPENAI_SSE;
  if (mediaType === 'application/json' && method === 'POST') return OPENAI_JSON;
  return undefined;
}
