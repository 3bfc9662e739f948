import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cpuMs, rssKiB } from '../../bench/procfs.js';
import { freeLoopbackPort } from '../../helpers/managed-process.js';
import { eventually } from '../../helpers/sidecar.js';

/**
 * The exhaustion cases' sidecar: `node bin/tokentap.js serve` as a child process (so its RSS and CPU
 * are its own, read from /proc), with a config file, optionally under a lower `ulimit -n`, and
 * optionally with a stdout that nobody reads.
 */
export interface SidecarProcess {
  readonly child: ChildProcess;
  readonly pid: number;
  readonly proxy: string;
  readonly admin: string;
  /** The JSON lines logged so far (empty when stdout is not read). */
  logs(): Array<Record<string, unknown>>;
  stderr(): string;
  readonly exit: Promise<{ code: number | null; signal: NodeJS.Signals | null; atMs: number }>;
  /** SIGKILL if still running; removes the config file. */
  stop(): void;
}

export interface SidecarProcessOptions {
  /** The YAML configuration file's text. */
  readonly config?: string;
  /** `ulimit -n` for the child. */
  readonly fdLimit?: number;
  /** False: stdout is a pipe the test never reads (the log-buffer case). */
  readonly readStdout?: boolean;
}

export async function startSidecarProcess(upstream: string, options: SidecarProcessOptions = {}): Promise<SidecarProcess> {
  const dir = mkdtempSync(join(tmpdir(), 'tokentap-limits-'));
  const configFile = join(dir, 'tokentap.yaml');
  writeFileSync(configFile, options.config ?? '');
  const [proxyPort, adminPort] = [await freeLoopbackPort(), await freeLoopbackPort()];
  const args = ['bin/tokentap.js', 'serve', '--upstream', upstream, '--listen', `127.0.0.1:${proxyPort}`, '--admin-listen', `127.0.0.1:${adminPort}`, '--config', configFile];
  const readStdout = options.readStdout !== false;
  const child =
    options.fdLimit === undefined
      ? spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] })
      : spawn('bash', ['-c', `ulimit -n ${options.fdLimit} && exec "$0" "$@"`, process.execPath, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  if (readStdout) child.stdout!.on('data', (c: Buffer) => (stdout += c.toString('utf8')));
  child.stderr!.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null; atMs: number }>((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal, atMs: performance.now() })),
  );
  const stop = (): void => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  };
  const admin = `http://127.0.0.1:${adminPort}`;
  try {
    await eventually(
      `the sidecar's /healthz (stderr: ${stderr})`,
      async () => (child.exitCode !== null ? 'exited' : await fetch(`${admin}/healthz`).then((r) => String(r.status), () => 'down')),
      (status) => status === '200' || status === 'exited',
      20_000,
    );
    if (child.exitCode !== null) throw new Error(`tokentap serve exited with ${child.exitCode}: ${stderr}`);
  } catch (error) {
    stop();
    throw error;
  }
  const logs = (): Array<Record<string, unknown>> =>
    stdout
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as Record<string, unknown>);
  return { child, pid: child.pid as number, proxy: `http://127.0.0.1:${proxyPort}`, admin, logs, stderr: () => stderr, exit, stop };
}

/** tokentap_limit_exceeded_total{limit=...} as the admin port's /metrics shows it (0 when absent). */
export async function limitCount(admin: string, limit: string): Promise<number> {
  const text = await (await fetch(`${admin}/metrics`)).text();
  const match = new RegExp(`^tokentap_limit_exceeded_total\\{limit="${limit}"\\} (\\d+)`, 'm').exec(text);
  return match === null ? 0 : Number(match[1]);
}

/** A sum over the series of a counter or gauge in the exposition whose labels include `labels` (all strings). */
export async function metricSum(admin: string, name: string, labels: Record<string, string> = {}): Promise<number> {
  const text = await (await fetch(`${admin}/metrics`)).text();
  let sum = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    if (Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) sum += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return sum;
}

export const rssMiB = (pid: number): number => rssKiB(pid) / 1024;
export { cpuMs };

/**
 * Another client's stream while an attack runs: a streamed chat request of `tokens` tokens `itlMs`
 * apart through the proxy; resolves with the largest gap between two reads after the first, which
 * is what a stall of the relay's event loop shows as.
 */
export function witnessStream(proxy: string, tokens = 40, itlMs = 20): Promise<{ maxGapMs: number; body: string }> {
  return new Promise((resolve, reject) => {
    const url = new URL('/v1/chat/completions', proxy);
    const request = http.request(
      url,
      { method: 'POST', agent: false, headers: { 'content-type': 'application/json', 'x-sim-output-tokens': String(tokens), 'x-sim-itl-ms': String(itlMs), 'x-sim-ttft-ms': '10' } },
      (response) => {
        let last = -1;
        let maxGapMs = 0;
        let body = '';
        response.on('data', (chunk: Buffer) => {
          const now = performance.now();
          if (last !== -1) maxGapMs = Math.max(maxGapMs, now - last);
          last = now;
          body += chunk.toString('utf8');
        });
        response.on('end', () => resolve({ maxGapMs, body }));
        response.on('error', reject);
      },
    );
    request.on('error', reject);
    request.end(JSON.stringify({ model: 'sim-model', stream: true, messages: [{ role: 'user', content: 'witness' }] }));
  });
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
