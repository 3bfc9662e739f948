import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type RunningSimulator } from '../../../src/simulator/server.js';
import { RawClient, startRawUpstream } from '../../helpers/raw-http.js';
import { eventually } from '../../helpers/sidecar.js';
import { sleep, startSidecarProcess, witnessStream } from './harness.js';

const CHAT_BODY = JSON.stringify({ model: 'sim-model', stream: true, messages: [{ role: 'user', content: 'hi' }] });
const chat = (extra = '') => `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${CHAT_BODY.length}\r\n${extra}\r\n${CHAT_BODY}`;

describe('issue 13 point 9: shutdown, half-close and readiness', () => {
  let simulator: RunningSimulator;
  beforeAll(async () => {
    simulator = await startSimulator({ port: 0 });
  });
  afterAll(async () => {
    await simulator.close();
  });

  it('a connection with half a request head does not hold the drain: closed at drain start', async () => {
    const sidecar = await startSidecarProcess(simulator.url, { config: 'drain_timeout: 15s\n' });
    try {
      const half = await RawClient.connect(sidecar.proxy);
      half.write('POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n');
      const stream = witnessStream(sidecar.proxy, 20, 50);
      await sleep(200);
      const signalledMs = performance.now();
      sidecar.child.kill('SIGTERM');
      const { body } = await stream;
      const exit = await sidecar.exit;
      // The stream in flight finishes (1 s); the half head is not waited for (before: the full 15 s).
      expect(body).toContain('data: [DONE]');
      expect(exit.code).toBe(0);
      expect(exit.atMs - signalledMs).toBeLessThan(6_000);
      expect(half.isClosed).toBe(true);
    } finally {
      sidecar.stop();
    }
  }, 30_000);

  it('a second SIGTERM exits at once with the requests it cut logged as shutdown', async () => {
    const sidecar = await startSidecarProcess(simulator.url, { config: 'drain_timeout: 15s\n' });
    try {
      const client = await RawClient.connect(sidecar.proxy);
      client.write(chat('x-sim-output-tokens: 200\r\nx-sim-itl-ms: 50\r\n'));
      await client.read((text) => text.includes('"content"'));
      sidecar.child.kill('SIGTERM');
      await sleep(300);
      sidecar.child.kill('SIGTERM');
      const exit = await sidecar.exit;
      expect(exit.code).toBe(1);
      const logs = sidecar.logs();
      const request = logs.filter((l) => l.msg === 'request');
      expect(request.map((l) => l.outcome)).toEqual(['shutdown']);
      expect(logs.find((l) => String(l.msg).startsWith('second signal'))?.cut_requests).toBe(1);
    } finally {
      sidecar.stop();
    }
  }, 30_000);

  it('a request followed by the client half-closing is answered, then the connection closes', async () => {
    const sidecar = await startSidecarProcess(simulator.url);
    try {
      const { port } = new URL(sidecar.proxy);
      const socket = net.connect({ host: '127.0.0.1', port: Number(port), allowHalfOpen: true });
      let text = '';
      socket.on('data', (c: Buffer) => (text += c.toString('latin1')));
      const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
      await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
      // FIN right after the request: it has sent all it will, and waits for the answer.
      socket.end(chat('x-sim-output-tokens: 5\r\nx-sim-ttft-ms: 300\r\n'));
      await Promise.race([closed, sleep(10_000)]);
      expect(text).toMatch(/^HTTP\/1\.1 100 Continue\r\n\r\n/);
      expect(text).toContain('HTTP/1.1 200 OK\r\n');
      expect(text).toContain('data: [DONE]');
      const line = await eventually('its request line', () => sidecar.logs().find((l) => l.msg === 'request'), (l) => l !== undefined);
      expect(line?.outcome).toBe('completed');
    } finally {
      sidecar.stop();
    }
  }, 30_000);

  it('a client that closes before its answer begins is still noticed at once (the 1xx probe meets its reset)', async () => {
    const sidecar = await startSidecarProcess(simulator.url);
    try {
      const client = await RawClient.connect(sidecar.proxy);
      const closedAt: number[] = [];
      simulator.events.once('request-closed', (event) => closedAt.push(event.atMs));
      client.write(chat('x-sim-ttft-ms: 5000\r\n'));
      await eventually('the request upstream', () => simulator.stats().inFlight, (n) => n === 1);
      const leftMs = performance.now();
      client.close();
      await eventually('the upstream request to end', () => closedAt.length, (n) => n === 1, 5_000);
      expect((closedAt[0] as number) - leftMs).toBeLessThan(1_000);
      const line = await eventually('its request line', () => sidecar.logs().find((l) => l.msg === 'request'), (l) => l !== undefined);
      expect(line?.outcome).toBe('client_cancelled');
    } finally {
      sidecar.stop();
    }
  }, 30_000);

  it('a flood of /readyz sends at most one health request a second to the upstream', async () => {
    const upstream = await startRawUpstream((_request, socket) => socket.end('HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n'));
    const sidecar = await startSidecarProcess(upstream.url);
    try {
      const startedMs = performance.now();
      const statuses: number[] = [];
      for (let round = 0; round < 10; round++) {
        statuses.push(...(await Promise.all(Array.from({ length: 20 }, () => fetch(`${sidecar.admin}/readyz`).then((r) => r.status)))));
        await sleep(100);
      }
      const elapsedS = (performance.now() - startedMs) / 1000;
      expect(statuses).toEqual(Array.from({ length: 200 }, () => 200));
      const probes = upstream.seen.filter((r) => r.target === '/health').length;
      expect(probes).toBeGreaterThanOrEqual(1);
      expect(probes).toBeLessThanOrEqual(Math.ceil(elapsedS) + 1);
    } finally {
      sidecar.stop();
      await upstream.close();
    }
  }, 30_000);
});
