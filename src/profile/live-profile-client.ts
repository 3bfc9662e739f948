import http from 'node:http';
import https from 'node:https';
import type { LiveLatency } from './shape-comparison.js';
import type { WorkloadProfile } from './workload-profile.js';

/** A profile is a few kilobytes; anything far larger is not a tokentap admin listener answering. */
export const MAX_ANSWER_BYTES = 4 * 1024 * 1024;
export const ANSWER_TIMEOUT_MS = 10_000;

export interface LiveWorkload {
  readonly profile: WorkloadProfile;
  readonly latency: LiveLatency;
  /** Seconds the latencies cover (status.json's SLO window). */
  readonly latencyWindowS: number;
}

/**
 * What a running sidecar's admin listener says about one workload: its profile
 * (`GET /profile/<workload>?format=json&window=...`) and its live TTFT/ITL p50 and p99
 * (`GET /status.json`, over the status page's SLO window). Relative paths, so an admin URL with a
 * path prefix (a port-forward through a proxy) works. Each answer must be whole within
 * `answerTimeoutMs`.
 */
export async function fetchLiveWorkload(admin: URL, workload: string, window: string, answerTimeoutMs = ANSWER_TIMEOUT_MS): Promise<LiveWorkload> {
  const base = new URL(admin.href.endsWith('/') ? admin.href : `${admin.href}/`);
  const profileUrl = new URL(`profile/${encodeURIComponent(workload)}`, base);
  profileUrl.searchParams.set('format', 'json');
  profileUrl.searchParams.set('window', window);
  const profile = asProfile(await getJson(profileUrl, answerTimeoutMs), profileUrl, workload);
  const statusUrl = new URL('status.json', base);
  const status = await getJson(statusUrl, answerTimeoutMs);
  const workloads = isObject(status) && Array.isArray(status['workloads']) ? status['workloads'].filter(isObject) : undefined;
  if (workloads === undefined) throw new Error(`${statusUrl.href}: not tokentap's status.json (no "workloads" list)`);
  const entry = workloads.find((w) => w['name'] === workload);
  if (entry === undefined) throw new Error(`${statusUrl.href}: no workload "${workload}"; the sidecar has ${namesOf(workloads)}`);
  const latency = isObject(entry['latency']) ? entry['latency'] : {};
  const windows = isObject(status) && isObject(status['windows']) ? status['windows'] : {};
  return {
    profile,
    latency: { ttft: pairOf(latency['ttft']), itl: pairOf(latency['itl']) },
    latencyWindowS: typeof windows['slo_s'] === 'number' ? windows['slo_s'] : 0,
  };
}

/** A sidecar has a handful of workloads (configuration names them); a longer answer is not shown whole. */
const NAMES_SHOWN = 20;
const NAME_CHARACTERS_SHOWN = 64;

/** The workloads' names for an error line: at most NAMES_SHOWN, each cut to NAME_CHARACTERS_SHOWN. */
function namesOf(workloads: readonly Record<string, unknown>[]): string {
  const shown = workloads.slice(0, NAMES_SHOWN).map((w) => {
    const name = JSON.stringify(w['name']) ?? 'no name';
    return name.length > NAME_CHARACTERS_SHOWN ? `${name.slice(0, NAME_CHARACTERS_SHOWN)}...` : name;
  });
  const more = workloads.length - shown.length;
  return more > 0 ? `${shown.join(', ')} and ${more} more` : shown.join(', ');
}

function pairOf(value: unknown): LiveLatency['ttft'] {
  if (!isObject(value)) return {};
  const at = (key: string): number | undefined => (typeof value[key] === 'number' ? value[key] : undefined);
  return { p50: at('p50_s'), p99: at('p99_s') };
}

/**
 * The answer checked field by field before any of it is used: each figure the comparison reads is
 * a finite number where the contract (workload-profile.ts) says so, so a wrong or foreign answer
 * is refused with the field's name instead of failing somewhere in the printing.
 */
