/**
 * Bounds the `gen_ai.request.model` label: model names come from untrusted request bodies, so the
 * first `maxModels` distinct names are kept and every later one is reported as `other` (DESIGN.md
 * section 3: request bodies must never create unbounded series).
 */
export const UNKNOWN_MODEL = 'unknown';
export const OTHER_MODEL = 'other';
const MAX_MODEL_NAME_LENGTH = 128;

export class ModelLabels {
  private readonly known = new Set<string>();
  private readonly maxModels: number;

  constructor(maxModels: number) {
    this.maxModels = maxModels;
  }

  label(model: string | undefined): string {
    if (model === undefined || model === '') return UNKNOWN_MODEL;
    if (this.known.has(model)) return model;
    if (this.known.size >= this.maxModels || model.length > MAX_MODEL_NAME_LENGTH) return OTHER_MODEL;
    this.known.add(model);
    return model;
  }
}
