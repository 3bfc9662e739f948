// `npm run mutate -- <module...> [--tests <glob>]... [--incremental] [--concurrency <n>]`
// Mutates the named modules with Stryker (stryker.config.mjs) and runs only the test files listed for
// them in test/mutation/module-tests.mjs (or the --tests globs). Prints the score per file; the
// HTML report is written to reports/mutation/mutation.html. See docs/testing.md#mutation-testing.
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { relative } from 'node:path';
import { parseArgs } from 'node:util';
import { moduleTests } from './module-tests.mjs';

const usage =
  'Usage: npm run mutate -- <module.ts[:lines]...> [--tests <glob>]... [--incremental] [--concurrency <n>]\n' +
  'Example: npm run mutate -- src/proxy/hop-by-hop.ts src/proxy/http1/chunked-body.ts';

function fail(message) {
  process.stderr.write(`${message}\n${usage}\n`);
  process.exit(2);
}

let parsed;
try {
  parsed = parseArgs({
    allowPositionals: true,
    options: {
      tests: { type: 'string', multiple: true },
      incremental: { type: 'boolean', default: false },
      concurrency: { type: 'string' },
    },
  });
} catch (error) {
  fail(error.message);
}
const { positionals, values } = parsed;
const modules = positionals.map((file) => file.replace(/^\.\//, ''));
if (modules.length === 0) fail('Name the modules to mutate.');
// A module may carry Stryker's line range (src/proxy/hop-by-hop.ts:25-43): mutants in those lines only.
const fileOf = (module) => module.replace(/:[\d:-]+$/, '');

for (const module of modules) {
  if (!existsSync(fileOf(module))) fail(`${fileOf(module)} does not exist (give paths relative to the repository root, like src/proxy/hop-by-hop.ts).`);
}

const unmapped = modules.map(fileOf).filter((file) => !moduleTests[file]);
if (unmapped.length > 0 && !values.tests) {
  fail(
    `${unmapped.join(', ')} ${unmapped.length === 1 ? 'has' : 'have'} no test files listed in test/mutation/module-tests.mjs: ` +
      'add an entry naming the test files that exercise it, or pass --tests <glob> for this run.',
  );
}
const testFiles = [...new Set(values.tests ?? modules.flatMap((module) => moduleTests[fileOf(module)]))];

let concurrency;
if (values.concurrency !== undefined) {
  concurrency = Number(values.concurrency);
  if (!Number.isInteger(concurrency) || concurrency < 1) fail(`--concurrency ${values.concurrency}: give a whole number of workers, 1 or more.`);
}

// One incremental file per set of modules, so runs on different modules do not overwrite each other.
const runKey = createHash('sha256').update([...modules].sort().join('\n')).digest('hex').slice(0, 12);

// The tests are selected in the vitest configuration (test/mutation/vitest.config.ts explains why),
// which Stryker's test-runner processes load with this environment.
process.env.TOKENTAP_MUTATION_TESTS = JSON.stringify(testFiles);

// Imported only now: a wrong command line is refused without loading Stryker (seconds on a busy machine).
const { Stryker } = await import('@stryker-mutator/core');
const stryker = new Stryker({
  configFile: 'stryker.config.mjs',
  mutate: modules,
  incremental: values.incremental,
  incrementalFile: `reports/mutation/incremental-${runKey}.json`,
  ...(concurrency === undefined ? {} : { concurrency }),
});

const started = performance.now();
const results = await stryker.runMutationTest();
const minutes = ((performance.now() - started) / 60_000).toFixed(1);

// Score as Stryker counts it: killed + timeout over all valid mutants (no coverage counts as survived).
const detected = new Set(['Killed', 'Timeout']);
const undetected = new Set(['Survived', 'NoCoverage']);
const byFile = new Map();
for (const mutant of results) {
  const file = relative(process.cwd(), mutant.fileName);
  const counts = byFile.get(file) ?? { detected: 0, undetected: 0, survivors: [] };
  if (detected.has(mutant.status)) counts.detected += 1;
  if (undetected.has(mutant.status)) {
    counts.undetected += 1;
    counts.survivors.push(`${mutant.location.start.line}:${mutant.location.start.column} ${mutant.mutatorName} ${mutant.status}: ${mutant.replacement ?? ''}`);
  }
  byFile.set(file, counts);
}
process.stdout.write(`\nMutation run on ${modules.length} module(s) with ${testFiles.length} test glob(s): ${minutes} min\n`);
for (const [file, counts] of byFile) {
  const total = counts.detected + counts.undetected;
  const score = total === 0 ? 'n/a' : `${((100 * counts.detected) / total).toFixed(1)}%`;
  process.stdout.write(`${file}: ${score} (${counts.detected} of ${total} detected)\n`);
  for (const survivor of counts.survivors) process.stdout.write(`  survived ${survivor}\n`);
}
