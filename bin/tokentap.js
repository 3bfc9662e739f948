#!/usr/bin/env node
// Thin launcher: the CLI is compiled from src/ by `npm run build` (run by `npm ci` through `prepare`).
import { main } from '../dist/cli/main.js';

process.exitCode = await main(process.argv.slice(2), { stdout: process.stdout, stderr: process.stderr, env: process.env });
