import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { refusedHostMessage } from '../../src/admin/admin-host.js';
import { main } from '../../src/cli/main.js';
import { scriptedReport, stopScripted, WITH_COST, WORKLOADS } from '../helpers/cost-script.js';

function memoryStream() {
  let text = '';
  return { stream: { write: (s: string) => ((text += s), true) } as unknown as NodeJS.WritableStream, text: () => text };
}

let server: Server | undefined;

afterEach(async () => {
  await stopScripted();
  await new Promise((resolve) => (server === undefined ? resolve(undefined) : server.close(resolve)));
  server = undefined;
});

/** An admin listener on loopback answering every request with `body` (and `status`, 200 unless given). */
async function answering(body: string | Buffer, status = 200): Promise<string> {
  server = createServer((_req, res) => {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(body);
  });
  await new Promise<void>((resolve) => server?.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

async function report(...args: string[]) {
  const out = memoryStream();
  const err = memoryStream();
  const code = await main(['report', ...args], { stdout: out.stream, stderr: err.stream, env: {} });
  return { code, out: out.text(), err: err.text() };
}

const FIGURES = { capacity_in_flight: null, capacity_band: null, at_least: false, knee_band: null, mean_e2e_s: null, sustainable_rps: null, peak_rps: null, headroom: null, pods_needed_observed: null };

describe('tokentap report', () => {
  it('says the sidecar is unreachable, naming the URL, and exits 1', async () => {
    const closed = await answering('{}');
    await new Promise((resolve) => server?.close(resolve));
    server = undefined;
    const result = await report('--admin', closed);
    expect(result.code).toBe(1);
    expect(result.err).toMatch(new RegExp(`^tokentap report: ${closed}/status.json: no answer \\(ECONNREFUSED\\): is the sidecar running`));
  });

  it('refuses an answer that is not a status report with capacity, saying what it is', async () => {
    expect((await report('--admin', await answering('<html>'))).err).toContain('the answer is not JSON: not a tokentap admin listener');
    await new Promise((resolve) => server?.close(resolve));
    const old = await report('--admin', await answering(JSON.stringify({ schema_version: 1, version: '0.0.9' })));
    expect(old.code).toBe(1);
    expect(old.err).toContain('the sidecar (tokentap 0.0.9) reports no capacity figures: it is older than tokentap report; upgrade it');
  });

  it('says, of a 421, that the admin listener refuses the name it was reached by and what to do, where it said "not a tokentap admin listener"', async () => {
    // The admin listener's own refusal of a public name (src/admin/admin-host.ts); a loopback test cannot resolve one to itself.
    const admin = await answering(JSON.stringify({ error: refusedHostMessage('127.0.0.1') }), 421);
    const result = await report('--admin', admin);
    expect(result.code).toBe(1);
    expect(result.err).toContain('HTTP 421: the admin listener does not answer to the name 127.0.0.1 (docs/security.md#dns-rebinding): reach it by the pod IP or a port-forward (localhost), or list 127.0.0.1 in its admin_allowed_hosts');
    expect(result.err).not.toContain('not a tokentap admin listener');
  });

  it('stops reading an answer past 8 MiB', async () => {
    const result = await report('--admin', await answering(Buffer.alloc(9 * 1024 * 1024, 0x20)));
    expect(result.code).toBe(1);
    expect(result.err).toContain('the answer exceeds 8388608 bytes');
  });

  it('gives the reason for a missing capacity once, not again on every figure that follows from it (newcomer run: four lines of 300 characters repeating it)', async () => {
    const reason = 'rag: no band has 100 requests yet (the most is 4 in band 3-4); chat: no band has 100 requests yet (the most is 18 in band 3-4)';
    const young = {
      schema_version: 1,
      version: '0.1.0',
      uptime_s: 11,
      capacity: {
        min_samples_per_band: 100,
        planned_peak_rps: 50,
        peak_in_flight: 4,
        pods_needed_planned: null,
        mix: { ...FIGURES, absent: { capacity_in_flight: reason, sustainable_rps: `no capacity: ${reason}`, peak_rps: 'no 5-minute rate yet', headroom: `no capacity: ${reason}`, pods_needed_observed: `no capacity: ${reason}`, pods_needed_planned: `no capacity: ${reason}` } },
        workloads: [],
      },
    };
    const result = await report('--admin', await answering(JSON.stringify(young)));
    expect(result.code).toBe(0);
    expect(result.out.split(reason)).toHaveLength(2);
    expect(result.out).toContain(`  capacity at SLO               none: ${reason}\n`);
    for (const label of ['sustainable', 'headroom', 'pods needed, observed peak', 'pods needed, planned peak']) {
      expect(result.out).toContain(`  ${label.padEnd(30)}none: no capacity (the reason is under capacity at SLO)\n`);
    }
    expect(result.out).toContain('  peak rate                     none: no 5-minute rate yet\n');
  });

  it('prints the request rates of very long streams with their digits, not as 0.00 (review reproduction: 900 s streams sustain 0.0011 requests/s against a peak of 0.003, 3 pods, and both read "0.00 requests/s")', async () => {
    const longStreams = { ...FIGURES, capacity_in_flight: 1, capacity_band: '1', knee_band: '2', mean_e2e_s: 900, sustainable_rps: 1 / 900, peak_rps: 0.003, headroom: 0, pods_needed_observed: 3, absent: { pods_needed_planned: 'no planned peak' } };
    const answer = { schema_version: 1, version: '0.1.0', uptime_s: 3600, capacity: { min_samples_per_band: 100, planned_peak_rps: null, peak_in_flight: 1, pods_needed_planned: null, mix: longStreams, workloads: [] } };
    const result = await report('--admin', await answering(JSON.stringify(answer)));
    expect(result.code).toBe(0);
    expect(result.out).toContain("  sustainable                   0.0011 requests/s (Little's law: 1 / 900.00 s mean e2e)\n");
    expect(result.out).toContain('  peak rate                     0.0030 requests/s (highest 5-minute rate, last hour)\n');
    expect(result.out).toContain("  pods needed, observed peak    3 for this pod's traffic\n");
  });

  it('prints no control character from the answer: escape sequences in a name or a reason reach the terminal as "?"', async () => {
    const hostile = {
      schema_version: 1,
      version: '1\u001b]0;owned\u0007',
      uptime_s: 5,
      capacity: {
        min_samples_per_band: 100,
        planned_peak_rps: null,
        peak_in_flight: 3,
        pods_needed_planned: null,
        mix: { ...FIGURES, absent: { capacity_in_flight: 'none\u001b[2J', pods_needed_planned: 'no planned peak' } },
        workloads: [{ name: 'chat\u001b[31m', bands: [], ...FIGURES, absent: {} }],
      },
    };
    const result = await report('--admin', await answering(JSON.stringify(hostile)));
    expect(result.code).toBe(0);
    expect(result.out).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/);
    expect(result.out).toContain('(tokentap 1?]0;owned?, up 5 s)');
    expect(result.out).toContain('\nWorkload chat?[31m\n');
    expect(result.out).toContain('  capacity at SLO               none: none?[2J\n');
  });

  it('prints the cost lines of the known-answer script (test/helpers/cost-script.ts): per request, per 1M tokens and per good request on both bases, busy share and cached input', async () => {
    const result = await report('--admin', await answering(JSON.stringify(await scriptedReport(WITH_COST))));
    expect(result.code).toBe(0);
    // chat: 0.88 accelerator-seconds at 0.001 EUR, 2 requests; allocation 0.002 EUR x 0.88 / 1.36.
    expect(result.out).toContain(
      [
        "\nCost of this pod's requests, last 1 s, every workload\n",
        '  busy share                    68.0 % of the time with a request in flight\n',
        '  price                         3.60 EUR an accelerator-hour x 2\n',
        '  cost per request              0.000453 EUR usage; 0.000667 EUR allocation\n',
      ].join(''),
    );
    expect(result.out).toContain(
      [
        '\nCost of workload chat\n',
        '  cost per request              0.000440 EUR usage; 0.000647 EUR allocation\n',
        '  per 1M input tokens           2.50 EUR usage; 3.68 EUR allocation\n',
        '  per 1M output tokens          47.50 EUR usage; 69.85 EUR allocation\n',
        '  per request that met its SLOs 0.000440 EUR usage; 0.000647 EUR allocation\n',
        '  requests with cached input    50.0 %\n',
        '  mean cached share of input    25.0 %\n',
      ].join(''),
    );
    expect(result.out).toContain('\nCost of workload batch\n  cost per request              0.000480 EUR usage; 0.000706 EUR allocation\n');
    expect(result.out).toContain('  per request that met its SLOs none: no SLO: set slo: on the workload\n');
  });

  it('says "no cost: configured" in place of every cost figure without cost:, and still prints the busy share and cached input', async () => {
    const result = await report('--admin', await answering(JSON.stringify(await scriptedReport(WORKLOADS))));
    expect(result.code).toBe(0);
    expect(result.out).toContain('  busy share                    68.0 % of the time with a request in flight\n  price                         none: no cost: configured\n');
    expect(result.out).toContain('\nCost of workload chat\n  cost per request              none: no cost: configured\n');
    expect(result.out).toContain('  requests with cached input    50.0 %\n');
    expect(result.out).not.toMatch(/n\/a/);
  });

  it('refuses an --admin that is not an http URL, with the usage exit code', async () => {
    const result = await report('--admin', 'localhost:9464');
    expect(result.code).toBe(2);
    expect(result.err).toContain('--admin: expected an http:// or https:// URL, got "localhost:"');
  });
});
