import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { documentationFiles, markdownLinks } from '../../helpers/markdown-links.js';

const REPO = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const readme = readFileSync(join(REPO, 'README.md'), 'utf8');

describe('README.md as the front door', () => {
  it('stays short enough to read in five minutes (at most 300 lines)', () => {
    expect(readme.split('\n').length).toBeLessThanOrEqual(300);
  });

  it('shows the quick start commands', () => {
    for (const command of ['npm ci', 'npm start', 'npm test']) expect(readme).toContain(command);
  });

  it('links every reference page under docs/, so each is reachable from it', () => {
    const linked = new Set(markdownLinks(readme).map(({ target }) => target.split('#')[0]));
    const pages = documentationFiles(REPO).filter((file) => file.startsWith('docs/') && !file.startsWith('docs/runbooks/'));
    expect(pages.length).toBeGreaterThan(0);
    expect(pages.filter((page) => !linked.has(page))).toEqual([]);
  });
});
