/**
 * The GenAI semantic conventions' `gen_ai.operation.name` for each generation endpoint tokentap
 * proxies (OpenAI-compatible, Anthropic, Ollama); undefined for anything else (/v1/models, /health).
 * Exact paths only: the table is the support matrix, and a prefix rule would mislabel new routes.
 */
const OPERATIONS: ReadonlyMap<string, string> = new Map([
  ['/v1/chat/completions', 'chat'],
  ['/v1/completions', 'text_completion'],
  ['/v1/embeddings', 'embeddings'],
  ['/v1/messages', 'chat'],
  ['/api/chat', 'chat'],
  ['/api/generate', 'text_completion'],
  ['/api/embed', 'embeddings'],
  ['/api/embeddings', 'embeddings'],
]);

/** `path` without its query string. */
export function genAiOperation(path: string): string | undefined {
  return OPERATIONS.get(path);
}
