import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fineItlBuckets } from './accuracy.js';
import { runStreamLoad, runUnaryLoad } from './load.js';
import { groupCpuMs } from './procfs.js';
import { snapshotBuild, startSidecarProcess, startSimulatorProcess, type BenchProcess, type SidecarProcess } from './processes.js';

/**
 * `npm run bench -- --against DIR`: what a change cost, as a paired A/B. This build's tokentap and
 * the build in DIR (another checkout with its own `npm ci` and `npm run build`, e.g. a
 * `git worktree` of the commit before the change) carry the same streaming load at the same time,
 * on the same pinned core, in fresh processes: whatever else the machine does weighs on both, so the
 * ratio of their CPU per token is what a sequential comparison cannot give (sequential cells of one
 * build moved by 7-33 % between runs an hour apart; paired rounds stayed within a few percent).
 * Both with observation on, then both with it off (the relay alone), one unmeasured round each.
 *
 * `load: 'unary'` pairs them under the non-streaming cell's load instead (1,000 tiny requests per
 * second each, 3 s a round) and reports CPU per request: a change to per-request work is measured
 * there, where nothing per chunk dilutes it. Under that load the build whose requests start first
 * is charged 10-15 % more (identical relay code, observation off, 10 rounds: 1.10-1.19x and
 * 0.85-0.89x, alternating with the order), so its rounds split into two clusters and only the
 * geometric mean over an even number of them (each build first in half) cancels the order; two
 * such runs of identical code read 1.001x and 0.957x, so it resolves about 5 %.
 */

export interface AgainstPlan {
  readonly otherRoot: string;
  readonly pin: boolean;
  readonly rounds: number;
  readonly concurrency: number;
  readonly itlMs: number;
  readonly ttftMs: number;
  readonly tokens: number;
  /** `stream`: `concurrency` streams of `tokens` tokens; `unary`: UNARY_RATE_PER_S tiny non-streamed requests per second. */
  readonly load: 'stream' | 'unary';
  readonly log: (line: string) => void;
}

export const AGAINST_PLAN = { rounds: 3, concurrency: 64, itlMs: 20, ttftMs: 20, tokens: 64, load: 'stream' } as const;

/** Rounds per mode for `load: 'unary'` unless asked otherwise: even, so each build starts first in half. */
export const UNARY_AGAINST_ROUNDS = 10;

/**
 * The shortest arrival window of a streaming round: with short streams (`--tokens`) three streams'
 * length would be a round of a second or less, whose CPU the 10 ms ticks of /proc cannot resolve;
 * the default's window (three streams of 1.3 s) keeps about as many tokens per round.
 */
const MIN_STREAM_ARRIVAL_MS = 3 * (AGAINST_PLAN.ttftMs + AGAINST_PLAN.tokens * AGAINST_PLAN.itlMs);

/** The non-streaming cell's rate and a round's length for `load: 'unary'`. */
const UNARY_RATE_PER_S = 1000;
const UNARY_ROUND_MS = 3000;

export interface AgainstRound {
  readonly observe: boolean;
  /** CPU per unit (ms per 1,000 delivered tokens for streams, µs per completed request for `unary`): this build, the other build. */
  readonly thisCpu: number;
  readonly otherCpu: number;
  /** this / other: above 1, this build costs more. */
  readonly ratio: number;
  /** Requests that did not complete, per build (must be 0 for the round to count). */
  readonly failed: readonly [number, number];
}

export interface AgainstResult {
  readonly otherRoot: string;
  readonly load: 'stream' | 'unary';
  /** What thisCpu and otherCpu count. */
  readonly unit: string;
  readonly startedAt: string;
  readonly durationS: number;
  readonly rounds: readonly AgainstRound[];
}

/** The other build's launcher; refuses a directory that holds no built tokentap. */
export function otherBuildBin(dir: string): string {
  const root = resolve(dir);
  const bin = join(root, 'bin', 'tokentap.js');
  if (!existsSync(bin) || !existsSync(join(root, 'dist', 'cli', 'main.js')) || !existsSync(join(root, 'node_modules'))) {
    throw new Error(`--against ${dir}: expected a tokentap checkout with node_modules and a build (bin/tokentap.js, dist/cli/main.js); run \`npm ci && npm run build\` there`);
  }
  return bin;
}

