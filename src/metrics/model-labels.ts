import { DISPLAY_CONTROL } from '../text/display-controls.js';

/**
 * Bounds the `gen_ai.request.model` label: model names come from untrusted request bodies
 * (DESIGN.md section 3: request bodies must never create unbounded series).
 *
 * Once the upstream has said which models it serves (src/discovery/model-discovery.ts calls
 * `serve`), a request keeps its model as the label only when the upstream serves it; any other name
 * is `other`. Until then, and with discovery off, the first `maxModels` distinct names are kept and
 * every later one is `other` (names holding control characters or unpaired surrogates, and the names `other` and `unknown` themselves, are `other` in every case): that fallback is what a burst of made-up names right after start can
 * fill (32 names made the real model show as `other` until restart), and the served list replaces it.
 *
 * A label value, once given, has series in the exporter for the life of the process (neither the
 * Prometheus exposition nor OTLP's cumulative temporality lets a series go without a counter reset
 * downstream), so the served names that get their own label are bounded over the process's life,
 * not per listing: at most `maxModels` of them. An upstream whose listing changes on every poll
 * (LoRA adapters loaded and unloaded) grew 380 model label values and 39,521 series in 12 polls
 * with `max_models: 32` when each listing was taken whole; now the first `maxModels` served names
 * that requests use keep their label, and later ones are `other` until restart (discovery warns).
 *
 * The listing also says which base model each served name runs on (vLLM's `parent` of a LoRA
 * adapter): `modelInfo` gives it for the names that have a label, the tokentap_model_info series.
 */
export const UNKNOWN_MODEL = 'unknown';
export const OTHER_MODEL = 'other';
export const MAX_MODEL_NAME_LENGTH = 128;

/** Ollama resolves a name without a tag to `:latest` (`llama3` is `llama3:latest`), and lists only the tagged form. */
const OLLAMA_DEFAULT_TAG = ':latest';

/**
 * The label values tokentap gives itself, never a name's own: a listed `other` with a parent gave the
 * overflow of every unlisted name a tokentap_model_info series (joined to an upstream-chosen base
 * model), and `unknown` from a request body passed for a request without a model.
 */
const RESERVED: ReadonlySet<string> = new Set([OTHER_MODEL, UNKNOWN_MODEL]);

/**
 * Whether a name can be a label value as it is (and is not `other` or `unknown`): no display control, and well-formed UTF-16. The
 * Prometheus text format escapes only backslash, double quote and LF in a label value and JSON none
 * of the bidirectional controls, so ESC or a right-to-left override from a request body would
 * reach a terminal, a Grafana legend or a log line raw; such a name is folded into `other` rather
 * than escaped (an escaped form would be a second series for the same bytes). A JSON body can
 * spell an unpaired surrogate (`"x\ud800y"`); the text exposition would print it as
 * U+FFFD (two such names one series) and protobufjs would write it as bytes that are not UTF-8,
 * which Prometheus refuses as a whole scrape (`invalid label value`): the target down for good.
 */
function labelable(model: string): boolean {
  return !DISPLAY_CONTROL.test(model) && model.isWellFormed() && !RESERVED.has(model);
}

/** What `serve` kept of a listing, for the discovery log: the names, and how many listed names could not get a label. */
export interface ServedList {
  readonly kept: readonly string[];
  /** Listed names skipped: empty, `other` or `unknown`, longer than 128 characters, holding a control character or an unpaired surrogate, or beyond `maxModels`. */
  readonly skipped: number;
  /** Kept names that have no label yet while every one of the `maxModels` label values is taken: they are labelled `other`. */
  readonly withoutRoom: number;
  /** Kept names whose listing entry names a parent: LoRA adapters (vLLM). */
  readonly adapters: readonly string[];
}

export class ModelLabels {
  /** Before discovery answered (or with it off): the first `maxModels` distinct names seen. */
  private readonly firstSeen = new Set<string>();
  /** Served names that have been given as a label since discovery answered: each has series, for good. */
  private readonly admitted = new Set<string>();
  readonly maxModels: number;
  /** What the upstream serves, once discovery has answered; replaced whole, never edited. */
  private served: ReadonlySet<string> | undefined;
  /** Each served name's base model as the listing says (`other` when it cannot say); replaced whole with `served`. */
  private bases: ReadonlyMap<string, string> = new Map();

  constructor(maxModels: number) {
    this.maxModels = maxModels;
  }

