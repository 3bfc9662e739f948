import { existsSync, writeFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { setPriority } from 'node:os';
import { dirname, join } from 'node:path';
import { parseArgs } from 'node:util';
import { AGAINST_PLAN, renderAgainst, runAgainst, UNARY_AGAINST_ROUNDS } from './against.js';
import { CORRECTNESS_PLAN, FULL_PLAN, runBench, type BenchPlan } from './bench.js';
import { hasTaskset, pin } from './procfs.js';
import { repoRoot } from './processes.js';
import { hasPerf, renderPerfAttribution, runPerfAttribution } from './perf-attribution.js';
import { runProfile } from './profile-run.js';
import { renderProfile } from './profile-summary.js';
import { renderReport } from './report.js';
import { renderSoak, runSoak, SOAK_PLAN } from './soak.js';

/**
 * `npm run bench [-- flags]`:
 *   (none)           the full benchmark: correctness checks, streaming cells, non-streaming sweep;
 *                    table on stdout, JSON in test/bench/results/latest.json; exit 1 if a check failed
 *   --correctness    the same checks at tiny sizes, no pinning (what `npm test` runs)
 *   --cells h2       only the HTTP/2 cleartext cells (gRPC and SSE over h2c) after the correctness
 *                    checks; --cells http1: everything but them (with or without --correctness)
 *   --profile        tokentap alone under node --cpu-prof at 64 streams; top self-time functions
 *   --no-observe     with --profile: the proxy with observation off
 *   --no-request-log with --profile: log_level warn (no per-request log line)
 *   --perf           with --profile: instead, the observing and the unobserved tokentap under the
 *                    paired cell's load, both sampled whole (kernel, all threads) with `perf`, and
 *                    the samples attributed to observation or relay by their stacks
 *   --unary          with --profile --perf: 1,000 non-streamed requests per second instead
 *   --soak           the soak: 100,000 streamed requests of mixed outcomes through one sidecar,
 *                    RSS, heap, handles and series at start, middle and end; exit 1 unless flat
 *                    (--soak-requests N, --soak-seconds S to change its size and time bound)
 *   --against DIR    paired A/B: this build's tokentap and the built checkout in DIR under the same
 *                    load at the same time (against.ts); what a change cost in CPU per token
 *                    (--rounds N measured rounds per mode, default 3; --tokens N per stream,
 *                    default 64: fewer weigh per-request work more; --unary: CPU per request
 *                    under 1,000 non-streamed requests per second instead, 10 rounds by default,
 *                    read its geometric mean: see against.ts)
 *   --priority       run the bench and its processes at nice -10 (root only; on a machine shared
 *                    with other work, so the proxy is not waiting for its core)
 *   --out PATH       where to write the JSON
 */
const USAGE = 'usage: npm run bench [-- [--correctness] [--cells h2|http1] | --profile [--no-observe] [--no-request-log] | --profile --perf [--unary] | --soak [--soak-requests N] [--soak-seconds S] | --against DIR [--rounds N] [--tokens N | --unary]] [--priority] [--out PATH]';

/**
 * nice -10 for this process and everything it starts (children inherit it). With autogroup
 * scheduling (Linux's default for desktop and many server kernels) nice only ranks processes within
 * their session's group, so the group's own nice is raised too.
 */
function raisePriority(): void {
  setPriority(0, -10);
  if (existsSync('/proc/self/autogroup')) writeFileSync('/proc/self/autogroup', '-10');
}

/** `--cells`: the plan with only the HTTP/2 cells (`h2`) or without them (`http1`); the correctness checks always run. */
function selectCells(plan: Omit<BenchPlan, 'log'>, cells: 'h2' | 'http1' | undefined): Omit<BenchPlan, 'log'> {
  if (cells === 'h2') return { ...plan, streamCells: [], unaryRates: [], pairedObservation: { ...plan.pairedObservation, rounds: 0 } };
  if (cells === 'http1') return { ...plan, h2Cells: [] };
  return plan;
}

async function main(): Promise<number> {
  let values;
  try {
    ({ values } = parseArgs({
      options: {
        correctness: { type: 'boolean' },
        cells: { type: 'string' },
        profile: { type: 'boolean' },
        'no-observe': { type: 'boolean' },
        'no-request-log': { type: 'boolean' },
        perf: { type: 'boolean' },
        unary: { type: 'boolean' },
        soak: { type: 'boolean' },
        'soak-requests': { type: 'string' },
        'soak-seconds': { type: 'string' },
        priority: { type: 'boolean' },
        against: { type: 'string' },
        rounds: { type: 'string' },
        tokens: { type: 'string' },
        out: { type: 'string' },
      },
      strict: true,
      allowPositionals: false,
    }));
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n${USAGE}\n`);
    return 2;
  }
  if ((values.rounds !== undefined || values.tokens !== undefined) && values.against === undefined) {
    process.stderr.write(`--rounds and --tokens go with --against DIR\n${USAGE}\n`);
    return 2;
  }
  if (values.cells !== undefined && values.cells !== 'h2' && values.cells !== 'http1') {
    process.stderr.write(`--cells: expected h2 or http1, got "${values.cells}"\n${USAGE}\n`);
    return 2;
  }
  if (process.platform !== 'linux') {
    process.stderr.write('the bench reads CPU time and memory from /proc: Linux only\n');
    return 2;
  }
  if (values.priority) {
    try {
      raisePriority();
    } catch (error) {
      process.stderr.write(`--priority: cannot raise the scheduling priority (${(error as Error).message}); run as root or without --priority\n`);
      return 2;
    }
  }
  const canPin = !values.correctness && hasTaskset();
  // The load generator (this process) shares CPU 1 with the simulator; the proxy gets CPU 0 alone.
  if (canPin) pin(process.pid, 1);
  const log = (line: string): void => void process.stderr.write(`${line}\n`);
  if (!canPin && !values.correctness) log('taskset not found: processes are not pinned');

  if (values.soak) {
    const requests = Number(values['soak-requests'] ?? SOAK_PLAN.requests);
    const maxSeconds = Number(values['soak-seconds'] ?? SOAK_PLAN.maxSeconds);
    if (!Number.isInteger(requests) || requests < 100 || !(maxSeconds > 0)) {
      process.stderr.write(`--soak-requests: expected a whole number of at least 100; --soak-seconds: a positive number\n${USAGE}\n`);
      return 2;
    }
    const result = await runSoak({ ...SOAK_PLAN, requests, maxSeconds, pin: canPin, log });
    process.stdout.write(`${renderSoak(result)}\n`);
    const out = values.out ?? join(repoRoot(), 'test', 'bench', 'results', 'soak.json');
    await mkdir(dirname(out), { recursive: true });
    await writeFile(out, `${JSON.stringify(result, null, 2)}\n`);
    return result.problems.length === 0 ? 0 : 1;
  }

  if (values.profile && values.perf) {
    if (!hasPerf()) {
      process.stderr.write('--perf: the perf command was not found; install it (Debian: apt-get install -y linux-perf) or use --profile alone\n');
      return 2;
    }
    const result = await runPerfAttribution({ pin: canPin, seconds: 8, load: values.unary ? 'unary' : 'stream' });
    process.stdout.write(`${renderPerfAttribution(result)}\n`);
    const out = values.out ?? join(repoRoot(), 'test', 'bench', 'results', `perf-attribution${values.unary ? '-unary' : ''}.json`);
    await mkdir(dirname(out), { recursive: true });
    await writeFile(out, `${JSON.stringify(result, null, 2)}\n`);
    return 0;
  }

  if (values.profile) {
    const run = await runProfile({ pin: canPin, observe: !values['no-observe'], logLevel: values['no-request-log'] ? 'warn' : 'info', arrivalMs: 6000 });
    process.stdout.write(`tokentap (observation ${run.observe ? 'on' : 'off'}, log_level ${run.logLevel}), 64 streams x 64 tokens 20 ms apart: ${run.cpuMsPer1kTokens.toFixed(1)} ms CPU per 1k tokens over ${run.tokens} tokens\n`);
    process.stdout.write(`${renderProfile(run.summary)}\n`);
    const out = values.out ?? join(repoRoot(), 'test', 'bench', 'results', `profile-${run.observe ? 'observe' : 'no-observe'}${run.logLevel === 'info' ? '' : '-no-request-log'}.json`);
    await mkdir(dirname(out), { recursive: true });
    await writeFile(out, `${JSON.stringify(run, null, 2)}\n`);
    return 0;
  }

  if (values.against !== undefined) {
    const rounds = Number(values.rounds ?? (values.unary ? UNARY_AGAINST_ROUNDS : AGAINST_PLAN.rounds));
    const tokens = Number(values.tokens ?? AGAINST_PLAN.tokens);
    if (!Number.isInteger(rounds) || rounds < 1 || rounds > 50) {
      process.stderr.write(`--rounds: expected a whole number from 1 to 50, got "${values.rounds}"\n${USAGE}\n`);
      return 2;
    }
    if (!Number.isInteger(tokens) || tokens < 2 || tokens > 4096) {
      process.stderr.write(`--tokens: expected a whole number from 2 to 4096, got "${values.tokens}"\n${USAGE}\n`);
      return 2;
    }
    if (values.unary && values.tokens !== undefined) {
      process.stderr.write(`--tokens: streams only; --unary sends non-streamed requests of one token\n${USAGE}\n`);
      return 2;
    }
    const result = await runAgainst({ ...AGAINST_PLAN, rounds, tokens, load: values.unary ? 'unary' : 'stream', otherRoot: values.against, pin: canPin, log });
    process.stdout.write(`${renderAgainst(result)}\n`);
    const out = values.out ?? join(repoRoot(), 'test', 'bench', 'results', 'against.json');
    await mkdir(dirname(out), { recursive: true });
    await writeFile(out, `${JSON.stringify(result, null, 2)}\n`);
    return result.rounds.some((r) => r.failed[0] + r.failed[1] > 0) ? 1 : 0;
  }

  const plan = { ...selectCells(values.correctness ? CORRECTNESS_PLAN : FULL_PLAN, values.cells as 'h2' | 'http1' | undefined), pin: canPin, log };
  const result = await runBench(plan);
  process.stdout.write(`${renderReport(result, plan.unaryReferenceRate)}\n`);
  const out = values.out ?? join(repoRoot(), 'test', 'bench', 'results', values.correctness ? 'correctness.json' : 'latest.json');
  await mkdir(dirname(out), { recursive: true });
  await writeFile(out, `${JSON.stringify({ plan: { ...plan, log: undefined }, ...result }, null, 2)}\n`);
  log(`results written to ${out} (${result.durationS.toFixed(0)} s)`);
  return result.correctnessProblems.length === 0 ? 0 : 1;
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(`bench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exitCode = 1;
  },
);
