import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cpuMs, rssKiB } from '../../bench/procfs.js';
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
  // Port 0, and the serving line names the ports bound: a port probed free first and then passed
  // on could be taken in between by any process binding one (a CI run beside other work once got
  // ECONNREFUSED on its proxy port).
  const args = ['bin/tokentap.js', 'serve', '--upstream', upstream, '--listen', '127.0.0.1:0', '--admin-listen', '127.0.0.1:0', '--config', configFile];
  const readStdout = options.readStdout !== false;
  const child =
    options.fdLimit === undefined
      ? spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] })
      : spawn('bash', ['-c', `ulimit -n ${options.fdLimit} && exec "$0" "$@"`, process.execPath, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  if (readStdout) child.stdout!.on('data', (c: Buffer) => (stdout += c.toString('utf8')));
  child.stderr!.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
  const serving = servingLine(child, readStdout);
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null; atMs: number }>((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal, atMs: performance.now() })),
  );
  const stop = (): void => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  };
  let admin = '';
  let proxy = '';
  try {
    const bound = await Promise.race([serving, new Promise<undefined>((resolve) => setTimeout(resolve, 20_000))]);
    if (bound === undefined) throw new Error(`tokentap serve logged no serving line within 20 s (exit code ${child.exitCode}): ${stderr}`);
    ({ proxy, admin } = bound);
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
  return { child, pid: child.pid as number, proxy, admin, logs, stderr: () => stderr, exit, stop };
}

/**
 * The proxy and admin URLs of the `tokentap serving` line, read from the child's stdout as it
 * comes (the logger writes it within 250 ms). With `keepReading` false, stdout is paused once the
 * line is read: from then on it is a pipe nobody reads.
 */
function servingLine(child: ChildProcess, keepReading: boolean): Promise<{ proxy: string; admin: string }> {
  const stdout = child.stdout!;
  let pending = '';
  return new Promise((resolve) => {
    const onData = (chunk: Buffer): void => {
      pending += chunk.toString('utf8');
      for (let end = pending.indexOf('\n'); end !== -1; end = pending.indexOf('\n')) {
        const line = pending.slice(0, end);
        pending = pending.slice(end + 1);
        if (!line.includes('"msg":"tokentap serving"')) continue;
        const { proxy, admin } = JSON.parse(line) as { proxy: string; admin: string };
        stdout.off('data', onData);
        if (!keepReading) stdout.pause();
        resolve({ proxy, admin });
        return;
      }
    };
    stdout.on('data', onData);
  });
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

/** `data` as chunked framing, one byte per chunk (6 bytes on the wire per byte), with the last chunk unless `end` is false. */
export function oneByteChunks(data: Buffer, end = true): Buffer {
  const wire = Buffer.allocUnsafe(data.length * 6 + (end ? 5 : 0));
  let at = 0;
  for (const byte of data) {
    wire[at] = 0x31; // "1"
    wire[at + 1] = 13;
    wire[at + 2] = 10;
    wire[at + 3] = byte;
    wire[at + 4] = 13;
    wire[at + 5] = 10;
    at += 6;
  }
  if (end) wire.write('0\r\n\r\n', at, 'latin1');
  return wire;
}
