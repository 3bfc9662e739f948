import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';

/**
 * What the bench reads about a process from /proc: CPU time (utime + stime, all threads) and
 * resident memory. Linux only; the bench refuses to run elsewhere.
 */

/** USER_HZ: the unit of utime/stime in /proc/PID/stat. 100 on every Linux the bench targets; read once from getconf when available. */
export const CLOCK_TICKS_PER_S = readClockTicks();

function readClockTicks(): number {
  try {
    const ticks = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim());
    return Number.isInteger(ticks) && ticks > 0 ? ticks : 100;
  } catch {
    return 100;
  }
}

/** utime + stime of `pid` in milliseconds. */
export function cpuMs(pid: number): number {
  const [user, system] = cpuUserSystemMs(pid);
  return user + system;
}

/** utime and stime of `pid` in milliseconds: user code against the kernel (syscalls, and on loopback the peer's TCP receive path too). */
export function cpuUserSystemMs(pid: number): [user: number, system: number] {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // The command name (field 2) may contain spaces and parentheses: fields are counted after the last ')'.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // utime and stime are fields 14 and 15 of the whole line, 12 and 13 after the name.
  return [(Number(fields[11]) * 1000) / CLOCK_TICKS_PER_S, (Number(fields[12]) * 1000) / CLOCK_TICKS_PER_S];
}

/** Resident set size of `pid` in KiB (VmRSS). */
export function rssKiB(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const match = /^VmRSS:\s+(\d+) kB$/m.exec(status);
  if (match === null) throw new Error(`/proc/${pid}/status has no VmRSS line (process gone?)`);
  return Number(match[1]);
}

/** The direct children of `pid` (nginx's workers under its master). */
export function childPids(pid: number): number[] {
  const path = `/proc/${pid}/task/${pid}/children`;
  if (!existsSync(path)) return [];
  return readFileSync(path, 'utf8')
    .trim()
    .split(/\s+/)
    .filter((s) => s !== '')
    .map(Number);
}

/** The sum of cpuMs / rssKiB over a group of processes (nginx master + worker). */
export function groupCpuMs(pids: readonly number[]): number {
  return pids.reduce((sum, pid) => sum + cpuMs(pid), 0);
}

export function groupUserMs(pids: readonly number[]): number {
  return pids.reduce((sum, pid) => sum + cpuUserSystemMs(pid)[0], 0);
}

export function groupRssKiB(pids: readonly number[]): number {
  return pids.reduce((sum, pid) => sum + rssKiB(pid), 0);
}

export function hasTaskset(): boolean {
  try {
    execFileSync('taskset', ['-p', String(process.pid)], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** Pins a running process (and the threads it starts later) to one CPU. */
export function pin(pid: number, cpu: number): void {
  execFileSync('taskset', ['-a', '-p', '-c', String(cpu), String(pid)], { stdio: 'ignore' });
}

/** Busy and total time of one CPU so far, in clock ticks, from /proc/stat. */
export function cpuTicks(cpu: number): { busy: number; total: number } {
  const line = readFileSync('/proc/stat', 'utf8')
    .split('\n')
    .find((l) => l.startsWith(`cpu${cpu} `));
  if (line === undefined) throw new Error(`/proc/stat has no cpu${cpu} line`);
  const fields = line.trim().split(/\s+/).slice(1).map(Number);
  // user nice system idle iowait irq softirq steal ...: idle and iowait are the not-busy ones.
  const total = fields.slice(0, 8).reduce((a, b) => a + b, 0);
  const idle = (fields[3] ?? 0) + (fields[4] ?? 0);
  return { busy: total - idle, total };
}
