import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type RequestClosedEvent, type RunningSimulator } from '../../../src/simulator/server.js';
import { RawClient, responseHeads } from '../../helpers/raw-http.js';
import { eventually } from '../../helpers/sidecar.js';
import { limitCount, metricSum, startSidecarProcess } from './harness.js';

function chat(extra = ''): string {
  const body = JSON.stringify({ model: 'sim-model', stream: true, messages: [{ role: 'user', content: 'hi' }] });
  return `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n${extra}\r\n${body}`;
}

describe('limits.pipelined_requests: requests queued on one connection', () => {
  let simulator: RunningSimulator;
  const closed: RequestClosedEvent[] = [];
  beforeAll(async () => {
    simulator = await startSimulator({ port: 0, ttftMs: 5, itlMs: 5, outputTokens: 3 });
    simulator.events.on('request-closed', (event) => closed.push(event));
  });
  afterAll(async () => {
    await simulator.close();
  });

  it('answers the queued requests in order, then a 503 for the one past the limit, and closes', async () => {
    const sidecar = await startSidecarProcess(simulator.url, { config: 'limits:\n  pipelined_requests: 4\n' });
    try {
      const client = await RawClient.connect(sidecar.proxy);
      // One write: every head is parsed before the first answer comes back.
      client.write(Array.from({ length: 10 }, () => chat()).join(''));
      const text = await client.readToClose(10_000);
      // One in flight and 4 queued are answered; the 6th is refused and nothing after it is read.
      expect(responseHeads(text)).toEqual([...Array.from({ length: 5 }, () => 'HTTP/1.1 200 OK'), 'HTTP/1.1 503 Service Unavailable']);
      expect(text.split('data: [DONE]').length - 1).toBe(5);
      expect(text).toContain('limits.pipelined_requests');
      expect(await limitCount(sidecar.admin, 'pipelined_requests')).toBe(1);
      expect(await metricSum(sidecar.admin, 'tokentap_requests_total')).toBe(5);
    } finally {
      sidecar.stop();
    }
  }, 30_000);

  it('holds queued request bodies within the held-bytes budget: reading waits, every request is answered', async () => {
    const sidecar = await startSidecarProcess(simulator.url, { config: 'limits:\n  held_body_bytes: 65536\n' });
    try {
      const content = 'x'.repeat(200_000);
      const body = JSON.stringify({ model: 'sim-model', stream: true, messages: [{ role: 'user', content }] });
      const request = `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
      const client = await RawClient.connect(sidecar.proxy);
      client.write(Array.from({ length: 6 }, () => request).join(''));
      const text = await client.read((t) => t.split('data: [DONE]').length - 1 === 6, 20_000);
      expect(responseHeads(text)).toEqual(Array.from({ length: 6 }, () => 'HTTP/1.1 200 OK'));
      // 200 KB bodies against a 64 KiB budget: the sniffer lets go of them (model unknown) and the queued
      // ones make the connection wait instead of holding more; nothing is lost.
      expect(await limitCount(sidecar.admin, 'held_body_bytes')).toBeGreaterThan(0);
      client.close();
    } finally {
      sidecar.stop();
    }
  }, 30_000);

  it('notices a client that pipelines and leaves: the upstream is stopped at once, each queued request counted once', async () => {
    const sidecar = await startSidecarProcess(simulator.url);
    try {
      closed.length = 0;
      const client = await RawClient.connect(sidecar.proxy);
      // 300 streams whose first token takes 3 s (75 KB of heads, past what a socket buffers unread):
      // nothing is written to the client before it leaves, so only reading the connection notices it.
      client.write(Array.from({ length: 300 }, () => chat('x-sim-output-tokens: 100\r\nx-sim-itl-ms: 50\r\nx-sim-ttft-ms: 3000\r\n')).join(''));
      // The one in flight and the 16 queued (limits.pipelined_requests' default); the rest are not taken.
      await eventually('17 requests in flight', () => metricSum(sidecar.admin, 'tokentap_requests_in_flight'), (n) => n === 17);
      await eventually('the first request upstream', () => simulator.stats().inFlight, (n) => n === 1);
      const leftMs = performance.now();
      client.close();
      const upstreamEnd = (await eventually('the upstream stream to end', () => closed[0], (event) => event !== undefined, 5_000)) as RequestClosedEvent;
      expect(upstreamEnd.end).toBe('client-closed');
      // Before: the upstream went on generating 7 s after the client left (issue 13).
      expect(upstreamEnd.atMs - leftMs).toBeLessThan(1_000);
      await eventually('nothing in flight', () => metricSum(sidecar.admin, 'tokentap_requests_in_flight'), (n) => n === 0);
      // The one in flight and the 16 queued: each recorded once, as the client's cancellation.
      expect(await metricSum(sidecar.admin, 'tokentap_requests_total')).toBe(17);
      expect(await metricSum(sidecar.admin, 'tokentap_requests_total', { outcome: 'client_cancelled' })).toBe(17);
      expect(await limitCount(sidecar.admin, 'pipelined_requests')).toBe(1);
      expect(closed.length).toBe(1);
      const lines = await eventually('17 request lines', () => sidecar.logs().filter((l) => l.msg === 'request'), (l) => l.length === 17);
      expect(new Set(lines.map((l) => l.outcome))).toEqual(new Set(['client_cancelled']));
    } finally {
      sidecar.stop();
    }
  }, 30_000);
});
