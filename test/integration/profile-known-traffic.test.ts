import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import type { WorkloadProfile } from '../../src/profile/workload-profile.js';
import { eventually, startTestSidecar } from '../helpers/sidecar.js';

const run = promisify(execFile);

/**
 * A live sidecar's profile of scripted traffic: every figure checked against what the script sent.
 * 24 chat requests in bursts of four 15 ms apart, 250 ms between bursts; every other request behind
 * the same 1,100-token system prompt (two whole 512-token blocks); prompt and answer lengths set
 * per request (the simulator counts a prompt token per 4 bytes of message text).
 */
const CONFIG = `workloads:
  - name: chat
    match: { header: { x-workload: chat } }
  - name: idle
    match: { header: { x-workload: idle } }
  - name: default
`;
interface Sent {
  /** When the client sent it, in ms from its first send, by its own clock. */
  readonly atMs: number;
  readonly inputTokens: number;
  readonly outputTokens: number;
  readonly shared: boolean;
}

/**
 * The client, in a process of its own: sharing the sidecar's event loop would hold its timers and
 * sends back behind the sidecar's work, and its clock would not say when a request left. A warm-up
 * request (to the default workload) opens its HTTP client first. It prints what it sent, as JSON.
 */
const CLIENT = `
const [proxy, system] = [process.argv[1], 'S'.repeat(4 * 1100)];
const post = (workload, body) => fetch(proxy + '/v1/chat/completions', { method: 'POST', headers: { 'content-type': 'application/json', 'x-workload': workload }, body: JSON.stringify(body) }).then((r) => r.text());
await post('default', { model: 'm', max_tokens: 1, messages: [{ role: 'user', content: 'warm up' }] });
const sent = [];
const answers = [];
let first;
for (let i = 0; i < 24; i++) {
  if (i > 0) await new Promise((resolve) => setTimeout(resolve, i % 4 === 0 ? 250 : 15));
  const shared = i % 2 === 0;
  const userTokens = 100 + 37 * i;
  const outputTokens = 8 + (i % 5) * 10;
  // The user text starts with the request's number, so no two prompts share a block past the system prompt.
  const user = String(i).padStart(4, '0') + 'u'.repeat(userTokens * 4 - 4);
  const body = { model: 'm', max_tokens: outputTokens, stream: true, stream_options: { include_usage: true }, messages: [...(shared ? [{ role: 'system', content: system }] : []), { role: 'user', content: user }] };
  const now = performance.now();
  first ??= now;
  sent.push({ atMs: now - first, inputTokens: userTokens + (shared ? 1100 : 0), outputTokens, shared });
  answers.push(post('chat', body));
}
await Promise.all(answers);
process.stdout.write(JSON.stringify(sent));
`;

let simulator: RunningSimulator;
let sidecar: Awaited<ReturnType<typeof startTestSidecar>>;
let sent: Sent[] = [];

beforeAll(async () => {
  simulator = await startSimulator({ port: 0, ttftMs: 1, itlMs: 0, outputTokens: 64 });
  sidecar = await startTestSidecar(simulator.url, CONFIG);
  const { stdout } = await run(process.execPath, ['--input-type=module', '-e', CLIENT, sidecar.proxyUrl], { timeout: 20_000 });
  sent = JSON.parse(stdout) as Sent[];
  await eventually('the 24 requests recorded', async () => ((await (await fetch(`${sidecar.adminUrl}/profile/chat`)).json()) as WorkloadProfile).requests, (n) => n === 24);
}, 30_000);

afterAll(async () => {
  await sidecar?.close();
  await simulator?.close();
});

function cv(values: readonly number[]): number {
  const gaps = values.slice(1).map((v, i) => v - (values[i] as number));
  const mean = gaps.reduce((a, b) => a + b, 0) / gaps.length;
  const variance = gaps.reduce((a, g) => a + (g - mean) ** 2, 0) / (gaps.length - 1);
  return Math.sqrt(variance) / mean;
}

