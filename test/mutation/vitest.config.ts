import { defineConfig } from 'vitest/config';
import project from '../../vitest.config.js';

/**
 * The project's vitest configuration, running only the test files `npm run mutate` selected for the
 * mutated modules (test/mutation/mutate.mjs passes them in TOKENTAP_MUTATION_TESTS, a JSON list of
 * globs). They are chosen here and not with Stryker's `testFiles`: with `testFiles`, Stryker 9.6.1
 * activates a static mutant (a module-level constant such as a header list) after the module has
 * loaded, so every static mutant is reported as surviving even when a test fails on it
 * (stryker-mutator/stryker-js issue 6144; measured here: all 12 of hop-by-hop.ts's).
 */
const tests: unknown = JSON.parse(process.env.TOKENTAP_MUTATION_TESTS ?? '[]');
if (!Array.isArray(tests) || tests.length === 0) {
  throw new Error('test/mutation/vitest.config.ts runs the tests `npm run mutate -- <module...>` selects: start it with npm run mutate.');
}

export default defineConfig({ ...project, test: { ...project.test, include: tests as string[] } });