  /**
   * Labels from now on follow this list: at most `maxModels` names (the first ones listed), each of
   * at most 128 characters; for a name ending in `:latest`, the untagged name is accepted too.
   * `parents` (discovery/served-models.ts modelParentsOf) gives each adapter's parent.
   */
  serve(models: readonly string[], parents: ReadonlyMap<string, string> = new Map()): ServedList {
    const served = new Set<string>();
    const kept: string[] = [];
    for (const model of models) {
      if (kept.length >= this.maxModels) break;
      if (model === '' || model.length > MAX_MODEL_NAME_LENGTH || !labelable(model) || served.has(model)) continue;
      kept.push(model);
      served.add(model);
      if (model.endsWith(OLLAMA_DEFAULT_TAG) && labelable(untagged(model))) served.add(untagged(model));
    }
    this.served = served;
    const bases = baseModels(kept, parents);
    // The untagged Ollama name runs on what its `:latest` name runs on.
    for (const model of kept) {
      if (!model.endsWith(OLLAMA_DEFAULT_TAG) || !served.has(untagged(model))) continue;
      if (!bases.has(untagged(model))) bases.set(untagged(model), bases.get(model) as string);
    }
    this.bases = bases;
    const room = this.maxModels - this.admitted.size;
    const newNames = kept.filter((model) => !this.admitted.has(model)).length;
    return { kept, skipped: models.length - kept.length, withoutRoom: Math.max(0, newNames - room), adapters: kept.filter((model) => parents.has(model)) };
  }

  /** The names labels currently keep, as the upstream listed them; undefined before discovery answered. */
  servedModels(): readonly string[] | undefined {
    return this.served === undefined ? undefined : [...this.served];
  }

  /**
   * (model label, base model) for each served name that has a label: the `tokentap_model_info`
   * series. At most `maxModels` (only names given as a label since discovery answered), each value a
   * listed name or `other`; empty before discovery answered.
   */
  modelInfo(): Array<readonly [model: string, baseModel: string]> {
    const info: Array<readonly [string, string]> = [];
    for (const model of this.admitted) {
      const base = this.bases.get(model);
      if (base !== undefined) info.push([model, base]);
    }
    return info;
  }

  label(model: string | undefined): string {
    if (model === undefined || model === '') return UNKNOWN_MODEL;
    // Before anything reads the name: a request body may name a 1 MB model, which the control
    // character scan and the set's hashing each read whole (2 ms a request, measured).
    if (model.length > MAX_MODEL_NAME_LENGTH || !labelable(model)) return OTHER_MODEL;
    if (this.served !== undefined) return this.served.has(model) ? this.admit(model) : OTHER_MODEL;
    if (this.firstSeen.has(model)) return model;
    if (this.firstSeen.size >= this.maxModels) return OTHER_MODEL;
    this.firstSeen.add(model);
    return model;
  }

  /** A served name keeps its label if it has one, or gets one while fewer than `maxModels` have been given. */
  private admit(model: string): string {
    if (this.admitted.has(model)) return model;
    if (this.admitted.size >= this.maxModels) return OTHER_MODEL;
    this.admitted.add(model);
    return model;
  }
}

function untagged(model: string): string {
  return model.slice(0, -OLLAMA_DEFAULT_TAG.length);
}

/**
 * Each kept name's base model: the end of its chain of parents (vLLM: an adapter's parent is a base
 * model, whose parent is null, so one step). A parent that is not a kept name (unlisted, too long,
 * beyond max_models) or a chain that never ends (a cycle, a name its own parent) gives `other`, so
 * a base_model value is always a listed name or `other`. Each chain is walked at most once
 * (memoised) and for at most `kept.length` steps.
 */
function baseModels(kept: readonly string[], parents: ReadonlyMap<string, string>): Map<string, string> {
  const keptNames = new Set(kept);
  const bases = new Map<string, string>();
  for (const model of kept) {
    const chain: string[] = [];
    let current = model;
    let base: string = OTHER_MODEL;
    for (let step = 0; step <= kept.length; step++) {
      const known = bases.get(current);
      if (known !== undefined) {
        base = known;
        break;
      }
      chain.push(current);
      const parent = parents.get(current);
      if (parent === undefined) {
        base = current;
        break;
      }
      if (!keptNames.has(parent)) break;
      current = parent;
    }
    for (const name of chain) bases.set(name, base);
  }
  return bases;
}
