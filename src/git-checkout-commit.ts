import { readFileSync, statSync } from 'node:fs';
import path from 'node:path';

/** A full object name: SHA-1 (40 hex digits) or SHA-256 (64). */
const OBJECT_NAME = /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/;
/** Characters kept for the label: as unambiguous as `git rev-parse --short` in any repository this size, and short. */
const SHORT_LENGTH = 12;

/**
 * The commit checked out in the git checkout at `root`, shortened, read from the files git keeps
 * (`.git/HEAD`, the ref it names, `packed-refs`; a worktree's `.git` file and `commondir`), or
 * undefined when `root` is no checkout or the files hold anything unexpected. Read once at
 * start-up, without running git (which may not be installed, and would be a process per start):
 * `tokentap_build_info{commit="unknown"}` from a checkout told an operator nothing.
 */
export function checkoutCommit(root: string): string | undefined {
  try {
    const gitDir = gitDirOf(root);
    if (gitDir === undefined) return undefined;
    const head = readFileSync(path.join(gitDir, 'HEAD'), 'utf8').trim();
    const name = head.startsWith('ref: ') ? refTarget(gitDir, head.slice('ref: '.length).trim()) : head;
    return name !== undefined && OBJECT_NAME.test(name) ? name.slice(0, SHORT_LENGTH) : undefined;
  } catch {
    return undefined;
  }
}

/** `.git` itself, or where the `gitdir:` line of a `.git` file (a worktree, a submodule) points. */
function gitDirOf(root: string): string | undefined {
  const dotGit = path.join(root, '.git');
  if (statSync(dotGit).isDirectory()) return dotGit;
  const pointer = /^gitdir: (.+)$/m.exec(readFileSync(dotGit, 'utf8'))?.[1]?.trim();
  return pointer === undefined ? undefined : path.resolve(root, pointer);
}

/** The object a ref names: a loose ref file (the worktree's own, then the common directory's), else its packed-refs line. */
function refTarget(gitDir: string, ref: string): string | undefined {
  if (!/^refs\/[^\0]+$/.test(ref) || ref.split('/').includes('..')) return undefined;
  const common = commonDirOf(gitDir);
  for (const dir of new Set([gitDir, common])) {
    try {
      return readFileSync(path.join(dir, ref), 'utf8').trim();
    } catch {
      // Not a loose ref here.
    }
  }
  try {
    for (const line of readFileSync(path.join(common, 'packed-refs'), 'utf8').split('\n')) {
      const [name, packedRef] = line.trim().split(' ');
      if (packedRef === ref) return name;
    }
  } catch {
    // No packed-refs.
  }
  return undefined;
}

/** A worktree's refs live in the main repository's directory, named by its `commondir` file. */
function commonDirOf(gitDir: string): string {
  try {
    return path.resolve(gitDir, readFileSync(path.join(gitDir, 'commondir'), 'utf8').trim());
  } catch {
    return gitDir;
  }
}
