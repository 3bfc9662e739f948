import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../../src/cli/main.js';
import { fetchLiveWorkload } from '../../../src/profile/live-profile-client.js';
import { fakeAdmin, type FakeAdmin } from '../profile/fake-admin.js';
import { distribution, workloadProfile } from '../profile/workload-profiles.js';

/**
 * What the CLI prints from a network answer or a benchmark file, when that holds terminal escape
 * sequences (ESC, BEL, DEL, the 8-bit CSI U+009B) where a label, a number or a message belongs:
 * none of them reaches the terminal.
 */
const CONTROLS = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/;

async function run(argv: readonly string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const sink = (append: (text: string) => void) => new Writable({ write: (chunk: Buffer, _e, cb) => (append(chunk.toString('utf8')), cb()) });
  const code = await main(argv, { stdout: sink((t) => (stdout += t)), stderr: sink((t) => (stderr += t)), env: {} });
  return { code, stdout, stderr };
}

let server: http.Server | undefined;
afterEach(async () => {
  await new Promise((resolve) => (server === undefined ? resolve(undefined) : server.close(resolve)));
  server = undefined;
});

/** An admin listener on loopback answering every request with `status` and `body`. */
async function answering(status: number, body: string): Promise<string> {
  server = http.createServer((_req, res) => res.writeHead(status, { 'content-type': 'application/json' }).end(body));
  await new Promise<void>((resolve) => server?.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

const FIGURES = { capacity_band: null, at_least: false, knee_band: null, mean_e2e_s: null, sustainable_rps: null, peak_rps: null, headroom: null, pods_needed_observed: null, absent: {} };

describe('tokentap report against a hostile status.json', () => {
  it('prints no control character when escape sequences stand where numbers belong (capacity, peak in flight, band counts, pods needed)', async () => {
    const hostile = {
      schema_version: 1,
      version: '1',
      uptime_s: 5,
      capacity: {
        min_samples_per_band: '\u001b[2J',
        planned_peak_rps: 1,
        peak_in_flight: '\u001b]0;owned\u0007',
        pods_needed_planned: '\u009b31m',
        mix: { ...FIGURES, capacity_in_flight: '\u001b[31m' },
        workloads: [{ name: 'chat', ...FIGURES, capacity_in_flight: null, bands: [{ band: '1-2', requests: '\u001b[1A', verdict: 'met' }] }],
      },
    };
    const result = await run(['report', '--admin', await answering(200, JSON.stringify(hostile))]);
    expect(result.code).toBe(0);
    expect(result.stdout).not.toMatch(CONTROLS);
    expect(result.stdout).toContain('peak in flight                ?]0;owned? since start');
    expect(result.stdout).toContain('1-2: ?[1A met');
  });
});

describe('tokentap profile against a hostile admin listener', () => {
  it('prints the refusal message of an answer without its escape sequences', async () => {
    const result = await run(['profile', '--admin', await answering(404, JSON.stringify({ error: 'no workload \u001b]0;owned\u0007 \u009b2J' })), '--workload', 'chat']);
    expect(result.code).toBe(1);
    expect(result.stderr).not.toMatch(CONTROLS);
    expect(result.stderr).toContain('HTTP 404: no workload ?]0;owned? ?2J');
  });

  it('stops reading an answer that never ends, past the size a profile export can reach', async () => {
    let sent = 0;
    server = http.createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      const chunk = Buffer.alloc(1 << 20, 0x20);
      // Bounded: 200 MiB at most, and stopped as soon as the client goes away.
      const pump = (): void => {
        while (sent < 200 && !res.destroyed) {
          sent++;
          if (!res.write(chunk)) return void res.once('drain', pump);
        }
        res.end();
      };
      res.on('close', () => (sent = 200));
      pump();
    });
    await new Promise<void>((resolve) => server?.listen(0, '127.0.0.1', resolve));
    const result = await run(['profile', '--admin', `http://127.0.0.1:${(server.address() as AddressInfo).port}`]);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('the answer exceeds 67108864 bytes');
    expect(result.stdout).toBe('');
  });
});

