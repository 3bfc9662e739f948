import { spawn, type ChildProcess } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import http2 from 'node:http2';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { NODE_FLAGS } from '../../src/cli/node-flags.js';
import { freeLoopbackPort } from '../helpers/managed-process.js';
import { childPids } from './procfs.js';

/**
 * The processes of a bench run: the simulator (upstream) and the systems under test, each started
 * as its own OS process, optionally pinned to one CPU with taskset, and always stopped (SIGTERM,
 * then SIGKILL) by stop().
 */

export const NGINX_BINARY = '/usr/sbin/nginx';

/** The repository root: the nearest directory above this file whose package.json is tokentap's. */
export function repoRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 10; i++) {
    const pkg = join(dir, 'package.json');
    if (existsSync(pkg) && (JSON.parse(readFileSync(pkg, 'utf8')) as { name?: string }).name === 'tokentap') return dir;
    dir = dirname(dir);
  }
  throw new Error('bench: cannot find the tokentap repository root above test/bench');
}

/**
 * A private copy of bin/ and dist/ for one bench run, so a rebuild of dist/ while the bench runs
 * (other work in the same tree) cannot break or change the processes it restarts. It lives under
 * node_modules/.cache so the copied code still resolves the repository's packages.
 */
export interface Snapshot {
  /** The launcher to run: `node <bin> serve|simulate ...`. */
  readonly bin: string;
  remove(): void;
}

export function snapshotBuild(): Snapshot {
  const root = repoRoot();
  if (!existsSync(join(root, 'dist', 'cli', 'main.js'))) throw new Error('dist/ is missing: run `npm run build` first');
  const parent = join(root, 'node_modules', '.cache', 'tokentap-bench');
  mkdirSync(parent, { recursive: true });
  const dir = mkdtempSync(join(parent, 'snapshot-'));
  cpSync(join(root, 'dist'), join(dir, 'dist'), { recursive: true });
  cpSync(join(root, 'bin'), join(dir, 'bin'), { recursive: true });
  // The copied ESM files need the package's "type": "module" above them.
  cpSync(join(root, 'package.json'), join(dir, 'package.json'));
  return { bin: join(dir, 'bin', 'tokentap.js'), remove: () => rmSync(dir, { recursive: true, force: true }) };
}

export interface BenchProcess {
  readonly name: string;
  /** Where clients send requests (the proxy listener, or the simulator itself). */
  readonly url: string;
  /** The processes whose CPU and memory count for this system (nginx: master and worker). */
  pids(): number[];
  /** Everything written to stdout/stderr that was not a parsed log line (for error messages). */
  output(): string;
  stop(): Promise<void>;
}

export interface SidecarProcess extends BenchProcess {
  readonly adminUrl: string;
  /** performance.now() of this process when the sidecar was spawned (where a --cpu-prof profile starts). */
  readonly spawnedAtMs: number;
  /** The per-request log lines (msg "request") in arrival order. */
  readonly requestLines: SidecarRequestLine[];
}

/** The fields of tokentap's per-request log line the bench reads. */
export interface SidecarRequestLine {
  readonly time: number;
  readonly model: string;
  readonly status: number;
  readonly outcome: string;
  readonly ttft_ms: number | null;
  readonly tpot_ms: number | null;
  readonly e2e_ms: number;
  readonly output_tokens: number;
  readonly content_events: number;
}

function pinned(cpu: number | undefined, command: string, args: string[]): [string, string[]] {
  return cpu === undefined ? [command, args] : ['taskset', ['-c', String(cpu), command, ...args]];
}

function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once('exit', () => resolve()));
}

async function terminate(child: ChildProcess, graceMs = 10_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGTERM');
  const killTimer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited(child);
  clearTimeout(killTimer);
}

/** Waits until `test` matches a line of the child's stdout; rejects on exit or after `timeoutMs`. */
function waitForLine<T>(child: ChildProcess, name: string, output: () => string, test: (line: string) => T | undefined, timeoutMs: number): Promise<T> {
  return new Promise((resolve, reject) => {
    const lines = createInterface({ input: child.stdout! });
    const timer = setTimeout(() => fail(`${name} did not start within ${timeoutMs} ms; its output:\n${output()}`), timeoutMs);
    const onExit = (): void => fail(`${name} exited with code ${child.exitCode} before it was ready; its output:\n${output()}`);
    function fail(message: string): void {
      clearTimeout(timer);
      lines.close();
      child.off('exit', onExit);
      reject(new Error(message));
    }
    child.once('exit', onExit);
    lines.on('line', (line) => {
      const found = test(line);
      if (found === undefined) return;
      clearTimeout(timer);
      child.off('exit', onExit);
      lines.close();
      resolve(found);
    });
  });
}