function asProfile(value: unknown, url: URL, workload: string): WorkloadProfile {
  const problems: string[] = [];
  const number = (holder: unknown, path: string, optional = false): void => {
    const key = path.slice(path.lastIndexOf('.') + 1);
    const field = isObject(holder) ? holder[key] : undefined;
    if (field === undefined && optional) return;
    if (typeof field !== 'number' || !Number.isFinite(field)) problems.push(`${path}: expected a number`);
  };
  if (!isObject(value)) throw new Error(`${url.href}: not a workload profile (expected a JSON object: docs/workload-profiles.md)`);
  if (value['workload'] !== workload) problems.push(`workload: expected "${workload}"`);
  number(value, 'requests');
  number(value['window'], 'window.seconds');
  for (const side of ['inputTokens', 'outputTokens']) {
    number(value[side], `${side}.count`);
    for (const figure of ['mean', 'stdev', 'p50', 'p99']) number(value[side], `${side}.${figure}`, true);
  }
  number(value['arrivals'], 'arrivals.ratePerSecond');
  number(value['arrivals'], 'arrivals.interArrivalCv', true);
  number(value['prefixSharing'], 'prefixSharing.blockTokens');
  number(value['prefixSharing'], 'prefixSharing.sharedPrefixShare');
  number(value, 'cachedInputShare', true);
  if (problems.length > 0) throw new Error(`${url.href}: not a workload profile for "${workload}" (docs/workload-profiles.md): ${problems.slice(0, 5).join('; ')}`);
  return value as unknown as WorkloadProfile;
}

function getJson(url: URL, answerTimeoutMs = ANSWER_TIMEOUT_MS): Promise<unknown> {
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return Promise.reject(new Error(`--admin: expected an http:// or https:// URL, got ${url.protocol}`));
  const client = url.protocol === 'https:' ? https : http;
  return new Promise((resolve, reject) => {
    const request = client.get(url, { timeout: ANSWER_TIMEOUT_MS, headers: { accept: 'application/json' } }, (response) => {
      const chunks: Buffer[] = [];
      let bytes = 0;
      response.on('data', (chunk: Buffer) => {
        bytes += chunk.length;
        if (bytes > MAX_ANSWER_BYTES) {
          request.destroy(new Error(`answer larger than ${MAX_ANSWER_BYTES} bytes`));
          return;
        }
        chunks.push(chunk);
      });
      response.on('end', () => {
        const body = Buffer.concat(chunks).toString('utf8');
        const status = response.statusCode ?? 0;
        if (status !== 200) {
          const hint = status === 404 && url.pathname.includes('/profile/') ? ' (a sidecar without workload profiles, or a workload whose profiling is off)' : '';
          reject(new Error(`${url.href}: HTTP ${status}${hint}: ${printable(body)}`));
          return;
        }
        try {
          resolve(JSON.parse(body));
        } catch {
          reject(new Error(`${url.href}: the answer is not JSON: ${printable(body)}`));
        }
      });
      response.on('error', (error) => reject(new Error(`${url.href}: ${error.message}`)));
    });
    // `timeout` above is the socket's idle time only: an answer that drips a byte at a time never idles.
    const deadline = setTimeout(() => request.destroy(new Error(`no whole answer within ${answerTimeoutMs} ms`)), answerTimeoutMs);
    request.on('close', () => clearTimeout(deadline));
    request.on('timeout', () => request.destroy(new Error(`no answer within ${ANSWER_TIMEOUT_MS} ms`)));
    request.on('error', (error: NodeJS.ErrnoException) => reject(new Error(`${url.href}: ${error.code ?? error.message}${error.code === undefined ? '' : ` (${error.message})`}`)));
  });
}

/**
 * An answer body as it may appear in a terminal: the profile routes' `{"error": "..."}` message
 * when it is one, control characters dropped, cut at 200 characters.
 */
function printable(body: string): string {
  let message = body;
  try {
    const parsed: unknown = JSON.parse(body);
    if (isObject(parsed) && typeof parsed['error'] === 'string') message = parsed['error'];
  } catch {
    // Not JSON: the body as it came.
  }
  const text = message.replace(/[\u0000-\u001f\u007f-\u009f]/g, ' ').trim();
  return text.length > 200 ? `${text.slice(0, 200)}...` : text === '' ? '(empty body)' : text;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
