import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * A server binary started by a test (Prometheus, Alertmanager): on a free loopback port, with its own
 * temporary directory, its output captured for error messages, and a stop() that always cleans up.
 */
export interface ManagedProcess {
  /** `127.0.0.1:PORT` */
  readonly address: string;
  /** `http://127.0.0.1:PORT` */
  readonly url: string;
  /** The temporary directory the process owns; removed by stop(). */
  readonly dir: string;
  /** Everything the process wrote to stdout and stderr so far. */
  output(): string;
  /** SIGTERM, then SIGKILL after 5 s; removes the temporary directory. Safe to call twice. */
  stop(): Promise<void>;
}

export interface StartProcessOptions {
  /** Shown in error messages, e.g. "prometheus". */
  name: string;
  binary: string;
  /** Writes the process's files into `dir` and returns its arguments for the chosen `address`. */
  prepare(dir: string, address: string): Promise<string[]>;
  /** A URL path answering 200 once the process is ready, e.g. "/-/ready". */
  readyPath: string;
  readyTimeoutMs?: number;
}

/** A loopback port nobody listens on right now (the OS picks it; another process may still take it, hence the retries in startManagedProcess). */
export async function freeLoopbackPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const address = server.address();
  await new Promise((resolve) => server.close(resolve));
  if (typeof address !== 'object' || address === null) throw new Error('no port assigned');
  return address.port;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once('exit', () => resolve()));
}

async function terminate(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGTERM');
  const killTimer = setTimeout(() => child.kill('SIGKILL'), 5000);
  await exited(child);
  clearTimeout(killTimer);
}

/**
 * Starts the binary on a free loopback port and waits until `readyPath` answers 200. A port taken
 * between choosing and binding it (other tests run beside us) is retried with a new port, up to 3 times.
 */
export async function startManagedProcess(options: StartProcessOptions): Promise<ManagedProcess> {
  const readyTimeoutMs = options.readyTimeoutMs ?? 20_000;
  let lastFailure = '';
  for (let attempt = 0; attempt < 3; attempt++) {
    const dir = await mkdtemp(join(tmpdir(), `tokentap-${options.name}-`));
    const address = `127.0.0.1:${await freeLoopbackPort()}`;
    const url = `http://${address}`;
    const args = await options.prepare(dir, address);
    let output = '';
    const child = spawn(options.binary, args, { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    let spawnError: Error | undefined;
    child.once('error', (error) => (spawnError = error));
    let stopped = false;
    const stop = async () => {
      if (stopped) return;
      stopped = true;
      await terminate(child);
      await rm(dir, { recursive: true, force: true });
    };

    const deadline = performance.now() + readyTimeoutMs;
    let ready = false;
    while (!ready && performance.now() < deadline && child.exitCode === null && !spawnError) {
      try {
        const response = await fetch(`${url}${options.readyPath}`, { signal: AbortSignal.timeout(1000) });
        await response.arrayBuffer();
        ready = response.status === 200;
      } catch {
        // not listening yet
      }
      if (!ready) await sleep(50);
    }
    if (ready) return { address, url, dir, output: () => output, stop };

    await stop();
    lastFailure = spawnError
      ? `${options.name} could not be started (${options.binary}): ${spawnError.message}`
      : `${options.name} was not ready within ${readyTimeoutMs} ms (exit code ${child.exitCode}); its output:\n${output}`;
    if (spawnError || !/address already in use/.test(output)) break;
  }
  throw new Error(lastFailure);
}
