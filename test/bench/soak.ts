import http from 'node:http';
import { rssKiB } from './procfs.js';
import { snapshotBuild, startSidecarProcess, startSimulatorProcess, type BenchProcess } from './processes.js';
import { fineItlBuckets } from './accuracy.js';

/**
 * `npm run bench -- --soak [--soak-requests N] [--soak-seconds S]`: one sidecar carrying N streamed
 * requests (100,000 by default) of mixed outcomes from 64 clients at once, bounded in time, with
 * its memory, handles and metric series read at start (after a warm-up), middle and end. Flat
 * memory after warm-up is what it asserts: anything held per request (a leaked listener, a series
 * per request, a buffer never given back) shows as growth over 100,000 requests.
 *
 * Outcomes, by request number modulo 10: 0-5 completed; 6 the client leaves after its first read;
 * 7 the upstream resets the stream after 2 tokens (x-sim-fault reset:2); 8 an in-stream error
 * event (error:2); 9 a 503 at once (status:503).
 */
export interface SoakPlan {
  readonly requests: number;
  readonly maxSeconds: number;
  readonly concurrency: number;
  readonly tokens: number;
  readonly pin: boolean;
  readonly log: (line: string) => void;
}

export interface SoakSample {
  readonly at: 'start' | 'middle' | 'end';
  readonly requests: number;
  readonly rssMiB: number;
  readonly heapUsedMiB: number;
  readonly activeHandles: number;
  readonly series: number;
}

export interface SoakResult {
  readonly requests: number;
  readonly durationS: number;
  readonly outcomes: Readonly<Record<string, number>>;
  readonly samples: readonly SoakSample[];
  /** Bounds broken (empty when memory stayed flat). */
  readonly problems: readonly string[];
}

export const SOAK_PLAN = { requests: 100_000, maxSeconds: 300, concurrency: 64, tokens: 16 } as const;

/**
 * After warm-up, from the start sample to the end: RSS may grow by this much (heap growth until V8
 * settles its young generation and code caches, allocator slack) and the heap by HEAP_GROWTH_MIB.
 * A leak of 1 KiB per request is 98 MiB over the default run: far past both.
 */
const RSS_GROWTH_MIB = 48;
const HEAP_GROWTH_MIB = 24;
/** Handles: the listeners, pooled upstream sockets (at most one per client), timers. */
const HANDLE_GROWTH = 32;
/** Requests before the start sample: heaps, pools and the model folding settle within them. */
const WARM_UP_SHARE = 0.05;

const FAULTS = ['', '', '', '', '', '', 'leave', 'reset:2', 'error:2', 'status:503'] as const;

export async function runSoak(plan: SoakPlan): Promise<SoakResult> {
  const snapshot = snapshotBuild();
  const owned: BenchProcess[] = [];
  try {
    const simulator = await startSimulatorProcess({ bin: snapshot.bin, cpu: plan.pin ? 1 : undefined, ttftMs: 5 });
    owned.push(simulator);
    const sidecar = await startSidecarProcess({
      bin: snapshot.bin,
      name: 'tokentap',
      cpu: plan.pin ? 0 : undefined,
      upstream: simulator.url,
      observe: true,
      itlBuckets: fineItlBuckets(),
      keepRequestLines: false,
    });
    owned.push(sidecar);
    const pid = sidecar.pids()[0] as number;
    const agent = new http.Agent({ keepAlive: true, maxSockets: plan.concurrency });
    const target = new URL('/v1/chat/completions', sidecar.url);
    const body = JSON.stringify({ model: 'soak-model', stream: true, max_tokens: plan.tokens, messages: [{ role: 'user', content: 'soak' }] });
    const outcomes: Record<string, number> = {};
    const samples: SoakSample[] = [];
    const startedMs = performance.now();
    const deadlineMs = startedMs + plan.maxSeconds * 1000;
    const warmUp = Math.floor(plan.requests * WARM_UP_SHARE);
    const middle = Math.floor(plan.requests / 2);
    let issued = 0;
    let finished = 0;
    let sampling: Promise<void> = Promise.resolve();
    const sample = (at: SoakSample['at']): void => {
      const requests = finished;
      sampling = sampling.then(async () => {
        samples.push(await readSample(pid, sidecar.adminUrl, at, requests));
      });
    };
    const one = (n: number): Promise<void> =>
      new Promise((resolve) => {
        const fault = FAULTS[n % FAULTS.length] as (typeof FAULTS)[number];
        const headers: Record<string, string> = { 'content-type': 'application/json', 'x-sim-itl-ms': '1', 'x-sim-ttft-ms': '5' };
        if (fault !== '' && fault !== 'leave') headers['x-sim-fault'] = fault;
        const count = (what: string): void => {
          outcomes[what] = (outcomes[what] ?? 0) + 1;
          resolve();
        };
        const request = http.request(target, { method: 'POST', agent, headers }, (response) => {
          if (fault === 'leave') {
            response.once('data', () => {
              request.destroy();
              count('client left');
            });
            return;
          }
          response.resume();
          response.on('end', () => count(response.statusCode === 200 ? (fault === '' ? 'completed' : `fault ${fault}`) : `status ${response.statusCode ?? 0}`));
          response.on('error', () => count(`broken (${fault || 'none'})`));
        });
        request.on('error', () => count(`broken (${fault || 'none'})`));
        request.end(body);
      });
    await Promise.all(
      Array.from({ length: plan.concurrency }, async () => {
        while (issued < plan.requests && performance.now() < deadlineMs) {
          const n = issued++;
          await one(n);
          finished++;
          if (finished === warmUp) sample('start');
          else if (finished === middle) sample('middle');
          if (finished % 10_000 === 0) plan.log(`soak: ${finished} requests, RSS ${(rssKiB(pid) / 1024).toFixed(0)} MiB`);
        }
      }),
    );
    agent.destroy();
    // Let the last cancelled streams and the pool settle before the end sample.
    await new Promise((resolve) => setTimeout(resolve, 4_000));
    sample('end');
    await sampling;
    const durationS = (performance.now() - startedMs) / 1000;
    return { requests: finished, durationS, outcomes, samples, problems: flatnessProblems(samples, plan.requests, finished) };
  } finally {
    await Promise.all(owned.map((p) => p.stop().catch(() => undefined)));
    snapshot.remove();
  }
}

