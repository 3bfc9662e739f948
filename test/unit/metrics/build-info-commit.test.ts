import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { checkoutCommit } from '../../../src/git-checkout-commit.js';
import { commitOf } from '../../../src/version.js';

/**
 * The `commit` label of tokentap_build_info: the image's TOKENTAP_COMMIT, else the git checkout's,
 * read from .git's files without running git (it said "unknown" from a checkout).
 */

const A = 'a'.repeat(40);
const B = '0123456789abcdef0123456789abcdef01234567';

function layout(files: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), 'tokentap-git-'));
  for (const [file, text] of Object.entries(files)) {
    mkdirSync(join(root, file, '..'), { recursive: true });
    writeFileSync(join(root, file), text);
  }
  return root;
}

describe('the commit of tokentap_build_info', () => {
  it('is this checkout\'s HEAD when run from it, as git rev-parse says (it was "unknown")', () => {
    const root = join(import.meta.dirname, '../../..');
    const head = execFileSync('git', ['rev-parse', 'HEAD'], { cwd: root, encoding: 'utf8' }).trim();
    expect(commitOf({})).toBe(head.slice(0, 12));
  });

  it('is TOKENTAP_COMMIT when the image sets it, checkout or not', () => {
    expect(commitOf({ TOKENTAP_COMMIT: 'abc1234' })).toBe('abc1234');
    expect(commitOf({ TOKENTAP_COMMIT: 'abc1234' }, layout({}))).toBe('abc1234');
  });

  it('is "unknown" outside a checkout and when .git holds something unexpected', () => {
    expect(commitOf({}, layout({}))).toBe('unknown');
    expect(commitOf({}, layout({ '.git/HEAD': 'not a ref\n' }))).toBe('unknown');
    expect(commitOf({}, layout({ '.git/HEAD': 'ref: refs/heads/gone\n' }))).toBe('unknown');
    expect(commitOf({}, layout({ '.git/HEAD': 'ref: refs/../../../etc/passwd\n' }))).toBe('unknown');
    expect(commitOf({}, layout({ '.git': 'not a pointer\n' }))).toBe('unknown');
  });

  it.each([
    ['a branch with a loose ref', { '.git/HEAD': 'ref: refs/heads/main\n', '.git/refs/heads/main': `${A}\n` }, A],
    ['a branch in packed-refs', { '.git/HEAD': 'ref: refs/heads/main\n', '.git/packed-refs': `# pack-refs with: peeled fully-peeled sorted\n${B} refs/heads/main\n${A} refs/tags/v1\n` }, B],
    ['a detached HEAD', { '.git/HEAD': `${B}\n` }, B],
    [
      'a worktree (.git is a file; HEAD in the worktree\'s directory, refs in the common one)',
      { '.git': 'gitdir: repo/.git/worktrees/wt\n', 'repo/.git/worktrees/wt/HEAD': 'ref: refs/heads/wt\n', 'repo/.git/worktrees/wt/commondir': '../..\n', 'repo/.git/refs/heads/wt': `${A}\n` },
      A,
    ],
  ])('reads %s', (_what, files, full) => {
    expect(checkoutCommit(layout(files))).toBe(full.slice(0, 12));
  });
});
