// Mutation testing (docs/testing.md#mutation-testing). Run it through `npm run mutate -- <module...>`,
// which sets `mutate`, and the test files (from test/mutation/module-tests.mjs) that
// test/mutation/vitest.config.ts runs; this file holds what every run shares.
// @ts-check
/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
const config = {
  testRunner: 'vitest',
  vitest: {
    configFile: 'test/mutation/vitest.config.ts',
    // The relay's tests reach src/proxy through startSidecar, so vitest's import graph relates almost
    // every test file to every relay module; the module map names the tests that exercise each module.
    related: false,
  },
  // Each mutant runs only the tests that executed its code in the initial run.
  coverageAnalysis: 'perTest',
  // The machine is 2 cores shared with other work; 2 workers, overridable with --concurrency.
  concurrency: 2,
  // Tests on real sockets slow down under load; a mutant that loops is still caught after this.
  timeoutMS: 15_000,
  timeoutFactor: 2,
  reporters: ['clear-text', 'progress', 'html', 'json'],
  htmlReporter: { fileName: 'reports/mutation/mutation.html' },
  jsonReporter: { fileName: 'reports/mutation/mutation.json' },
  clearTextReporter: { allowColor: false, logTests: false },
  tempDirName: '.stryker-tmp',
  cleanTempDir: 'always',
  ignorePatterns: ['reports', 'coverage', 'test/bench/results', 'docs/images', 'bench-results'],
};

export default config;
