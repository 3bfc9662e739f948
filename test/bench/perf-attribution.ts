import { execFileSync, spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fineItlBuckets } from './accuracy.js';
import { runStreamLoad, runUnaryLoad } from './load.js';
import { groupCpuMs } from './procfs.js';
import { snapshotBuild, startSidecarProcess, startSimulatorProcess, type BenchProcess, type SidecarProcess } from './processes.js';

/**
 * `npm run bench -- --profile --perf [--unary]`: where observation's CPU goes, counted over the whole
 * process. `--profile` alone samples the main thread's JavaScript under V8's profiler, which sees
 * about a third of the process's CPU (not the kernel's socket work, nor other threads); `perf`
 * samples all of it. The observing and the unobserved tokentap carry the paired cell's load at once
 * (64 streams x 64 tokens, 20 ms apart; with --unary, 1,000 tiny non-streamed requests per second
 * each) under `perf record -g`, with `--perf-basic-prof` so that
 * JavaScript frames have names; each sample of the main thread is then put in one class by its
 * stack:
 *
 * - observation: a frame of the request monitor, the taps, the metrics, the workload profile, the
 *   request log (and pino), the SLO events, the token timeline, the request-body sniffer;
 * - relay: any other JavaScript on the stack (the proxy, Node's streams and sockets);
 * - no JavaScript: the event loop's poll, the kernel under it, the garbage collector on the main
 *   thread; other threads (libuv's pool, V8's compiler and GC helpers) apart.
 *
 * Observation is a lower bound: TurboFan inlines small observation calls into the proxy's frames
 * (the monitor's constructor into the Exchange's), which then count as relay, and a sample inside
 * V8's or Node's C++ built without frame pointers (JSON.parse) can lose its JavaScript callers and
 * count as no JavaScript; the difference of the two processes' totals is the whole price. One
 * round, the observing process's load started first: its on/off ratio carries the first-started
 * bias the paired cell alternates away (1-3 %); the attribution within a process does not.
 */
const OBSERVATION_FRAME = /\/dist\/(?:proxy\/(?:request-monitor|request-body-sniffer|http1\/incoming-headers)\.js|taps\/|metrics\/|profile\/|log\/|slo\/|clock\/|tracing\/)|node_modules\/(?:pino|sonic-boom)\//;

export interface PerfClasses {
  readonly samples: number;
  readonly observation: number;
  readonly relay: number;
  readonly noJavaScript: number;
  readonly otherThreads: number;
}

export interface PerfAttribution {
  /** `stream`: the paired cell's load; `unary`: 1,000 tiny non-streamed requests per second. */
  readonly load: 'stream' | 'unary';
  /** CPU ms per 1k tokens (stream) or µs per request (unary). */
  readonly cpu: readonly [observed: number, unobserved: number];
  readonly observed: PerfClasses;
  readonly unobserved: PerfClasses;
  /** Observation samples by their outermost observation frame (the proxy's call into it). */
  readonly observationEntries: ReadonlyArray<readonly [frame: string, samples: number]>;
  /** Observation samples by their innermost observation frame (where in it the time went). */
  readonly observationFrames: ReadonlyArray<readonly [frame: string, samples: number]>;
}

export function hasPerf(): boolean {
  try {
    execFileSync('perf', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

export async function runPerfAttribution(options: { readonly pin: boolean; readonly seconds: number; readonly load: 'stream' | 'unary' }): Promise<PerfAttribution> {
  const dir = await mkdtemp(join(tmpdir(), 'tokentap-bench-perf-'));
  const snapshot = snapshotBuild();
  const owned: BenchProcess[] = [];
  try {
    const simulator = await startSimulatorProcess({ bin: snapshot.bin, cpu: options.pin ? 1 : undefined, ttftMs: 20 });
    owned.push(simulator);
    const start = (name: string, observe: boolean): Promise<SidecarProcess> =>
      startSidecarProcess({ bin: snapshot.bin, name, cpu: options.pin ? 0 : undefined, upstream: simulator.url, observe, itlBuckets: fineItlBuckets(), perfMap: true, keepRequestLines: false });
    const pair = [await start('tokentap', true), await start('tokentap-unobserved', false)];
    owned.push(...pair);
    // Per 1k tokens for streams, per request for the non-streamed load.
    const load = async (system: SidecarProcess, arrivalMs: number): Promise<{ units: number; per: number }> => {
      if (options.load === 'unary') {
        const result = await runUnaryLoad({ url: system.url, ratePerS: 1000, durationMs: arrivalMs, drainTimeoutMs: 10_000 });
        return { units: result.completed, per: 1000 };
      }
      const result = await runStreamLoad({ url: system.url, concurrency: 64, ttftMs: 20, itlMs: 20, tokens: 64, arrivalMs, maxRequests: 50_000, stamp: false, keepBodies: false, drainTimeoutMs: 20_000 });
      return { units: result.tokens, per: 1000 };
    };
    // Warm-up: both processes' JIT and pools settled before anything is sampled.
    await Promise.all(pair.map((system) => load(system, 4000)));
    const files = pair.map((_, i) => join(dir, `perf-${i}.data`));
    const recorders = pair.map((system, i) => {
      const child = spawn('perf', ['record', '-F', '4999', '-g', '-p', String(system.pids()[0]), '-o', files[i] as string, '--', 'sleep', String(options.seconds)], { stdio: 'ignore' });
      return new Promise<void>((resolve, reject) => {
        child.once('error', reject);
        child.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`perf record exited with ${code} (is perf allowed here? see /proc/sys/kernel/perf_event_paranoid)`))));
      });
    });
    const cpuBefore = pair.map((s) => groupCpuMs(s.pids()));
    const results = await Promise.all(pair.map((system) => load(system, options.seconds * 1000)));
    const cpuMs = pair.map((s, i) => groupCpuMs(s.pids()) - (cpuBefore[i] as number));
    await Promise.all(recorders);
    const stacks = files.map((file) => readStacks(file));
    const entries = new Map<string, number>();
    const frames = new Map<string, number>();
    const observed = classify(stacks[0] as Stack[], pair[0]!.pids()[0] as number, entries, frames);
    const unobserved = classify(stacks[1] as Stack[], pair[1]!.pids()[0] as number, new Map(), new Map());
    const top = (map: Map<string, number>): Array<[string, number]> => [...map.entries()].sort((a, b) => b[1] - a[1]).slice(0, 15);
    const per = (i: number): number => ((cpuMs[i] as number) * results[i]!.per) / Math.max(1, results[i]!.units);
    return {
      load: options.load,
      cpu: [per(0), per(1)],
      observed,
      unobserved,
      observationEntries: top(entries),
      observationFrames: top(frames),
    };
  } finally {
    await Promise.all(owned.map((p) => p.stop().catch(() => undefined)));
    snapshot.remove();
    await rm(dir, { recursive: true, force: true });
  }
}

