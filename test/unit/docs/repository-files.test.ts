import { execFileSync } from 'node:child_process';
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '../../..');

describe('the repository', () => {
  it('tracks no empty file (an empty full-h10-review.md sat in its root)', () => {
    const tracked = execFileSync('git', ['ls-files', '-z'], { cwd: ROOT, encoding: 'utf8' }).split('\0').filter((file) => file !== '');
    expect(tracked.length).toBeGreaterThan(100);
    // A file deleted in the work tree but still tracked is not this test's concern.
    const empty = tracked.filter((file) => {
      try {
        return statSync(join(ROOT, file)).size === 0;
      } catch {
        return false;
      }
    });
    expect(empty).toEqual([]);
  });
});
