/**
 * The model names an inference server says it serves, read from the answer of one of its listing
 * endpoints. Each reader returns the names, or undefined when the body is not that endpoint's shape
 * (so the next endpoint is tried).
 *
 *   GET /v1/models  OpenAI, vLLM (every --served-model-name and loaded LoRA adapter), llama.cpp,
 *                   Ollama's OpenAI API: {"object":"list","data":[{"id":"<name>",...}]}
 *   GET /api/tags   Ollama: {"models":[{"name":"llama3:latest","model":"llama3:latest",...}]}
 *   GET /info       TGI: {"model_id":"<name>",...}
 */
export function servedModelsOf(body: unknown): string[] | undefined {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return undefined;
  const record = body as Record<string, unknown>;
  if (Array.isArray(record['data'])) return strings(record['data'].map((entry) => field(entry, 'id')));
  if (Array.isArray(record['models'])) return strings(record['models'].flatMap((entry) => [field(entry, 'name'), field(entry, 'model')]));
  if (typeof record['model_id'] === 'string') return strings([record['model_id']]);
  return undefined;
}

function field(entry: unknown, name: string): unknown {
  return typeof entry === 'object' && entry !== null ? (entry as Record<string, unknown>)[name] : undefined;
}

/** The distinct non-empty strings, in order; undefined when there are none (an empty list teaches nothing). */
function strings(values: readonly unknown[]): string[] | undefined {
  const names = [...new Set(values.filter((v): v is string => typeof v === 'string' && v !== ''))];
  return names.length === 0 ? undefined : names;
}
