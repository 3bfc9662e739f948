import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../../src/cli/main.js';
import { fakeAdmin, type FakeAdmin } from './fake-admin.js';
import { distribution, workloadProfile } from './workload-profiles.js';

const FIXTURES = join(import.meta.dirname, '..', '..', 'fixtures', 'benchmarks');
const GUIDELLM_JSON = join(FIXTURES, 'guidellm', 'benchmarks_stripped.json');
const AIPERF_AGGREGATE = join(FIXTURES, 'aiperf', 'profile_export_aiperf.json');
const AIPERF_RECORDS = join(FIXTURES, 'aiperf', 'profile_export.jsonl');

function io() {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  let out = '';
  let err = '';
  stdout.on('data', (c: Buffer) => (out += c.toString()));
  stderr.on('data', (c: Buffer) => (err += c.toString()));
  return { streams: { stdout, stderr, env: {} }, out: () => out, err: () => err };
}

let admin: FakeAdmin;
let dir: string;
beforeAll(async () => {
  admin = await fakeAdmin();
  dir = await mkdtemp(join(tmpdir(), 'tokentap-compare-'));
});
afterAll(async () => {
  await admin.close();
  await rm(dir, { recursive: true, force: true });
});

describe('tokentap profile compare', () => {
  it('exits 1 and prints each flagged dimension with its reason when the benchmark sent fixed lengths and production is long-tailed and bursty', async () => {
    admin.profiles.set('chat', workloadProfile({
      inputTokens: distribution(3600, 820, 700, 610, 3000),
      outputTokens: distribution(3600, 190, 140, 150, 650),
      arrivals: { ratePerSecond: 1, interArrivalCv: 2.2, gammaShape: 0.21 },
    }));
    const console = io();
    const code = await main(['profile', 'compare', '--admin', admin.url, '--workload', 'chat', '--result', GUIDELLM_JSON, '--window', '30m'], console.streams);
    expect(console.err()).toBe('');
    expect(code).toBe(1);
    expect(admin.asked).toContain('/profile/chat?format=json&window=30m');
    const out = console.out();
    expect(out).toContain(`Workload "chat" (production, last 60 min) against GuideLLM benchmark 0 of 1 (synchronous) in ${GUIDELLM_JSON}`);
    // Side by side: production's TTFT from status.json, the benchmark's from the report (16.4 / 21.3 ms).
    expect(out).toMatch(/TTFT p50 \/ p99 +250\.0 ms \/ 900\.0 ms +16\.4 ms \/ 21\.3 ms/);
    expect(out).toMatch(/input tokens mean ± stdev +820 ± 700 +257 ± 0\.4/);
    expect(out).toMatch(/burstiness \(CV\) +2\.20 \(bursty\) +–/);
    expect(out).toContain('Not production\'s traffic on 6 dimensions:');
    expect(out).toContain('  ✗ input length mean: benchmark 257 tokens, production 820 tokens (−69 %, tolerance ±20 %)');
    expect(out).toMatch(/\? burstiness: the result has fewer than 3 per-request start times/);
  });

  it('exits 0 when the benchmark is within tolerance on every dimension both sides report', async () => {
    // Production shaped like the AIPerf run's table: mean input 7243 ± 5536, output 175 ± 220.
    admin.profiles.set('rag', workloadProfile({
      workload: 'rag',
      inputTokens: distribution(2000, 7000, 5200, 6100, 26000),
      outputTokens: distribution(2000, 180, 210, 30, 740),
    }));
    const console = io();
    const code = await main(['profile', 'compare', '--admin', `${admin.url}/`, '--workload', 'rag', '--result', AIPERF_AGGREGATE], console.streams);
    expect(console.err()).toBe('');
    expect(console.out()).toContain('Comparable: the benchmark\'s traffic is within tolerance of production\'s on every dimension both sides report.');
    expect(code).toBe(0);
    expect(admin.asked).toContain('/profile/rag?format=json&window=1h');
  });

  it('shows a rate below 0.01 a second with its digits, not as 0.00/s (review reproduction: the real AIPerf records start 65,953 s apart and read "0.00/s")', async () => {
    admin.profiles.set('slow', workloadProfile({ workload: 'slow', arrivals: { ratePerSecond: 0.004, interArrivalCv: 1, gammaShape: 1 } }));
    const console = io();
    await main(['profile', 'compare', '--admin', admin.url, '--workload', 'slow', '--result', AIPERF_RECORDS], console.streams);
    expect(console.err()).toBe('');
    // Two starts, 1759879161.119147826 - 1759813207.532900363 s apart: one gap.
    const rate = 1 / (1759879161.119147826 - 1759813207.532900363);
    expect(console.out()).toMatch(new RegExp(`request rate +0\\.0040/s +${rate.toPrecision(2).replace('.', '\\.')}/s\n`));
  });

  it('exits 2 naming the route when the sidecar has no profile for the workload (HTTP 404)', async () => {
    const console = io();
    const code = await main(['profile', 'compare', '--admin', admin.url, '--workload', 'code', '--result', GUIDELLM_JSON], console.streams);
    expect(code).toBe(2);
    expect(console.err()).toMatch(
      /^tokentap profile compare: http:\/\/127\.0\.0\.1:\d+\/profile\/code\?format=json&window=1h: HTTP 404 \(a sidecar without workload profiles, or a workload whose profiling is off\): no workload-shape record for workload "code"; recorded workloads: chat/,
    );
    expect(console.out()).toBe('');
  });

  it('exits 2 when production recorded no request in the window: nothing to compare with', async () => {
    admin.profiles.set('quiet', workloadProfile({ workload: 'quiet', requests: 0, inputTokens: { count: 0 }, outputTokens: { count: 0 } }));
    const console = io();
    expect(await main(['profile', 'compare', '--admin', admin.url, '--workload', 'quiet', '--result', GUIDELLM_JSON], console.streams)).toBe(2);
    expect(console.err()).toBe('tokentap profile compare: workload "quiet": no request recorded in the last 1h; nothing to compare the benchmark with (a longer --window?)\n');
  });

  it('exits 2, not 0, when no dimension could be compared: production reported no usage and the result has no start times (was: "Comparable", exit 0)', async () => {
    admin.profiles.set('blind', workloadProfile({ workload: 'blind', requests: 2, inputTokens: { count: 0 }, outputTokens: { count: 0 }, arrivals: { ratePerSecond: 0.001 } }));
    const console = io();
    expect(await main(['profile', 'compare', '--admin', admin.url, '--workload', 'blind', '--result', GUIDELLM_JSON], console.streams)).toBe(2);
    expect(console.out()).not.toContain('Comparable');
    expect(console.out()).toContain('Nothing compared: neither side reports a dimension the other does.\nNot compared:\n  ? input length: no production request in the window reported its token usage\n');
    expect(console.err()).toBe('tokentap profile compare: nothing compared: no dimension of the benchmark\'s traffic is reported by both sides (each is listed under "Not compared")\n');
  });

  it('exits 2 when the admin listener does not answer', async () => {
    const closed = http.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const console = io();
    expect(await main(['profile', 'compare', '--admin', `http://127.0.0.1:${port}`, '--workload', 'chat', '--result', GUIDELLM_JSON], console.streams)).toBe(2);
    expect(console.err()).toContain(`http://127.0.0.1:${port}/profile/chat?format=json&window=1h: ECONNREFUSED`);
  });

  it.each([
    ['a profile whose figures are not numbers', JSON.stringify({ workload: 'odd', requests: '12', window: { seconds: 3600 }, inputTokens: { count: 1, mean: 'long' }, outputTokens: { count: 1 }, arrivals: {}, prefixSharing: { blockTokens: 512, sharedPrefixShare: 0 } }),
      /\/profile\/odd\?format=json&window=1h: not a workload profile for "odd" \(docs\/workload-profiles\.md\): requests: expected a number; inputTokens\.mean: expected a number; arrivals\.ratePerSecond: expected a number/],
    ['an answer larger than 4 MiB', `{"workload": "odd", "pad": "${'x'.repeat(5 * 1024 * 1024)}"}`, /\/profile\/odd\?format=json&window=1h: answer larger than 4194304 bytes/],
    ['an answer that is not JSON', '<html>proxy login</html>', /\/profile\/odd\?format=json&window=1h: the answer is not JSON: <html>proxy login<\/html>/],
  ])('exits 2, naming the field or the limit, on %s from the admin listener', async (_name, body, message) => {
    admin.raw.set('/profile/odd', body);
    const console = io();
    expect(await main(['profile', 'compare', '--admin', admin.url, '--workload', 'odd', '--result', GUIDELLM_JSON], console.streams)).toBe(2);
    expect(console.err()).toMatch(message);
    expect(console.out()).toBe('');
  });

  it('asks which benchmark of a sweep to compare, listing them, and compares the one chosen', async () => {
    const one = (kind: string, p50: number) => ({ config: { strategy: { type_: kind } }, metrics: { time_to_first_token_ms: { successful: { count: 3, median: p50, percentiles: { p99: p50 * 2 } } } } });
    const sweep = join(dir, 'sweep.json');
    await writeFile(sweep, JSON.stringify({ metadata: { version: 2 }, benchmarks: [one('synchronous', 10), one('throughput', 80)] }));
    const console = io();
    expect(await main(['profile', 'compare', '--admin', admin.url, '--workload', 'chat', '--result', sweep], console.streams)).toBe(2);
    expect(console.err()).toContain('holds 2 benchmarks; choose one with --benchmark INDEX:\n  0: benchmark 0 of 2 (synchronous)\n  1: benchmark 1 of 2 (throughput)\n');
    const chosen = io();
    await main(['profile', 'compare', '--admin', admin.url, '--workload', 'chat', '--result', sweep, '--benchmark', '1'], chosen.streams);
    expect(chosen.out()).toMatch(/TTFT p50 \/ p99 +250\.0 ms \/ 900\.0 ms +80\.0 ms \/ 160\.0 ms/);
  });

  it.each([
    [['--workload', 'chat', '--result', 'x.json'], '--admin URL is required'],
    [['--admin', 'ftp://host', '--workload', 'chat', '--result', 'x.json'], '--admin: expected an http:// or https:// URL, got "ftp://host"'],
    [['--admin', 'http://127.0.0.1:9464', '--result', 'x.json'], '--workload NAME is required'],
    [['--admin', 'http://127.0.0.1:9464', '--workload', '..', '--result', 'x.json'], '--workload "..": expected a workload name as configured: lower-case letters, digits, "_" or "-", starting with a letter'],
    [['--admin', 'http://127.0.0.1:9464', '--workload', 'chat'], '--result FILE is required'],
    [['--admin', 'http://127.0.0.1:9464', '--workload', 'chat', '--result', 'x.json', '--window', 'an hour'], '--window: expected a duration like 30m or 1h, got "an hour"'],
    [['--admin', 'http://127.0.0.1:9464', '--workload', 'chat', '--result', 'x.json', '--benchmark', '1.5'], '--benchmark: expected an index 0, 1, 2..., got "1.5"'],
    [['--admin', 'http://127.0.0.1:9464', '--workload', 'chat', '--result', 'x.json', '--rate', '3'], "Unknown option '--rate'"],
  ])('exits 2 on bad flags, naming the flag: %j', async (flags, message) => {
    const console = io();
    expect(await main(['profile', 'compare', ...flags], console.streams)).toBe(2);
    expect(console.err()).toContain(message);
  });

  it('prints its usage with --help, and refuses an unknown profile command naming it (exit 2)', async () => {
    const help = io();
    expect(await main(['profile', 'compare', '--help'], help.streams)).toBe(0);
    expect(help.out()).toContain('Exit status: 0 comparable');
    const unknown = io();
    expect(await main(['profile', 'frobnicate'], unknown.streams)).toBe(2);
    expect(unknown.err()).toMatch(/^tokentap: TOKENTAP_ERR_USAGE: command line is invalid\n  - .*frobnicate/);
  });
});