export async function runAgainst(plan: AgainstPlan): Promise<AgainstResult> {
  const started = performance.now();
  const startedAt = new Date().toISOString();
  const otherBin = otherBuildBin(plan.otherRoot);
  const snapshot = snapshotBuild();
  const proxyCpu = plan.pin ? 0 : undefined;
  const owned: BenchProcess[] = [];
  const rounds: AgainstRound[] = [];
  try {
    const simulator = await startSimulatorProcess({ bin: snapshot.bin, cpu: plan.pin ? 1 : undefined, ttftMs: plan.ttftMs });
    owned.push(simulator);
    const itlBuckets = fineItlBuckets();
    for (const observe of [true, false]) {
      const start = (bin: string, name: string): Promise<SidecarProcess> => startSidecarProcess({ bin, name, cpu: proxyCpu, upstream: simulator.url, observe, itlBuckets });
      const pair = await Promise.all([start(snapshot.bin, 'tokentap'), start(otherBin, 'tokentap-other')]);
      owned.push(...pair);
      // One unmeasured round: both processes warmed up (JIT, pools) before any figure is taken.
      await pairedRound(pair, plan, 1);
      for (let round = 0; round < plan.rounds; round++) {
        const measured = { observe, ...(await pairedRound(pair, plan, round)) };
        rounds.push(measured);
        plan.log(`against r${round + 1} observe ${observe ? 'on' : 'off'}: this ${measured.thisCpu.toFixed(1)} / other ${measured.otherCpu.toFixed(1)} ${unitOf(plan.load)} = ${measured.ratio.toFixed(3)}x${measured.failed[0] + measured.failed[1] > 0 ? ` (failed ${measured.failed.join(' / ')})` : ''}`);
      }
      await Promise.all(pair.map((p) => p.stop()));
      owned.splice(1);
    }
  } finally {
    await Promise.all(owned.map((p) => p.stop().catch(() => undefined)));
    snapshot.remove();
  }
  return { otherRoot: resolve(plan.otherRoot), load: plan.load, unit: unitOf(plan.load), startedAt, durationS: (performance.now() - started) / 1000, rounds };
}

function unitOf(load: 'stream' | 'unary'): string {
  return load === 'unary' ? 'µs CPU per request' : 'ms CPU per 1k tokens';
}

/**
 * One measured round. The build whose load starts first has its requests go out first at every
 * arrival and was charged 1-3 % more CPU per token with identical builds, so the order alternates
 * by `round` (even: this build first).
 */
async function pairedRound(pair: readonly SidecarProcess[], plan: AgainstPlan, round: number): Promise<Omit<AgainstRound, 'observe'>> {
  const streamMs = plan.ttftMs + plan.tokens * plan.itlMs;
  const cpuBefore = pair.map((s) => groupCpuMs(s.pids()));
  const launchOrder = round % 2 === 0 ? [0, 1] : [1, 0];
  // Per load: the units done (tokens delivered, requests completed) and the requests that failed.
  const launched = await Promise.all(
    launchOrder.map(async (index): Promise<{ units: number; failed: number }> => {
      const url = (pair[index] as SidecarProcess).url;
      if (plan.load === 'unary') {
        const result = await runUnaryLoad({ url, ratePerS: UNARY_RATE_PER_S, durationMs: UNARY_ROUND_MS, drainTimeoutMs: 10_000 });
        return { units: result.completed, failed: result.failed };
      }
      const result = await runStreamLoad({
        url,
        concurrency: plan.concurrency,
        ttftMs: plan.ttftMs,
        itlMs: plan.itlMs,
        tokens: plan.tokens,
        arrivalMs: Math.max(streamMs * 3, MIN_STREAM_ARRIVAL_MS),
        maxRequests: 20_000,
        stamp: false,
        keepBodies: false,
        drainTimeoutMs: Math.min(60_000, streamMs * 4 + 5000),
      });
      return { units: result.tokens, failed: result.failed };
    }),
  );
  const results = launchOrder[0] === 0 ? launched : [launched[1], launched[0]];
  // CPU ms x 1,000 / tokens is ms per 1,000 tokens; / requests, µs per request.
  const [self, other] = pair.map((s, i) => ((groupCpuMs(s.pids()) - (cpuBefore[i] as number)) * 1000) / Math.max(1, results[i]!.units)) as [number, number];
  return { thisCpu: self, otherCpu: other, ratio: self / other, failed: [results[0]!.failed, results[1]!.failed] };
}

/** Per observation mode, the median and the geometric mean of the rounds, for the closing line. */
export function renderAgainst(result: AgainstResult): string {
  const lines = [`paired A/B against ${result.otherRoot} (${result.load === 'unary' ? 'non-streamed requests' : 'streams'}, ${result.durationS.toFixed(0)} s), ${result.unit}, this / other:`];
  for (const observe of [true, false]) {
    const rounds = result.rounds.filter((r) => r.observe === observe);
    if (rounds.length === 0) continue;
    const ratios = rounds.map((r) => r.ratio).sort((a, b) => a - b);
    const median = ratios[Math.floor(ratios.length / 2)] as number;
    // Over an even number of rounds each build started first in half of them, so the geometric mean
    // cancels a first-started bias that a median of rounds split into two clusters does not.
    const geometricMean = Math.exp(ratios.reduce((sum, r) => sum + Math.log(r), 0) / ratios.length);
    const detail = rounds.map((r) => `${r.thisCpu.toFixed(1)}/${r.otherCpu.toFixed(1)}`).join(', ');
    lines.push(`  observation ${observe ? 'on ' : 'off'}: median ${median.toFixed(3)}x, geometric mean ${geometricMean.toFixed(3)}x (rounds ${ratios.map((r) => r.toFixed(3)).join(', ')}; in order ${detail})`);
  }
  return lines.join('\n');
}
