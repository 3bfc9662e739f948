/**
 * The model names an inference server says it serves, read from the answer of one of its listing
 * endpoints. Each reader returns the names, or undefined when the body is not that endpoint's shape
 * (so the next endpoint is tried).
 *
 *   GET /v1/models  OpenAI, vLLM (every --served-model-name and loaded LoRA adapter), llama.cpp,
 *                   Ollama's OpenAI API: {"object":"list","data":[{"id":"<name>",...}]}; vLLM's
 *                   entries also carry `parent` (modelParentsOf)
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

/**
 * What each `/v1/models` entry names as its `parent`: vLLM's ModelCard has `root` and `parent`, and
 * lists a LoRA adapter with `parent` set to its base model's served name and `root` to the
 * adapter's path; a base model has `parent` null and `root` its weights path
 * (vllm/entrypoints/openai/serving_models.py `show_available_models` and protocol.py `ModelCard`,
 * vllm-project/vllm@075e9ba825513f0e50ae1a5185d6db0ee405f84e). `root` is a filesystem path or a
 * Hugging Face repository, never a served name, so only `parent` is read. Empty when the listing has
 * no parents (every other server): each model is then its own base.
 */
export function modelParentsOf(body: unknown): ReadonlyMap<string, string> {
  const parents = new Map<string, string>();
  const seen = new Set<unknown>();
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return parents;
  const data = (body as Record<string, unknown>)['data'];
  if (!Array.isArray(data)) return parents;
  for (const entry of data) {
    const id = field(entry, 'id');
    const parent = field(entry, 'parent');
    // The first entry of an id wins, as in servedModelsOf: a duplicate cannot re-parent a model.
    if (seen.has(id)) continue;
    seen.add(id);
    if (typeof id === 'string' && typeof parent === 'string' && parent !== '') parents.set(id, parent);
  }
  return parents;
}
