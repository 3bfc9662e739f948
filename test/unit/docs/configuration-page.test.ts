import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { configFileSchema } from '../../../src/config/schema.js';

const REPO = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const page = readFileSync(join(REPO, 'docs', 'configuration.md'), 'utf8');

/** The page's example block: its top-level keys. */
function exampleKeys(): Set<string> {
  const block = /```yaml\n([\s\S]*?)```/.exec(page)?.[1] ?? '';
  return new Set([...block.matchAll(/^([a-z_]+):/gm)].map((m) => m[1] as string));
}

/** The keys the reference table's first column names (`key` or `key.sub`). */
function tableKeys(): Set<string> {
  const rows = page.split('\n').filter((line) => line.startsWith('| `'));
  return new Set(rows.flatMap((row) => [...(row.split('|')[1] ?? '').matchAll(/`([a-z_]+)[.`]/g)].map((m) => m[1] as string)));
}

describe('docs/configuration.md', () => {
  it('names every top-level key the configuration file accepts, in its example or its reference table (a newcomer found limits: in neither)', () => {
    const documented = new Set([...exampleKeys(), ...tableKeys()]);
    const missing = Object.keys(configFileSchema.shape).filter((key) => !documented.has(key));
    expect(missing).toEqual([]);
  });

  it('names no top-level key the configuration file would refuse', () => {
    const known = new Set(Object.keys(configFileSchema.shape));
    expect([...exampleKeys()].filter((key) => !known.has(key))).toEqual([]);
  });
});