export interface SimulatorProcessOptions {
  readonly bin: string;
  readonly cpu: number | undefined;
  readonly ttftMs: number;
}

export interface SimulatorProcess extends BenchProcess {
  /** Its HTTP/2 cleartext listener (`--h2c-port`): gRPC services and every HTTP API. */
  readonly h2cUrl: string;
}

export async function startSimulatorProcess(options: SimulatorProcessOptions): Promise<SimulatorProcess> {
  const root = repoRoot();
  const [command, args] = pinned(options.cpu, process.execPath, [
    options.bin,
    'simulate',
    '--host',
    '127.0.0.1',
    '--port',
    '0',
    '--ttft-ms',
    String(options.ttftMs),
    '--h2c-port',
    '0',
  ]);
  const child = spawn(command, args, { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  // Two lines: the HTTP/1.1 listener, then the h2c one.
  let url: string | undefined;
  const urls = await waitForLine(child, 'simulator', () => output, (line) => {
    output += `${line}\n`;
    const found = /listening on (http:\/\/\S+)/.exec(line)?.[1];
    if (found === undefined) return undefined;
    if (!line.includes(' h2c ')) url = found;
    else if (url !== undefined) return { url, h2cUrl: found };
    return undefined;
  }, 20_000).catch(async (error: unknown) => {
    await terminate(child);
    throw error;
  });
  child.stdout!.resume();
  return { name: 'simulator', ...urls, pids: () => [child.pid!], output: () => output, stop: () => terminate(child) };
}

/** The Node TCP relay (tcp-relay.ts), compiled beside this file. */
export async function startTcpRelayProcess(options: { readonly cpu: number | undefined; readonly upstream: string }): Promise<BenchProcess> {
  const script = join(dirname(fileURLToPath(import.meta.url)), 'tcp-relay.js');
  if (!existsSync(script)) throw new Error(`${script} is missing: the bench runs from its compiled output (npm run bench)`);
  const [command, args] = pinned(options.cpu, process.execPath, [script, new URL(options.upstream).port]);
  const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  const url = await waitForLine(child, 'node-tcp-relay', () => output, (line) => /listening on (http:\/\/\S+)/.exec(line)?.[1], 10_000).catch(async (error: unknown) => {
    await terminate(child);
    throw error;
  });
  child.stdout!.resume();
  return { name: 'node-tcp-relay', url, pids: () => [child.pid!], output: () => output, stop: () => terminate(child) };
}

export interface SidecarProcessOptions {
  readonly bin: string;
  readonly name: string;
  readonly cpu: number | undefined;
  readonly upstream: string;
  readonly observe: boolean;
  /** ITL bucket boundaries in seconds: fine ones let the bench read the sidecar's ITL quantiles precisely. */
  readonly itlBuckets: readonly number[];
  /** `info` (the default) logs a line per request, which the accuracy check reads. */
  readonly logLevel?: 'info' | 'warn';
  /** Directory for `node --cpu-prof`; unset, no profile. */
  readonly cpuProfileDir?: string | undefined;
  /** False: request lines are read and dropped, not kept (the soak's 100,000 would fill the bench's memory). */
  readonly keepRequestLines?: boolean;
  /** `upstream_protocol`; unset, the default (http1). */
  readonly upstreamProtocol?: 'h2c';
  /** `node --perf-basic-prof`: JavaScript frames named for `perf` (perf-attribution.ts). */
  readonly perfMap?: boolean;
}

export async function startSidecarProcess(options: SidecarProcessOptions): Promise<SidecarProcess> {
  const root = repoRoot();
  const dir = await mkdtemp(join(tmpdir(), 'tokentap-bench-sidecar-'));
  const config = join(dir, 'tokentap.yaml');
  const protocol = options.upstreamProtocol === undefined ? '' : `upstream_protocol: ${options.upstreamProtocol}\n`;
  await writeFile(config, `${protocol}log_level: ${options.logLevel ?? 'info'}\nmetrics:\n  buckets:\n    itl: [${options.itlBuckets.join(', ')}]\n`);
  // At log_level info the sidecar announces the ports it got for port 0; quieter, it says nothing,
  // so the bench picks free ports itself and polls /metrics (another process may take a port first:
  // then start-up fails with the sidecar's own error).
  const quiet = (options.logLevel ?? 'info') !== 'info';
  const listen = quiet ? `127.0.0.1:${await freeLoopbackPort()}` : '127.0.0.1:0';
  const adminListen = quiet ? `127.0.0.1:${await freeLoopbackPort()}` : '127.0.0.1:0';
  // With the V8 flags the container image runs it with (src/cli/node-flags.ts).
  const nodeArgs = [...NODE_FLAGS, ...(options.cpuProfileDir === undefined ? [] : ['--cpu-prof', '--cpu-prof-dir', options.cpuProfileDir]), ...(options.perfMap === true ? ['--perf-basic-prof'] : [])];
  const [command, args] = pinned(options.cpu, process.execPath, [
    ...nodeArgs,
    options.bin,
    'serve',
    '--upstream',
    options.upstream,
    '--listen',
    listen,
    '--admin-listen',
    adminListen,
    '--config',
    config,
  ]);
  // Model discovery off: the bench pairs log lines with its requests by their (made-up) model
  // names, which discovery would label "other" (the simulator lists one model).
  const env = { ...process.env, TOKENTAP_OBSERVE: options.observe ? 'on' : 'off', TOKENTAP_MODEL_DISCOVERY: 'off' };
  const spawnedAtMs = performance.now();
  const child = spawn(command, args, { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  const requestLines: SidecarRequestLine[] = [];
  const stop = async (): Promise<void> => {
    await terminate(child);
    await rm(dir, { recursive: true, force: true });
  };
  let urls: { proxy: string; admin: string };
  try {
    if (quiet) {
      urls = { proxy: `http://${listen}`, admin: `http://${adminListen}` };
      const deadline = performance.now() + 20_000;
      while (!(await answers(`${urls.admin}/metrics`))) {
        if (child.exitCode !== null || performance.now() > deadline) throw new Error(`${options.name} did not start; its output:\n${output}`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    } else {
      urls = await waitForLine(child, options.name, () => output, (line) => {
        output += `${line}\n`;
        const parsed = parseJsonLine(line);
        return parsed?.['msg'] === 'tokentap serving' ? { proxy: String(parsed['proxy']), admin: String(parsed['admin']) } : undefined;
      }, 20_000);
    }
  } catch (error) {
    await stop();
    throw error;
  }
  // Every later line: request lines are kept for the accuracy check, anything else for error messages.
  createInterface({ input: child.stdout! }).on('line', (line) => {
    const parsed = parseJsonLine(line);
    if (parsed?.['msg'] === 'request') {
      if (options.keepRequestLines !== false) requestLines.push(parsed as unknown as SidecarRequestLine);
    }
    else if (output.length < 100_000) output += `${line}\n`;
  });
  return {
    name: options.name,
    url: urls.proxy,
    adminUrl: urls.admin,
    spawnedAtMs,
    requestLines,
    pids: () => [child.pid!],
    output: () => output,
    stop,
  };
}

function parseJsonLine(line: string): Record<string, unknown> | undefined {
  if (!line.startsWith('{')) return undefined;
  try {
    return JSON.parse(line) as Record<string, unknown>;
  } catch {
    return undefined;
  }
}

export interface NginxProcessOptions {
  readonly cpu: number | undefined;
  readonly upstream: string;
  /**
   * The simulator's h2c listener: set, nginx listens for HTTP/2 cleartext (prior knowledge) instead
   * of HTTP/1.1 (nginxH2Config).
   */
  readonly h2cUpstream?: string;
}

/**
 * nginx as the reference proxy hop: one worker, response buffering off (each upstream chunk is
 * written on as it arrives), HTTP/1.1 keep-alive to the upstream with a pool as large as the
 * biggest cell, no access log. Configuration generated into a temporary prefix directory.
 */
export function nginxConfig(dir: string, listenPort: number, upstream: URL): string {
  return `worker_processes 1;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
worker_rlimit_nofile 16384;
events { worker_connections 8192; }
http {
  access_log off;
  keepalive_requests 1000000;
  client_body_temp_path ${dir}/client_body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
  upstream simulator {
    server ${upstream.hostname}:${upstream.port};
    keepalive 2048;
    keepalive_requests 1000000;
  }
  server {
    listen 127.0.0.1:${listenPort};
    location / {
      proxy_pass http://simulator;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
      proxy_read_timeout 300s;
    }
  }
}
`;
}

/**
 * nginx as the reference HTTP/2 hop, tuned as nginxConfig: an HTTP/2 cleartext listener (nginx
 * 1.22's `listen ... http2`, prior knowledge only), the vLLM gRPC service to the simulator's h2c port
 * with `grpc_pass` (gRPC is the one upstream nginx speaks HTTP/2 to, over a kept-alive connection),
 * everything else (SSE) with `proxy_pass` to the simulator's HTTP/1.1 port: nginx's proxy module has
 * no HTTP/2 upstreams, so its SSE-over-h2c path is h2 to the client and HTTP/1.1 to the upstream.
 */
export function nginxH2Config(dir: string, listenPort: number, upstream: URL, h2cUpstream: URL): string {
  return nginxConfig(dir, listenPort, upstream)
    .replace(`listen 127.0.0.1:${listenPort};`, `listen 127.0.0.1:${listenPort} http2;
    http2_max_concurrent_streams 128;
    location /vllm.grpc.engine.VllmEngine/ {
      grpc_pass grpc://simulator_h2c;
      grpc_read_timeout 300s;
    }`)
    .replace(`  server {`, `  upstream simulator_h2c {
    server ${h2cUpstream.hostname}:${h2cUpstream.port};
    keepalive 64;
    keepalive_requests 1000000;
  }
  server {`);
}

export async function startNginxProcess(options: NginxProcessOptions): Promise<BenchProcess> {
  const dir = await mkdtemp(join(tmpdir(), 'tokentap-bench-nginx-'));
  let lastError = '';
  for (let attempt = 0; attempt < 3; attempt++) {
    const port = await freeLoopbackPort();
    const h2 = options.h2cUpstream !== undefined;
    const config = h2 ? nginxH2Config(dir, port, new URL(options.upstream), new URL(options.h2cUpstream as string)) : nginxConfig(dir, port, new URL(options.upstream));
    await writeFile(join(dir, 'nginx.conf'), config);
    const [command, args] = pinned(options.cpu, NGINX_BINARY, ['-p', dir, '-e', join(dir, 'error.log'), '-c', join(dir, 'nginx.conf'), '-g', 'daemon off;']);
    const child = spawn(command, args, { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    const stop = async (): Promise<void> => {
      await terminate(child);
      await rm(dir, { recursive: true, force: true });
    };
    const url = `http://127.0.0.1:${port}`;
    const deadline = performance.now() + 10_000;
    while (performance.now() < deadline && child.exitCode === null) {
      if (childPids(child.pid!).length > 0 && (await (h2 ? answersH2 : answers)(`${url}/health`))) {
        return { name: h2 ? 'nginx-h2' : 'nginx', url, pids: () => [child.pid!, ...childPids(child.pid!)], output: () => output, stop };
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const log = existsSync(join(dir, 'error.log')) ? readFileSync(join(dir, 'error.log'), 'utf8') : '';
    lastError = `nginx did not start (exit code ${child.exitCode}): ${output}${log}`;
    await terminate(child);
    if (!/Address already in use/.test(lastError)) break;
  }
  await rm(dir, { recursive: true, force: true });
  throw new Error(lastError);
}

async function answers(url: string): Promise<boolean> {
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(1000) });
    await response.arrayBuffer();
    return response.status === 200;
  } catch {
    return false;
  }
}

/** answers() over HTTP/2 with prior knowledge (an nginx `http2` cleartext listener speaks nothing else). */
function answersH2(url: string): Promise<boolean> {
  return new Promise((resolve) => {
    const session = http2.connect(url);
    const finish = (ok: boolean): void => {
      clearTimeout(timer);
      session.destroy();
      resolve(ok);
    };
    const timer = setTimeout(() => finish(false), 1000);
    session.on('error', () => finish(false));
    const request = session.request({ ':path': new URL(url).pathname });
    request.on('response', (headers) => {
      request.resume();
      request.on('end', () => finish(headers[':status'] === 200));
    });
    request.on('error', () => finish(false));
    request.end();
  });
}
