#!/usr/bin/env node
// Thin launcher: the CLI is compiled from src/ by `npm run build` (run by `npm ci` through `prepare`).
// dist/ is loaded only once build-check.js has found it built and current, so a missing or stale
// build gets a message saying what to run instead of a module-not-found stack or old code.
import { fileURLToPath } from 'node:url';
import { buildProblem } from './build-check.js';

const problem = buildProblem(fileURLToPath(new URL('..', import.meta.url)));
if (problem !== undefined) {
  process.stderr.write(`tokentap: ${problem}\n`);
  process.exit(1);
}
const { main } = await import('../dist/cli/main.js');

process.exitCode = await main(process.argv.slice(2), { stdout: process.stdout, stderr: process.stderr, env: process.env });
