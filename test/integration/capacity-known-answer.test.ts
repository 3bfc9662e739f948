import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { StatusReport } from '../../src/admin/status-report.js';
import { main } from '../../src/cli/main.js';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { startTestSidecar } from '../helpers/sidecar.js';

/**
 * Capacity at SLO with a known answer (issue 25 item 6): the simulator's first token takes 20 ms
 * while at most 24 requests are in flight in it and 2.5 s past that (--knee-in-flight 24), against
 * a TTFT budget of 1 s at 95 %. Closed-loop clients at fixed concurrency steps of 8, 16 and 32 put
 * more than 100 requests each into the bands 5-8, 9-16 and 17-32: the first two hold, 17-32 breaks. So
 * the capacity band is 9-16 (16 in flight), the knee 17-32, and the peak in flight exactly 32.
 *
 * Margins for a loaded 2-core machine: each stream lasts half a second (9 gaps of 50 ms), so the
 * clients' own time between requests is a small share of it and the concurrency stays at its step;
 * a first token is late only past 1 s, fifty times the 20 ms asked for; and a band holds with up to
 * 5 % late, so a few stalls of the machine do not break 5-8 or 9-16. Measured here: a 200 ms budget
 * at 99 % broke both on this machine (7 and 10 first tokens over 200 ms of about 140). The last step
 * has 6 rounds and 30 ms of jitter: rounds of 32 equal streams end together, and the first 24
 * clients to start again are below the knee, so 4 rounds left 17-32 under 100 requests once.
 */
const KNEE = 24;
const STEPS = [
  { concurrency: 8, rounds: 16 },
  { concurrency: 16, rounds: 8 },
  { concurrency: 32, rounds: 6 },
];
const PLANNED_RPS = 1000;
/** Each request's e2e is at least its first token plus 9 gaps of 50 ms: 470 ms below the knee, 2.95 s past it. */
const FAST_E2E_S = 0.47;
const SLOW_E2E_S = 2.95;

let simulator: RunningSimulator;
let sidecar: Awaited<ReturnType<typeof startTestSidecar>>;

function memoryStream() {
  let text = '';
  return { stream: { write: (s: string) => ((text += s), true) } as unknown as NodeJS.WritableStream, text: () => text };
}

async function oneRequest(): Promise<void> {
  const response = await fetch(`${sidecar.proxyUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'sim-model', stream: true, messages: [{ role: 'user', content: 'step' }] }),
  });
  await response.text();
}

beforeAll(async () => {
  simulator = await startSimulator({ host: '127.0.0.1', port: 0, ttftMs: 20, itlMs: 50, jitterMs: 30, outputTokens: 10, kneeInFlight: KNEE, pastKneeTtftMs: 2500 });
  sidecar = await startTestSidecar(
    simulator.url,
    ['workloads:', '  - name: chat', '    slo: { objective: 0.95, ttft: 1s }', `capacity: { planned_peak_rps: ${PLANNED_RPS} }`, ''].join('\n'),
  );
  // Bounded: 3 steps, 448 requests in all.
  for (const step of STEPS) {
    await Promise.all(
      Array.from({ length: step.concurrency }, async () => {
        for (let round = 0; round < step.rounds; round++) await oneRequest();
      }),
    );
  }
}, 120_000);

afterAll(async () => {
  await sidecar?.close();
  await simulator?.close();
});

describe('capacity at SLO against a simulator with a known knee at 24 in flight', () => {
  it('finds the capacity band 9-16, the knee 17-32 and the peak of 32 in flight', async () => {
    const report = (await (await fetch(`${sidecar.adminUrl}/status.json`)).json()) as StatusReport;
    const chat = report.capacity.workloads.find((w) => w.name === 'chat');
    const verdicts = Object.fromEntries((chat?.bands ?? []).filter((b) => b.verdict !== 'too_few').map((b) => [b.band, b.verdict]));
    expect(verdicts).toEqual({ '5-8': 'held', '9-16': 'held', '17-32': 'broken' });
    expect(chat).toMatchObject({ capacity_in_flight: 16, capacity_band: '9-16', at_least: false, knee_band: '17-32' });
    expect(report.capacity.mix).toMatchObject({ capacity_in_flight: 16, capacity_band: '9-16', at_least: false, knee_band: '17-32', headroom: 1 - 32 / 16 });
    expect(report.capacity.peak_in_flight).toBe(32);
  });

  it("gives the pods needed for the planned peak by Little's law from the measured e2e", async () => {
    const report = (await (await fetch(`${sidecar.adminUrl}/status.json`)).json()) as StatusReport;
    const mix = report.capacity.mix;
    const meanE2e = mix.mean_e2e_s as number;
    // Every request takes at least the fast schedule, and some of the last step the slow one; how
    // many is up to the clients (after each round of 32 the first 24 to start again are fast).
    expect(meanE2e).toBeGreaterThan(FAST_E2E_S);
    expect(meanE2e).toBeLessThan(SLOW_E2E_S);
    expect(mix.sustainable_rps).toBeCloseTo(16 / meanE2e, 9);
    // 1000 a second at 16 / ~1.1 s = ~15 a second per pod: between 30 and 185 pods.
    expect(report.capacity.pods_needed_planned).toBe(Math.ceil(PLANNED_RPS / (16 / meanE2e)));
    expect(report.capacity.pods_needed_planned).toBeGreaterThan(Math.ceil((PLANNED_RPS * FAST_E2E_S) / 16));
    expect(report.capacity.pods_needed_planned).toBeLessThanOrEqual(Math.ceil((PLANNED_RPS * SLOW_E2E_S) / 16));
  });

  it('`tokentap report` prints the same figures for the running sidecar and exits 0', async () => {
    const out = memoryStream();
    const err = memoryStream();
    const code = await main(['report', '--admin', sidecar.adminUrl], { stdout: out.stream, stderr: err.stream, env: {} });
    expect(err.text()).toBe('');
    expect(code).toBe(0);
    const report = (await (await fetch(`${sidecar.adminUrl}/status.json`)).json()) as StatusReport;
    const text = out.text();
    expect(text).toContain('  capacity at SLO               16 in flight (band 9-16; knee at band 17-32)\n');
    expect(text).toContain('  peak in flight                32 since start\n');
    expect(text).toContain('  headroom                      -100.0 %\n');
    expect(text).toContain(`  pods needed, planned peak     ${report.capacity.pods_needed_planned} for 1000 requests/s\n`);
    expect(text).toMatch(/\nWorkload chat\n {2}capacity at SLO {15}16 in flight \(band 9-16; knee at band 17-32\)\n/);
  });
});