describe('tokentap profile compare with a hostile result file or admin listener', () => {
  let admin: FakeAdmin;
  let dir: string;
  beforeAll(async () => {
    admin = await fakeAdmin();
    dir = await mkdtemp(join(tmpdir(), 'tokentap-hostile-'));
    admin.profiles.set('chat', workloadProfile({ inputTokens: distribution(3600, 820, 700, 610, 3000), outputTokens: distribution(3600, 190, 140, 150, 650) }));
  });
  afterAll(async () => {
    await admin.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('prints a GuideLLM strategy name carrying escape sequences without them', async () => {
    const result = join(dir, 'strategy.json');
    const benchmark = { config: { strategy: { type_: 'sync\u001b]0;owned\u0007\u009b2J' } }, metrics: { time_to_first_token_ms: { successful: { count: 3, median: 10, percentiles: { p99: 20 } } } } };
    await writeFile(result, JSON.stringify({ benchmarks: [benchmark] }));
    const compared = await run(['profile', 'compare', '--admin', admin.url, '--workload', 'chat', '--result', result]);
    // The result holds TTFT only: nothing of its traffic to compare, said on stderr (exit 2).
    expect(compared.stderr).toMatch(/^tokentap profile compare: nothing compared: /);
    expect(compared.stdout).not.toMatch(CONTROLS);
    expect(compared.stdout).toContain('GuideLLM benchmark 0 of 1 (sync?]0;owned??2J)');
  });

  it('names at most 20 of the workloads a hostile status.json lists, each cut to 64 characters, where it printed all of them on one 2.2 MB line', async () => {
    const hostile = await fakeAdmin();
    try {
      hostile.profiles.set('chat', workloadProfile({ inputTokens: distribution(3600, 820, 700, 610, 3000), outputTokens: distribution(3600, 190, 140, 150, 650) }));
      const workloads = Array.from({ length: 20_000 }, (_, i) => ({ name: `w${i}-${'\u001b'.repeat(20)}` }));
      hostile.raw.set('/status.json', JSON.stringify({ schema_version: 1, workloads }));
      const result = join(dir, 'few-names.json');
      await writeFile(result, JSON.stringify({ benchmarks: [{ metrics: { time_to_first_token_ms: { successful: { count: 3, median: 10, percentiles: { p99: 20 } } } } }] }));
      const compared = await run(['profile', 'compare', '--admin', hostile.url, '--workload', 'chat', '--result', result]);
      expect(compared.code).not.toBe(0);
      expect(compared.stderr).not.toMatch(CONTROLS);
      expect(compared.stderr).toContain('no workload "chat"; the sidecar has "w0-');
      expect(compared.stderr).toContain(' and 19980 more');
      expect(compared.stderr).toMatch(/"w0-[^,]{60}\.\.\., "w1-/);
      expect(compared.stderr).not.toContain('"w20-');
      expect(compared.stderr.length).toBeLessThan(4_000);
    } finally {
      await hostile.close();
    }
  });

  it("prints an error naming a result file's 8-bit CSI unit without it", async () => {
    const result = join(dir, 'unit.jsonl');
    await writeFile(result, `${JSON.stringify({ metadata: { request_start_ns: 1 }, metrics: { time_to_first_token: { value: 1, unit: 'ms\u009b2J\u007f' } } })}\n`);
    const compared = await run(['profile', 'compare', '--admin', admin.url, '--workload', 'chat', '--result', result]);
    expect(compared.code).toBe(2);
    expect(compared.stderr).not.toMatch(CONTROLS);
    expect(compared.stderr).toContain('unit "ms?2J?" is not a time unit');
  });
});

describe('profile compare against an admin listener that drips its answer', () => {
  it('gives up when the answer is not whole within the deadline, though a byte arrives every 100 ms', async () => {
    server = http.createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      // Bounded: 50 bytes, one every 100 ms (5 s), never idle long enough for a socket timeout.
      let sent = 0;
      const drip = setInterval(() => {
        if (res.destroyed || sent === 50) {
          clearInterval(drip);
          res.end();
          return;
        }
        sent++;
        res.write(' ');
      }, 100);
    });
    await new Promise<void>((resolve) => server?.listen(0, '127.0.0.1', resolve));
    const admin = new URL(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    const started = performance.now();
    await expect(fetchLiveWorkload(admin, 'chat', '1h', 1000)).rejects.toThrow(/\/profile\/chat\?format=json&window=1h: no whole answer within 1000 ms/);
    // Well before the drip's 5 s end.
    expect(performance.now() - started).toBeLessThan(4000);
  });
});

describe('tokentap report and profile against a hostile admin listener, after review', () => {
  it('report: a line feed where a number belongs starts no line of its own, and bidi controls and line separators are "?"', async () => {
    const hostile = {
      schema_version: 1,
      version: 'v\u202e1',
      uptime_s: 5,
      capacity: {
        min_samples_per_band: 20,
        planned_peak_rps: null,
        peak_in_flight: 3,
        pods_needed_planned: null,
        mix: { ...FIGURES, capacity_in_flight: '4\nFAKE LINE: capacity at SLO 999 in flight' },
        workloads: [{ name: 'chat\u2028x', ...FIGURES, capacity_in_flight: null, bands: [] }],
      },
    };
    const result = await run(['report', '--admin', await answering(200, JSON.stringify(hostile))]);
    expect(result.stdout.split('\n').filter((l) => l.startsWith('FAKE LINE'))).toEqual([]);
    expect(result.stdout).not.toMatch(/[\u202a-\u202e\u2028\u2029]/);
    expect(result.stdout).toContain('4?FAKE LINE');
  });

  it('report: the cost section prints no line or control of a hostile answer: its accelerator count, currency, absence reasons and workload names', async () => {
    const basis = { cost: 1, per_request: 0.01, per_million_input_tokens: 2, per_million_output_tokens: 3, per_good_request: 0.02 };
    const figures = (absent: Record<string, string>) => ({
      requests: 1,
      input_tokens: 1,
      output_tokens: 1,
      accelerator_seconds: 1,
      usage: basis,
      allocation: { ...basis, per_request: null },
      requests_with_cached_input_ratio: null,
      mean_cached_input_ratio: 0.5,
      absent,
    });
    const hostile = {
      schema_version: 1,
      version: '1',
      uptime_s: 5,
      capacity: { min_samples_per_band: 20, planned_peak_rps: null, peak_in_flight: 3, pods_needed_planned: null, mix: { ...FIGURES, capacity_in_flight: null }, workloads: [] },
      cost: {
        configured: true,
        currency: 'USD\u001b[2J',
        price_per_hour: 2.5,
        accelerators: '1\nFAKE LINE: price 0 USD',
        window_s: 300,
        busy_ratio: null,
        absent: { busy_ratio: 'idle\u202e' },
        pod: figures({ 'allocation.per_request': 'none\nFAKE LINE: cost per request 0 USD', requests_with_cached_input_ratio: '\u009b2J' }),
        workloads: [{ name: 'chat\u001b]0;owned\u0007', ...figures({}) }],
      },
    };
    const result = await run(['report', '--admin', await answering(200, JSON.stringify(hostile))]);
    expect(result.code).toBe(0);
    expect(result.stdout).not.toMatch(CONTROLS);
    expect(result.stdout.split('\n').filter((l) => l.startsWith('FAKE LINE'))).toEqual([]);
    expect(result.stdout).not.toMatch(/[\u202a-\u202e\u2028\u2029]/);
    expect(result.stdout).toContain('2.50 USD?[2J an accelerator-hour x 1?FAKE LINE');
    expect(result.stdout).toContain('Cost of workload chat?]0;owned?');
  });

  it('report: a status.json of the wrong shape is "not a tokentap status report", exit 1, not a TypeError', async () => {
    const result = await run(['report', '--admin', await answering(200, JSON.stringify({ schema_version: 1, capacity: {} }))]);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/the answer is not a tokentap status report \(/);
  });

  it('report and profile: a redirect is not followed, and says the listener is not tokentap', async () => {
    let followed = 0;
    server = http.createServer((req, res) => {
      if (req.url?.startsWith('/elsewhere')) followed++;
      res.writeHead(302, { location: '/elsewhere/status.json' }).end();
    });
    await new Promise<void>((resolve) => server?.listen(0, '127.0.0.1', resolve));
    const admin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const report = await run(['report', '--admin', admin]);
    expect(report.code).toBe(1);
    expect(report.stderr).toMatch(/HTTP 302: not a tokentap admin listener .*never redirects/);
    const profile = await run(['profile', '--admin', admin]);
    expect(profile.code).toBe(1);
    expect(profile.stderr).toMatch(/HTTP 302/);
    expect(followed).toBe(0);
  });

  it('profile: escape sequences in the answer body do not reach stdout', async () => {
    const result = await run(['profile', '--admin', await answering(200, '{"x":"\u001b]0;PWNED\u0007\u001b[2J\u009b31m\u007f"}')]);
    expect(result.code).toBe(0);
    expect(result.stdout).not.toMatch(CONTROLS);
    expect(result.stdout).toContain('PWNED');
  });
});