interface Stack {
  readonly tid: string;
  /** Innermost first, as perf prints them. */
  readonly frames: string[];
}

function readStacks(file: string): Stack[] {
  const text = execFileSync('perf', ['script', '-i', file, '-F', 'tid,ip,sym'], { encoding: 'utf8', maxBuffer: 1 << 30, stdio: ['ignore', 'pipe', 'ignore'] });
  const stacks: Stack[] = [];
  let current: Stack | undefined;
  for (const line of text.split('\n')) {
    if (line.trim() === '') {
      current = undefined;
    } else if (!line.startsWith('\t')) {
      current = { tid: line.trim().split(/\s+/)[0] as string, frames: [] };
      stacks.push(current);
    } else if (current !== undefined) {
      const space = line.trim().indexOf(' ');
      current.frames.push(space === -1 ? '' : line.trim().slice(space + 1));
    }
  }
  return stacks;
}

/** The classes of one process's samples (`pid`: its main thread); observation samples also counted by entry and by frame into the maps. */
function classify(stacks: readonly Stack[], pid: number, entries: Map<string, number>, frames: Map<string, number>): PerfClasses {
  // perf prints thread ids; the main thread's is the process's id (taskset execs node in place).
  const main = String(pid);
  let observation = 0;
  let relay = 0;
  let noJavaScript = 0;
  let otherThreads = 0;
  const add = (map: Map<string, number>, frame: string): void => void map.set(shortFrame(frame), (map.get(shortFrame(frame)) ?? 0) + 1);
  for (const { tid, frames: stack } of stacks) {
    if (tid !== main) {
      otherThreads++;
      continue;
    }
    let innermost = -1;
    let outermost = -1;
    stack.forEach((frame, i) => {
      if (!OBSERVATION_FRAME.test(frame)) return;
      if (innermost === -1) innermost = i;
      outermost = i;
    });
    if (innermost !== -1) {
      observation++;
      add(entries, stack[outermost] as string);
      add(frames, stack[innermost] as string);
    } else if (stack.some((frame) => frame.startsWith('JS:'))) {
      relay++;
    } else {
      noJavaScript++;
    }
  }
  return { samples: stacks.length, observation, relay, noJavaScript, otherThreads };
}

function shortFrame(frame: string): string {
  return frame.replace(/^JS:[*^~]?/, '').replace(/file:\/\/\S*\/dist\//, '').replace(/\S*node_modules\//, '');
}

export function renderPerfAttribution(result: PerfAttribution): string {
  const share = (n: number, of: PerfClasses): string => `${n} (${((100 * n) / Math.max(1, of.samples)).toFixed(1)} %)`;
  const row = (label: string, pick: (c: PerfClasses) => number): string => `  ${label.padEnd(26)} ${share(pick(result.observed), result.observed).padStart(16)} ${share(pick(result.unobserved), result.unobserved).padStart(16)}`;
  const [observedCpu, unobservedCpu] = result.cpu;
  const what = result.load === 'unary' ? '1,000 non-streamed requests/s' : "the paired cell's load";
  const unit = result.load === 'unary' ? 'µs CPU per request' : 'ms CPU per 1k tokens';
  return [
    `perf, ${what} on both at once: observing ${observedCpu.toFixed(1)}, unobserved ${unobservedCpu.toFixed(1)} ${unit} (${(observedCpu / unobservedCpu).toFixed(3)}x)`,
    `  ${'samples of the process'.padEnd(26)} ${'observing'.padStart(16)} ${'unobserved'.padStart(16)}`,
    row('all', (c) => c.samples),
    row('observation (JS stack)', (c) => c.observation),
    row('relay (JS stack)', (c) => c.relay),
    row('main thread, no JS', (c) => c.noJavaScript),
    row('other threads', (c) => c.otherThreads),
    'observation by entry (the proxy calling into it):',
    ...result.observationEntries.map(([frame, n]) => `  ${String(n).padStart(6)}  ${frame}`),
    'observation by innermost observation frame:',
    ...result.observationFrames.map(([frame, n]) => `  ${String(n).padStart(6)}  ${frame}`),
  ].join('\n');
}
