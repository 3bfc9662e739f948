/**
 * Bounds the `gen_ai.request.model` label: model names come from untrusted request bodies, so the
 * first `maxModels` distinct names are kept and every later one is reported as `other` (DESIGN.md
 * section 3: request bodies must never create unbounded series). Names holding control characters are `other` too.
 */
export const UNKNOWN_MODEL = 'unknown';
export const OTHER_MODEL = 'other';
const MAX_MODEL_NAME_LENGTH = 128;
/**
 * C0 and C1 controls and DEL. The Prometheus text format escapes only backslash, double quote and
 * LF in a label value, so ESC, NUL or CR from a request body would reach a terminal or a parser
 * raw; such a name is folded into `other` rather than escaped (no real model name holds one, and
 * an escaped form would be a second series for the same bytes).
 */
const CONTROL_CHARACTER = /[\u0000-\u001f\u007f-\u009f]/;

export class ModelLabels {
  private readonly known = new Set<string>();
  private readonly maxModels: number;

  constructor(maxModels: number) {
    this.maxModels = maxModels;
  }

  label(model: string | undefined): string {
    if (model === undefined || model === '') return UNKNOWN_MODEL;
    if (this.known.has(model)) return model;
    if (this.known.size >= this.maxModels || model.length > MAX_MODEL_NAME_LENGTH || CONTROL_CHARACTER.test(model)) return OTHER_MODEL;
    this.known.add(model);
    return model;
  }
}
