import { spawn } from 'node:child_process';
import { createServer } from 'node:net';

/**
 * A command line run as a user types it into a terminal: `bash -c LINE` from `cwd`, in a process
 * group of its own (as a shell's job is), so interrupt() reaches every process of it at once, as
 * Ctrl-C does (the terminal sends SIGINT to the whole foreground group: npm, its sh, node).
 */
export interface TerminalCommand {
  /** Everything written to stdout so far. */
  stdout(): string;
  /** Everything written to stderr so far. */
  stderr(): string;
  /** Ctrl-C: SIGINT to the command's process group. */
  interrupt(): void;
  /** Resolves when every process of the group has closed its output (so has exited), with bash's (or npm's) status. */
  readonly closed: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** SIGKILL to the whole group, for cleanup after a failed assertion; safe once it has exited. */
  kill(): void;
}

export function startTerminalCommand(line: string, cwd: string, env: Record<string, string> = {}): TerminalCommand {
  const child = spawn('bash', ['-c', line], { cwd, env: { ...process.env, ...env }, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString('utf8')));
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
  let closedYet = false;
  const closed = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('close', (code, signal) => {
      closedYet = true;
      resolve({ code, signal });
    }),
  );
  const signalGroup = (signal: NodeJS.Signals): void => {
    if (closedYet || child.pid === undefined) return;
    try {
      process.kill(-child.pid, signal);
    } catch {
      // The group has exited already.
    }
  };
  return { stdout: () => stdout, stderr: () => stderr, interrupt: () => signalGroup('SIGINT'), closed, kill: () => signalGroup('SIGKILL') };
}

/** Runs a command line to its end as a terminal user would, with a time limit; its status and output. */
export async function runTerminalCommand(line: string, cwd: string, env: Record<string, string> = {}, timeoutMs = 20_000): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const command = startTerminalCommand(line, cwd, env);
  const timer = setTimeout(() => command.kill(), timeoutMs);
  const { code } = await command.closed;
  clearTimeout(timer);
  return { code, stdout: command.stdout(), stderr: command.stderr() };
}

/** Which of `ports` on 127.0.0.1 something already listens on (binding it fails with EADDRINUSE). */
export async function takenLoopbackPorts(ports: readonly number[]): Promise<number[]> {
  const taken: number[] = [];
  for (const port of ports) {
    const server = createServer();
    const bound = await new Promise<boolean>((resolve) => {
      server.once('error', () => resolve(false));
      server.listen(port, '127.0.0.1', () => resolve(true));
    });
    if (bound) await new Promise((resolve) => server.close(resolve));
    else taken.push(port);
  }
  return taken;
}
