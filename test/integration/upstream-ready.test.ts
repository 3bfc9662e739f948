import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { startTestSidecar } from '../helpers/sidecar.js';

/**
 * tokentap_upstream_ready, which TokentapUpstreamDown pages on: what the last readiness probe
 * (/readyz, the kubelet's) found, read from a real sidecar's /metrics.
 */

let simulator: RunningSimulator | undefined;
let sidecar: Awaited<ReturnType<typeof startTestSidecar>> | undefined;

afterEach(async () => {
  await sidecar?.close();
  await simulator?.close();
  sidecar = undefined;
  simulator = undefined;
});

async function readyLine(adminUrl: string): Promise<string[]> {
  const text = await (await fetch(`${adminUrl}/metrics`)).text();
  return text.split('\n').filter((line) => line.startsWith('tokentap_upstream_ready'));
}

/** A loopback port nothing listens on: bound, then closed. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

describe('tokentap_upstream_ready', () => {
  it('is absent until the first readiness probe, then 1 while the upstream answers its health path', async () => {
    simulator = await startSimulator({ port: 0 });
    sidecar = await startTestSidecar(simulator.url);
    expect(await readyLine(sidecar.adminUrl)).toEqual([]);
    expect((await fetch(`${sidecar.adminUrl}/readyz`)).status).toBe(200);
    expect(await readyLine(sidecar.adminUrl)).toEqual(['tokentap_upstream_ready 1']);
  });

  it('keeps its last answer while the sidecar drains: a draining /readyz fails without asking the upstream, so a rollout does not read as an engine down', async () => {
    simulator = await startSimulator({ port: 0 });
    sidecar = await startTestSidecar(simulator.url);
    expect((await fetch(`${sidecar.adminUrl}/readyz`)).status).toBe(200);
    const drained = sidecar.drain(5_000, 'SIGTERM');
    const probe = await fetch(`${sidecar.adminUrl}/readyz`);
    expect(probe.status).toBe(503);
    expect(await probe.json()).toMatchObject({ status: 'draining' });
    expect(await readyLine(sidecar.adminUrl)).toEqual(['tokentap_upstream_ready 1']);
    await drained;
  });

  it('is 0 after a readiness probe found the upstream refusing connections', async () => {
    sidecar = await startTestSidecar(`http://127.0.0.1:${await closedPort()}`);
    const probe = await fetch(`${sidecar.adminUrl}/readyz`);
    expect(probe.status).toBe(503);
    expect(await probe.json()).toMatchObject({ status: 'not ready', upstream: 'ECONNREFUSED' });
    expect(await readyLine(sidecar.adminUrl)).toEqual(['tokentap_upstream_ready 0']);
  });
});
