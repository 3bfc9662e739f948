import { readFileSync } from 'node:fs';

/** Reads a V8 .cpuprofile (from `node --cpu-prof`) and totals self time per function and per origin. */

interface ProfileNode {
  readonly id: number;
  readonly children?: readonly number[];
  readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number };
}

interface CpuProfile {
  readonly nodes: readonly ProfileNode[];
  readonly samples: readonly number[];
  readonly timeDeltas: readonly number[];
  readonly startTime: number;
  readonly endTime: number;
}

export interface SelfTime {
  readonly name: string;
  readonly ms: number;
  readonly share: number;
}

export interface ProfileSummary {
  readonly totalMs: number;
  /** Time not idle: what the share of each entry is relative to. */
  readonly busyMs: number;
  readonly functions: SelfTime[];
  readonly origins: SelfTime[];
  /** Time spent in a function and everything it called (each function counted once per sample). */
  readonly inclusive: SelfTime[];
}

/** Where a frame's code lives: tokentap's own files, a package, Node's internals, or V8's pseudo-frames. */
function origin(frame: ProfileNode['callFrame']): string {
  const { url, functionName } = frame;
  if (url === '') return functionName.startsWith('(') ? functionName : '(native)';
  if (url.startsWith('node:')) return url.includes('/') ? url.slice(0, url.lastIndexOf('/')) : url;
  // tokentap's own compiled files (the bench runs a snapshot of dist/ under node_modules/.cache).
  const own = /\/dist\/(.+)$/.exec(url);
  if (own !== null && !/node_modules\/(?!\.cache)/.test(url.slice(0, own.index))) return `tokentap:${own[1]}`;
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  return pkg !== null ? (pkg[1] as string) : url;
}

function shortUrl(url: string): string {
  if (url.startsWith('node:')) return url;
  const own = /\/(dist\/.+)$/.exec(url);
  if (own !== null && !/node_modules\/(?!\.cache)/.test(url.slice(0, own.index))) return own[1] as string;
  const pkg = /node_modules\/(.+)$/.exec(url);
  return pkg !== null ? (pkg[1] as string) : url;
}

function frameName(frame: ProfileNode['callFrame']): string {
  return `${frame.functionName || '(anonymous)'} ${frame.url === '' ? '' : `${shortUrl(frame.url)}:${frame.lineNumber + 1}`}`.trim();
}

/**
 * Totals the samples of the profile at `path` taken after the first `skipMs` (start-up: module
 * loading and compilation are not the proxy path).
 */
export function summariseProfile(path: string, skipMs = 0, top = 25): ProfileSummary {
  const profile = JSON.parse(readFileSync(path, 'utf8')) as CpuProfile;
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
  const perFunction = new Map<string, number>();
  const perOrigin = new Map<string, number>();
  const inclusive = new Map<string, number>();
  let totalUs = 0;
  let idleUs = 0;
  let elapsedUs = 0;
  profile.samples.forEach((id, i) => {
    // timeDeltas[i] is the time since the previous sample: the time sample i stands for.
    const us = profile.timeDeltas[i] ?? 0;
    elapsedUs += us;
    if (elapsedUs < skipMs * 1000) return;
    const frame = byId.get(id)?.callFrame;
    if (frame === undefined) return;
    totalUs += us;
    if (frame.functionName === '(idle)') {
      idleUs += us;
      return;
    }
    const name = frameName(frame);
    perFunction.set(name, (perFunction.get(name) ?? 0) + us);
    const where = origin(frame);
    perOrigin.set(where, (perOrigin.get(where) ?? 0) + us);
    const seen = new Set<string>();
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const caller = byId.get(at)?.callFrame;
      if (caller === undefined || caller.url === '') continue;
      const callerName = frameName(caller);
      if (seen.has(callerName)) continue;
      seen.add(callerName);
      inclusive.set(callerName, (inclusive.get(callerName) ?? 0) + us);
    }
  });
  const busyUs = totalUs - idleUs;
  const rank = (map: Map<string, number>): SelfTime[] =>
    [...map.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([name, us]) => ({ name, ms: us / 1000, share: us / busyUs }));
  return { totalMs: totalUs / 1000, busyMs: busyUs / 1000, functions: rank(perFunction), origins: rank(perOrigin), inclusive: rank(inclusive) };
}

export function renderProfile(summary: ProfileSummary): string {
  const rows = (entries: readonly SelfTime[]): string[] => entries.map((e) => `  ${(e.share * 100).toFixed(1).padStart(5)} %  ${e.ms.toFixed(0).padStart(6)} ms  ${e.name}`);
  return [
    `profile: ${summary.totalMs.toFixed(0)} ms sampled, ${summary.busyMs.toFixed(0)} ms busy (shares are of busy time)`,
    'self time by origin:',
    ...rows(summary.origins.slice(0, 15)),
    'self time by function:',
    ...rows(summary.functions),
    'inclusive time (function and its callees), JavaScript frames:',
    ...rows(summary.inclusive),
  ].join('\n');
}