async function readSample(pid: number, adminUrl: string, at: SoakSample['at'], requests: number): Promise<SoakSample> {
  const text = await (await fetch(`${adminUrl}/metrics`)).text();
  const value = (name: string): number => Number(new RegExp(`^${name} (\\S+)`, 'm').exec(text)?.[1] ?? Number.NaN);
  const series = text.split('\n').filter((line) => line !== '' && !line.startsWith('#')).length;
  return { at, requests, rssMiB: rssKiB(pid) / 1024, heapUsedMiB: value('nodejs_heap_size_used_bytes') / 2 ** 20, activeHandles: value('nodejs_active_handles_total'), series };
}

function flatnessProblems(samples: readonly SoakSample[], planned: number, finished: number): string[] {
  const problems: string[] = [];
  if (finished < planned) problems.push(`only ${finished} of ${planned} requests finished within the time bound`);
  const start = samples.find((s) => s.at === 'start');
  const end = samples.find((s) => s.at === 'end');
  if (start === undefined || end === undefined) return [...problems, 'no start or end sample (too few requests)'];
  if (end.rssMiB - start.rssMiB > RSS_GROWTH_MIB) problems.push(`RSS grew ${(end.rssMiB - start.rssMiB).toFixed(1)} MiB after warm-up (bound ${RSS_GROWTH_MIB})`);
  if (end.heapUsedMiB - start.heapUsedMiB > HEAP_GROWTH_MIB) problems.push(`heap grew ${(end.heapUsedMiB - start.heapUsedMiB).toFixed(1)} MiB after warm-up (bound ${HEAP_GROWTH_MIB})`);
  if (end.activeHandles - start.activeHandles > HANDLE_GROWTH) problems.push(`active handles grew from ${start.activeHandles} to ${end.activeHandles} (bound +${HANDLE_GROWTH})`);
  // Series depend on which outcomes and buckets have been seen, all of which the warm-up covers.
  if (end.series > start.series * 1.1 + 20) problems.push(`metric series grew from ${start.series} to ${end.series}`);
  return problems;
}

export function renderSoak(result: SoakResult): string {
  const rows = result.samples.map(
    (s) => `| ${s.at} | ${s.requests} | ${s.rssMiB.toFixed(1)} | ${s.heapUsedMiB.toFixed(1)} | ${s.activeHandles} | ${s.series} |`,
  );
  const outcomes = Object.entries(result.outcomes)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([what, n]) => `${what}: ${n}`)
    .join(', ');
  return [
    `soak: ${result.requests} requests in ${result.durationS.toFixed(0)} s (${outcomes})`,
    '',
    '| sample | requests | RSS MiB | heap used MiB | active handles | series |',
    '|---|---|---|---|---|---|',
    ...rows,
    '',
    result.problems.length === 0 ? 'flat after warm-up: within every bound' : `NOT FLAT: ${result.problems.join('; ')}`,
  ].join('\n');
}
