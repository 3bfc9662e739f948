#!/usr/bin/env node
// Thin launcher: the CLI is compiled from src/ by `npm run build` (run by `npm ci` through `prepare`).
// dist/ is loaded only once build-check.js has found it built and current, and node-version-check.js
// the running Node one package.json's engines admits, so a missing or stale build or an old Node
// gets a message saying what to do instead of a module-not-found stack, old code or failures later.
import { fileURLToPath } from 'node:url';
import { buildProblem } from './build-check.js';
import { nodeVersionProblem } from './node-version-check.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const problem = buildProblem(root) ?? nodeVersionProblem(root, process.versions.node);
if (problem !== undefined) {
  process.stderr.write(`tokentap: ${problem}\n`);
  process.exit(1);
}
const { main } = await import('../dist/cli/main.js');

process.exitCode = await main(process.argv.slice(2), { stdout: process.stdout, stderr: process.stderr, env: process.env });
