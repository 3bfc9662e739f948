import { spawn } from 'node:child_process';
import { eventually } from './sidecar.js';

/**
 * `node bin/tokentap.js serve` (the built dist/, as users run it) on ephemeral loopback ports, with
 * its JSON log lines collected. kill() is safe to call when it has already exited.
 */
export async function startServeProcess(upstream: string, args: readonly string[] = [], env: Record<string, string> = {}) {
  const child = spawn(process.execPath, ['bin/tokentap.js', 'serve', '--upstream', upstream, '--listen', '127.0.0.1:0', '--admin-listen', '127.0.0.1:0', ...args], {
    // Model discovery's own GET /v1/models would reach test upstreams that record every request;
    // a test that wants it passes TOKENTAP_MODEL_DISCOVERY: 'on'.
    env: { ...process.env, TOKENTAP_MODEL_DISCOVERY: 'off', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString('utf8')));
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null; atMs: number }>((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal, atMs: performance.now() })),
  );
  const logs = (): Array<Record<string, unknown>> =>
    stdout
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as Record<string, unknown>);
  const kill = (): void => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  };
  try {
    const serving = await eventually(
      `"tokentap serving" (stderr: ${stderr})`,
      () => logs().find((l) => l.msg === 'tokentap serving'),
      (l) => l !== undefined || child.exitCode !== null,
      20_000,
    );
    if (serving === undefined) throw new Error(`tokentap serve exited with ${child.exitCode}: ${stderr}`);
    return { child, proxy: serving.proxy as string, admin: serving.admin as string, logs, stderr: () => stderr, exit, kill };
  } catch (error) {
    kill();
    throw error;
  }
}
