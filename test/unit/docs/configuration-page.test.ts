import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
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

  it('has an example that tokentap check --config accepts as the page shows it (a newcomer copied it: five "metrics.buckets.*[0]: expected number" for its [...] lists)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'tokentap-configuration-page-'));
    try {
      const file = join(dir, 'tokentap.yaml');
      writeFileSync(file, /```yaml\n([\s\S]*?)```/.exec(page)?.[1] ?? '');
      // Throws, with the problems on stderr, when check exits non-zero.
      const output = execFileSync(process.execPath, [join(REPO, 'bin', 'tokentap.js'), 'check', '--config', file], { encoding: 'utf8', stdio: 'pipe' });
      expect(output).toContain(`${file}: valid;`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
