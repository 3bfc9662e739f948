import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type RunningSimulator } from '../../../src/simulator/server.js';
import { RawClient } from '../../helpers/raw-http.js';
import { eventually } from '../../helpers/sidecar.js';
import { limitCount, metricSum, rssMiB, sleep, startSidecarProcess, witnessStream } from './harness.js';

const CHAT = '/v1/chat/completions';

function head(length: number, extra = ''): string {
  return `POST ${CHAT} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\n${extra}\r\n`;
}

/** A JSON chat body of about `bytes` bytes. */
function chatBody(bytes: number): Buffer {
  const start = '{"model":"sim-model","stream":true,"messages":[{"role":"user","content":"';
  const end = '"}]}';
  return Buffer.from(start + 'x'.repeat(Math.max(0, bytes - start.length - end.length)) + end);
}

describe('request bodies: read time and bytes held', () => {
  let simulator: RunningSimulator;
  beforeAll(async () => {
    simulator = await startSimulator({ port: 0, ttftMs: 5, itlMs: 5, outputTokens: 4 });
  });
  afterAll(async () => {
    await simulator.close();
  });

  it('cuts a body that stops arriving with 408 (client_error), but not an upload that is still sending', async () => {
    const sidecar = await startSidecarProcess(simulator.url, { config: 'upstream_idle_timeout: 400ms\nlimits:\n  request_body_idle_timeout: 400ms\n' });
    try {
      const body = chatBody(200);
      const stalled = await RawClient.connect(sidecar.proxy);
      stalled.write(head(body.length));
      stalled.write(body.subarray(0, 50));
      const startedMs = performance.now();
      const answer = await stalled.readToClose(5_000);
      const tookMs = performance.now() - startedMs;
      expect(answer).toMatch(/^HTTP\/1\.1 408 Request Timeout\r\n/);
      expect(answer).toContain('Connection: close\r\n');
      expect(answer).toContain('limits.request_body_idle_timeout');
      expect(tookMs).toBeGreaterThanOrEqual(400);
      expect(tookMs).toBeLessThan(3_000);

      // 40 pieces 50 ms apart: 2 s in all, far past both timeouts, but never silent for long.
      const slow = await RawClient.connect(sidecar.proxy);
      const big = chatBody(4_000);
      slow.write(head(big.length));
      for (let i = 0; i < 40; i++) {
        slow.write(big.subarray(i * 100, (i + 1) * 100));
        await sleep(50);
      }
      const answered = await slow.read((text) => text.includes('data: [DONE]'), 5_000);
      expect(answered).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
      slow.close();

      const lines = await eventually('both request lines', () => sidecar.logs().filter((l) => l.msg === 'request'), (l) => l.length === 2);
      expect(lines.map((l) => [l.outcome, l.status])).toEqual([
        ['client_error', 408],
        ['completed', 200],
      ]);
      expect(await limitCount(sidecar.admin, 'request_body_idle_timeout')).toBe(1);
      // The 408 burns no SLO: it is the client's fault.
      expect(await metricSum(sidecar.admin, 'tokentap_requests_total', { outcome: 'client_error', http_status_class: '4xx' })).toBe(1);
    } finally {
      sidecar.stop();
    }
  }, 30_000);

  it('blames a stalled request body on the client, not the upstream, even when upstream_idle_timeout is shorter', async () => {
    // The upstream waits for the rest of the body, so its silence is the client's: a 504 `timeout`
    // here would burn the SLO for any client that stops mid-body.
    const sidecar = await startSidecarProcess(simulator.url, { config: 'upstream_idle_timeout: 200ms\nlimits:\n  request_body_idle_timeout: 800ms\n' });
    try {
      const body = chatBody(200);
      const stalled = await RawClient.connect(sidecar.proxy);
      stalled.write(head(body.length));
      stalled.write(body.subarray(0, 50));
      const answer = await stalled.readToClose(5_000);
      expect(answer).toMatch(/^HTTP\/1\.1 408 Request Timeout\r\n/);
      const [line] = await eventually('the request line', () => sidecar.logs().filter((l) => l.msg === 'request'), (l) => l.length === 1);
      expect([line?.outcome, line?.status]).toEqual(['client_error', 408]);
    } finally {
      sidecar.stop();
    }
  }, 30_000);

  it('cuts a request head that stops arriving after request_head_timeout (408, counted)', async () => {
    const sidecar = await startSidecarProcess(simulator.url, { config: 'limits:\n  request_head_timeout: 300ms\n' });
    try {
      const client = await RawClient.connect(sidecar.proxy);
      client.write(`POST ${CHAT} HTTP/1.1\r\nHost: x\r\n`);
      expect(await client.readToClose(5_000)).toMatch(/^HTTP\/1\.1 408 Request Timeout\r\n/);
      expect(await limitCount(sidecar.admin, 'request_head_timeout')).toBe(1);
    } finally {
      sidecar.stop();
    }
  }, 30_000);

  for (const injectUsage of [false, true]) {
    it(`300 connections each sending half a 1 MiB JSON body stay within the held-bytes budget${injectUsage ? ' (inject_usage)' : ''}`, async () => {
      const sidecar = await startSidecarProcess(simulator.url, { config: `inject_usage: ${injectUsage}\nlimits:\n  held_body_bytes: 33554432\n` });
      const sockets: net.Socket[] = [];
      try {
        // Warm-up: the first requests grow the heap once (code, parser, pools).
        for (let i = 0; i < 3; i++) await witnessStream(sidecar.proxy, 5, 5);
        const before = rssMiB(sidecar.pid);
        const body = chatBody(1 << 20);
        const half = body.subarray(0, body.length >> 1);
        const { port } = new URL(sidecar.proxy);
        for (let i = 0; i < 300; i++) {
          const socket = net.connect({ host: '127.0.0.1', port: Number(port) });
          socket.on('error', () => {});
          sockets.push(socket);
          socket.write(head(body.length));
          socket.write(half);
        }
        await Promise.all(sockets.map((s) => new Promise<void>((resolve) => (s.writableLength === 0 ? resolve() : s.once('drain', () => resolve())))));
        // Written; a second for the sidecar to read them all (the upstream waits for the rest of each).
        await sleep(1_000);
        const witness = await witnessStream(sidecar.proxy);
        const after = rssMiB(sidecar.pid);
        const grewMiB = after - before;
        process.stdout.write(`held bodies${injectUsage ? ' (inject_usage)' : ''}: RSS ${before.toFixed(0)} -> ${after.toFixed(0)} MiB, witness max gap ${witness.maxGapMs.toFixed(0)} ms\n`);
        // Before the budget: +310 MiB (+510 with inject_usage) for the same load (issue 13). Now the
        // held bytes stop at 32 MiB; the rest is socket and parser memory per connection.
        expect(grewMiB).toBeLessThan(150);
        expect(await limitCount(sidecar.admin, 'held_body_bytes')).toBeGreaterThan(0);
        expect(witness.body).toContain('data: [DONE]');
        expect(witness.maxGapMs).toBeLessThan(1_000);
      } finally {
        for (const socket of sockets) socket.destroy();
        sidecar.stop();
      }
    }, 60_000);
  }
});
