import type { z } from 'zod';

/**
 * "Did you mean": for an unknown key at `path`, the known key of the same mapping that is closest
 * in edit distance, when it is close enough to be a typo (at most 2 edits, or a third of the
 * key's length for long keys). The known keys come from the schema itself, so a new setting is
 * suggested without a list to keep up to date.
 */
export function nearestKnownKey(schema: z.ZodType, path: readonly PropertyKey[]): string | undefined {
  const unknown = String(path.at(-1) ?? '');
  const known = keysAt(schema, path.slice(0, -1));
  let best: string | undefined;
  let bestDistance = Math.max(2, Math.floor(unknown.length / 3)) + 1;
  for (const key of known) {
    const distance = editDistance(unknown.toLowerCase(), key.toLowerCase());
    if (distance < bestDistance) {
      best = key;
      bestDistance = distance;
    }
  }
  return best;
}

/**
 * Schemas that take a mapping or a list of such mappings and check it by hand (a transform, whose
 * keys zod cannot list), each paired with the object schema of one mapping: its keys are suggested.
 */
const MAPPING_OF = new WeakMap<z.core.$ZodType, z.core.$ZodType>();
const MAPPINGS = new WeakSet<z.core.$ZodType>();

/** Suggests the keys of `mapping` for a key under `schema`, which takes one such mapping or a list of them. */
export function suggestKeysOf<T extends z.ZodType>(schema: T, mapping: z.ZodType): T {
  MAPPING_OF.set(schema as unknown as z.core.$ZodType, mapping as unknown as z.core.$ZodType);
  MAPPINGS.add(mapping as unknown as z.core.$ZodType);
  return schema;
}

/** The keys of the object schema at `path` (array indexes step into the element), or none when the path leaves what can be followed. */
function keysAt(schema: z.ZodType, path: readonly PropertyKey[]): string[] {
  let node: z.core.$ZodType | undefined = unwrap(schema as unknown as z.core.$ZodType);
  for (const part of path) {
    if (node === undefined) return [];
    const def = node._zod.def as { type: string; shape?: Record<string, z.core.$ZodType>; element?: z.core.$ZodType };
    if (def.type === 'object' && typeof part === 'string') node = def.shape?.[part];
    else if (def.type === 'array' && typeof part === 'number') node = def.element;
    // The index of one mapping in a list of them: the keys are the mapping's.
    else if (typeof part === 'number' && MAPPINGS.has(node)) continue;
    else return [];
    node = node === undefined ? undefined : unwrap(node);
  }
  const def = node?._zod.def as { type: string; shape?: Record<string, unknown> } | undefined;
  return def?.type === 'object' ? Object.keys(def.shape ?? {}) : [];
}

/** Through optional, refinements (pipe's input) and defaults to the schema that holds the shape. */
function unwrap(schema: z.core.$ZodType): z.core.$ZodType {
  let node = schema;
  for (let depth = 0; depth < 16; depth++) {
    const mapping = MAPPING_OF.get(node);
    if (mapping !== undefined) {
      node = mapping;
      continue;
    }
    const def = node._zod.def as { type: string; innerType?: z.core.$ZodType; in?: z.core.$ZodType };
    if ((def.type === 'optional' || def.type === 'nullable' || def.type === 'default') && def.innerType !== undefined) node = def.innerType;
    else if (def.type === 'pipe' && def.in !== undefined) node = def.in;
    else return node;
  }
  return node;
}

/** Levenshtein distance; keys are short, so the quadratic table costs nothing. */
function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min((previous[j] as number) + 1, (current[j - 1] as number) + 1, (previous[j - 1] as number) + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    previous = current;
  }
  return previous[b.length] as number;
}
