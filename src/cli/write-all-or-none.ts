import { mkdir, rename, rm, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { TokentapError } from '../errors.js';

export interface FileToWrite {
  readonly path: string;
  readonly content: string;
}

/** The file operations used, so a test can make one of them fail. */
export interface WriteOps {
  mkdir(path: string): Promise<unknown>;
  writeFile(path: string, content: string): Promise<void>;
  rename(from: string, to: string): Promise<void>;
  remove(path: string): Promise<void>;
}

export const NODE_WRITE_OPS: WriteOps = {
  mkdir: (path) => mkdir(path, { recursive: true }),
  writeFile: (path, content) => writeFile(path, content),
  rename: (from, to) => rename(from, to),
  remove: (path) => rm(path, { force: true }),
};

/**
 * Writes every file or leaves every target as it was: each file first goes to a temporary name
 * beside its target (same directory, so the same file system, where rename(2) replaces the target
 * atomically), and only once all of them are written are they renamed into place. A failure while
 * writing removes the temporaries and names the file and the problem in plain words.
 */
export async function writeAllOrNone(files: readonly FileToWrite[], ops: WriteOps = NODE_WRITE_OPS): Promise<void> {
  const suffix = `.tokentap-${process.pid}-${Date.now().toString(36)}.tmp`;
  const written: string[] = [];
  try {
    for (const file of files) {
      await ops.mkdir(dirname(file.path)).catch((error: unknown) => fail(dirname(file.path), error, 'create the directory'));
      const temporary = `${file.path}${suffix}`;
      await ops.writeFile(temporary, file.content).catch((error: unknown) => fail(file.path, error, 'write'));
      written.push(temporary);
    }
  } catch (error) {
    await Promise.all(written.map((temporary) => ops.remove(temporary).catch(() => undefined)));
    throw error;
  }
  for (const file of files) {
    await ops.rename(`${file.path}${suffix}`, file.path).catch((error: unknown) => fail(file.path, error, 'replace'));
  }
}

/** What each errno means for someone who asked for files in a directory. */
const PLAIN_WORDS: Readonly<Record<string, string>> = {
  EACCES: 'permission denied: this user may not write there (check the directory\'s owner and mode, or choose another --out)',
  EPERM: 'operation not permitted: this user may not write there (check the directory\'s owner and mode, or choose another --out)',
  EROFS: 'the file system is read-only (choose another --out)',
  ENOSPC: 'the disk is full',
  ENOTDIR: 'a part of the path is a file, not a directory',
  EISDIR: 'a directory is in the way of the file',
  EEXIST: 'a file is in the way of the directory',
};

function fail(path: string, error: unknown, action: string): never {
  const code = (error as NodeJS.ErrnoException).code;
  const words = (code === undefined ? undefined : PLAIN_WORDS[code]) ?? (error as Error).message;
  throw new TokentapError('TOKENTAP_ERR_WRITE', [`cannot ${action} ${path}: ${words}${code === undefined ? '' : ` (${code})`}; nothing was written`]);
}
