import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { moduleTests } from './module-tests.mjs';

/**
 * `npm run mutate` itself (the mutation runs are too slow for `npm test`, docs/testing.md): the
 * modules docs/testing.md lists have test files to run, and a wrong command line is refused at once
 * with what to do, before Stryker starts.
 */

const run = promisify(execFile);
const mutate = async (...args: string[]) => run(process.execPath, ['test/mutation/mutate.mjs', ...args]).then(
  () => ({ code: 0, stderr: '' }),
  (error: { code: number; stderr: string }) => ({ code: error.code, stderr: error.stderr }),
);

/** The modules in the score table of docs/testing.md (first column, in backquotes). */
function documentedModules(): string[] {
  const page = readFileSync('docs/testing.md', 'utf8');
  const table = page.slice(page.indexOf('| Module |'));
  return [...table.matchAll(/^\| `([^`]+)` \|/gm)].map((m) => m[1] as string);
}

describe('npm run mutate', () => {
  it('has test files for every module whose score docs/testing.md lists, and every listed test file exists', () => {
    const documented = documentedModules();
    expect(documented.length).toBeGreaterThanOrEqual(12);
    for (const module of documented) {
      expect(existsSync(module), module).toBe(true);
      expect(moduleTests[module], module).toBeDefined();
    }
    for (const [module, globs] of Object.entries(moduleTests)) {
      for (const glob of globs.filter((g) => !g.includes('*'))) expect(existsSync(glob), `${module}: ${glob}`).toBe(true);
    }
  });

  it('refuses a run without modules, a missing module and a module with no test files, naming what to do', async () => {
    expect(await mutate()).toEqual({ code: 2, stderr: expect.stringContaining('Name the modules to mutate.') });
    expect(await mutate('src/proxy/no-such-module.ts')).toEqual({ code: 2, stderr: expect.stringContaining('src/proxy/no-such-module.ts does not exist') });
    const unmapped = await mutate('src/proxy/upstream-pool.ts');
    expect(unmapped.code).toBe(2);
    expect(unmapped.stderr).toContain('src/proxy/upstream-pool.ts has no test files listed in test/mutation/module-tests.mjs');
    expect(unmapped.stderr).toContain('--tests <glob>');
    expect(await mutate('src/proxy/hop-by-hop.ts', '--concurrency', 'two')).toEqual({ code: 2, stderr: expect.stringContaining('--concurrency two: give a whole number of workers') });
  });
});
