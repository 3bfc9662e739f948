/**
 * Bounds the `gen_ai.request.model` label: model names come from untrusted request bodies
 * (DESIGN.md section 3: request bodies must never create unbounded series).
 *
 * Once the upstream has said which models it serves (src/discovery/model-discovery.ts calls
 * `serve`), a request keeps its model as the label only when the upstream serves it; any other name
 * is `other`. Until then, and with discovery off, the first `maxModels` distinct names are kept and
 * every later one is `other` (names holding control characters are `other` in every case): that fallback is what a burst of made-up names right after start can
 * fill (32 names made the real model show as `other` until restart), and the served list replaces it.
 */
export const UNKNOWN_MODEL = 'unknown';
export const OTHER_MODEL = 'other';
export const MAX_MODEL_NAME_LENGTH = 128;

/** Ollama resolves a name without a tag to `:latest` (`llama3` is `llama3:latest`), and lists only the tagged form. */
const OLLAMA_DEFAULT_TAG = ':latest';
/**
 * C0 and C1 controls and DEL. The Prometheus text format escapes only backslash, double quote and
 * LF in a label value, so ESC, NUL or CR from a request body would reach a terminal or a parser
 * raw; such a name is folded into `other` rather than escaped (no real model name holds one, and
 * an escaped form would be a second series for the same bytes).
 */
const CONTROL_CHARACTER = /[\u0000-\u001f\u007f-\u009f]/;

export class ModelLabels {
  private readonly firstSeen = new Set<string>();
  private readonly maxModels: number;
  /** What the upstream serves, once discovery has answered; replaced whole, never edited. */
  private served: ReadonlySet<string> | undefined;

  constructor(maxModels: number) {
    this.maxModels = maxModels;
  }

  /**
   * Labels from now on follow this list: at most `maxModels` names (the first ones listed), each of
   * at most 128 characters; for a name ending in `:latest`, the untagged name is accepted too.
   */
  serve(models: readonly string[]): void {
    const served = new Set<string>();
    for (const model of models) {
      if (served.size >= this.maxModels) break;
      if (model === '' || model.length > MAX_MODEL_NAME_LENGTH || CONTROL_CHARACTER.test(model)) continue;
      served.add(model);
      if (model.endsWith(OLLAMA_DEFAULT_TAG)) served.add(model.slice(0, -OLLAMA_DEFAULT_TAG.length));
    }
    this.served = served;
  }

  /** The names labels currently keep, as the upstream listed them; undefined before discovery answered. */
  servedModels(): readonly string[] | undefined {
    return this.served === undefined ? undefined : [...this.served];
  }

  label(model: string | undefined): string {
    if (model === undefined || model === '') return UNKNOWN_MODEL;
    if (CONTROL_CHARACTER.test(model)) return OTHER_MODEL;
    if (this.served !== undefined) return this.served.has(model) ? model : OTHER_MODEL;
    if (this.firstSeen.has(model)) return model;
    if (this.firstSeen.size >= this.maxModels || model.length > MAX_MODEL_NAME_LENGTH) return OTHER_MODEL;
    this.firstSeen.add(model);
    return model;
  }
}