describe('the profile of scripted traffic through a live sidecar', () => {
  it('reports the lengths the script sent, exactly', async () => {
    const profile = (await (await fetch(`${sidecar.adminUrl}/profile/chat?window=10m`)).json()) as WorkloadProfile;
    const inputs = sent.map((s) => s.inputTokens);
    const outputs = sent.map((s) => s.outputTokens);
    expect(profile.outcomes).toEqual({ completed: 24 });
    expect(profile.inputTokens).toMatchObject({ count: 24, min: Math.min(...inputs), max: Math.max(...inputs) });
    expect(profile.inputTokens.mean).toBeCloseTo(inputs.reduce((a, b) => a + b, 0) / 24, 9);
    expect(profile.outputTokens).toMatchObject({ count: 24, min: 8, max: 48 });
    expect(profile.outputTokens.mean).toBeCloseTo(outputs.reduce((a, b) => a + b, 0) / 24, 9);
  });

  it('reports the burstiness the script sent (inter-arrival CV within 0.1 of the client\'s own clock) and a rate of the requests over its window', async () => {
    const profile = (await (await fetch(`${sidecar.adminUrl}/profile/chat?window=10m`)).json()) as WorkloadProfile;
    expect(profile.arrivals.interArrivalCv).toBeGreaterThan(1);
    expect(Math.abs((profile.arrivals.interArrivalCv as number) - cv(sent.map((s) => s.atMs)))).toBeLessThan(0.25);
    expect(profile.arrivals.gammaShape).toBeCloseTo(1 / (profile.arrivals.interArrivalCv as number) ** 2, 9);
    expect(profile.arrivals.ratePerSecond).toBeCloseTo(24 / profile.window.seconds, 9);
    expect(profile.concurrency.max).toBeGreaterThanOrEqual(1);
  });

  it('reports the shared system prompt: half the requests share their first block, and the trace gives them the same two leading ids', async () => {
    const profile = (await (await fetch(`${sidecar.adminUrl}/profile/chat?window=10m`)).json()) as WorkloadProfile;
    expect(profile.prefixSharing.sharedPrefixShare).toBe(0.5);
    const rows = (await (await fetch(`${sidecar.adminUrl}/profile/chat?format=mooncake&window=10m`)).text()).trimEnd().split('\n').map((line) => JSON.parse(line) as { timestamp: number; input_length: number; output_length: number; hash_ids: number[] });
    // In the order the sidecar received them, which two requests sent 15 ms apart may swap: matched by
    // input length (each request's is its own).
    expect(rows.map((r) => r.timestamp)).toEqual([...rows.map((r) => r.timestamp)].sort((a, b) => a - b));
    const byLength = new Map(sent.map((s) => [s.inputTokens, s]));
    expect(rows.map((r) => byLength.get(r.input_length)?.outputTokens)).toEqual(rows.map((r) => r.output_length));
    const lead = rows.find((r) => byLength.get(r.input_length)?.shared)?.hash_ids.slice(0, 2);
    for (const row of rows) {
      if (byLength.get(row.input_length)?.shared) expect(row.hash_ids.slice(0, 2)).toEqual(lead);
      else expect(row.hash_ids).not.toContain(lead?.[0]);
    }
    // Timestamps: milliseconds from the first request, as the client's clock saw the sends. On a busy
    // machine a request can leave or be read late, so: the span within 10 %, and most requests within
    // 50 ms (a timestamp in seconds, or from another base, is off by far more).
    const atMs = rows.map((r) => byLength.get(r.input_length)?.atMs as number);
    const clientSpan = Math.max(...atMs) - Math.min(...atMs);
    expect(Math.abs((rows.at(-1)?.timestamp as number) / clientSpan - 1)).toBeLessThan(0.1);
    const offsets = rows.map((r, i) => r.timestamp - (atMs[i] as number)).sort((a, b) => a - b);
    const median = offsets[offsets.length >> 1] as number;
    expect(offsets.filter((o) => Math.abs(o - median) < 50).length).toBeGreaterThanOrEqual(20);
  });

  it('answers a workload with no traffic as an empty profile, and refuses its exports with the reason (404)', async () => {
    const profile = (await (await fetch(`${sidecar.adminUrl}/profile/idle`)).json()) as WorkloadProfile;
    expect(profile).toMatchObject({ requests: 0, inputTokens: { count: 0 }, arrivals: { ratePerSecond: 0 }, outcomes: {} });
    for (const format of ['guidellm', 'aiperf', 'mooncake']) {
      const refused = await fetch(`${sidecar.adminUrl}/profile/idle?format=${format}`);
      expect(refused.status).toBe(404);
      expect(((await refused.json()) as { error: string }).error).toMatch(/^no request of workload "idle" in the window reported/);
    }
  });

  it('answers a window of 1 ms with no request in it, and one of 24 h with all of them', async () => {
    expect(((await (await fetch(`${sidecar.adminUrl}/profile/chat?window=1ms`)).json()) as WorkloadProfile).requests).toBe(0);
    expect(((await (await fetch(`${sidecar.adminUrl}/profile/chat?window=24h`)).json()) as WorkloadProfile).requests).toBe(24);
  });
});
