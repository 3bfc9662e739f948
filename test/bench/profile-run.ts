import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fineItlBuckets } from './accuracy.js';
import { runStreamLoad } from './load.js';
import { groupCpuMs } from './procfs.js';
import { snapshotBuild, startSidecarProcess, startSimulatorProcess, type BenchProcess } from './processes.js';
import { summariseProfile, type ProfileSummary } from './profile-summary.js';

/**
 * `npm run bench -- --profile`: tokentap alone under `node --cpu-prof`, carrying 64 streams of 64
 * tokens 20 ms apart for a few seconds after a warm-up, then stopped so V8 writes the profile.
 */
export interface ProfileRun {
  readonly observe: boolean;
  readonly logLevel: 'info' | 'warn';
  readonly cpuMsPer1kTokens: number;
  readonly tokens: number;
  readonly summary: ProfileSummary;
}

export async function runProfile(options: { readonly pin: boolean; readonly observe: boolean; readonly logLevel: 'info' | 'warn'; readonly arrivalMs: number }): Promise<ProfileRun> {
  const dir = await mkdtemp(join(tmpdir(), 'tokentap-bench-profile-'));
  const snapshot = snapshotBuild();
  const bin = snapshot.bin;
  const owned: BenchProcess[] = [];
  try {
    const simulator = await startSimulatorProcess({ bin, cpu: options.pin ? 1 : undefined, ttftMs: 20 });
    owned.push(simulator);
    const sidecar = await startSidecarProcess({
      bin,
      name: 'tokentap',
      cpu: options.pin ? 0 : undefined,
      upstream: simulator.url,
      observe: options.observe,
      logLevel: options.logLevel,
      itlBuckets: fineItlBuckets(),
      cpuProfileDir: dir,
    });
    owned.push(sidecar);
    const load = { url: sidecar.url, ttftMs: 20, tokens: 64, stamp: false, keepBodies: false, maxRequests: 20_000, drainTimeoutMs: 15_000 };
    await runStreamLoad({ ...load, concurrency: 16, itlMs: 1, arrivalMs: 1000 });
    const measuredFromMs = performance.now() - sidecar.spawnedAtMs;
    const cpuBefore = groupCpuMs(sidecar.pids());
    const result = await runStreamLoad({ ...load, concurrency: 64, itlMs: 20, arrivalMs: options.arrivalMs });
    const cpuMs = groupCpuMs(sidecar.pids()) - cpuBefore;
    await sidecar.stop();
    owned.pop();
    const files = (await readdir(dir)).filter((name) => name.endsWith('.cpuprofile'));
    if (files.length !== 1) throw new Error(`expected one .cpuprofile in ${dir}, found ${files.length}`);
    return {
      observe: options.observe,
      logLevel: options.logLevel,
      cpuMsPer1kTokens: (cpuMs * 1000) / result.tokens,
      tokens: result.tokens,
      // The profile starts with the process: skipping to the measured load leaves out start-up and
      // warm-up (node's own start before the profiler runs makes the cut a few ms late, never early).
      summary: summariseProfile(join(dir, files[0] as string), measuredFromMs),
    };
  } finally {
    await Promise.all(owned.map((p) => p.stop().catch(() => undefined)));
    await rm(dir, { recursive: true, force: true });
    snapshot.remove();
  }
}
