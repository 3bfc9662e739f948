import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type RunningSimulator } from '../../../src/simulator/server.js';
import { RawClient } from '../../helpers/raw-http.js';
import { eventually } from '../../helpers/sidecar.js';
import { limitCount, sleep, startSidecarProcess, witnessStream } from './harness.js';

/** One streamed request on its own connection; resolves with how it ended. */
function stream(proxy: string, tokens: number, itlMs: number): Promise<'completed' | 'refused' | `status ${number}`> {
  return new Promise((resolve) => {
    const request = http.request(
      new URL('/v1/chat/completions', proxy),
      { method: 'POST', agent: false, headers: { 'content-type': 'application/json', 'x-sim-output-tokens': String(tokens), 'x-sim-itl-ms': String(itlMs), 'x-sim-ttft-ms': '10' } },
      (response) => {
        let body = '';
        response.on('data', (c: Buffer) => (body += c.toString('utf8')));
        response.on('end', () => resolve(response.statusCode !== 200 ? `status ${response.statusCode as number}` : body.includes('data: [DONE]') ? 'completed' : 'refused'));
        response.on('error', () => resolve('refused'));
      },
    );
    request.on('error', () => resolve('refused'));
    request.end(JSON.stringify({ model: 'sim-model', stream: true, messages: [{ role: 'user', content: 'hi' }] }));
  });
}

describe('limits.max_connections: connections open at once', () => {
  let simulator: RunningSimulator;
  beforeAll(async () => {
    simulator = await startSimulator({ port: 0 });
  });
  afterAll(async () => {
    await simulator.close();
  });

  it('closes connections beyond the limit at once, unread, while the streams already open go on', async () => {
    const sidecar = await startSidecarProcess(simulator.url, { config: 'limits:\n  max_connections: 8\n' });
    try {
      const open = Array.from({ length: 8 }, () => stream(sidecar.proxy, 30, 50));
      // Every one of the 8 has reached the upstream before the extra connections come.
      const deadline = performance.now() + 10_000;
      while (simulator.stats().inFlight < 8 && performance.now() < deadline) await sleep(20);
      expect(simulator.stats().inFlight).toBe(8);
      const extra = await Promise.all(Array.from({ length: 20 }, () => RawClient.connect(sidecar.proxy)));
      for (const client of extra) client.write('GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n');
      const answers = await Promise.all(extra.map((client) => client.readToClose(5_000)));
      // Closed without a byte: nothing of the request was read, so a client may retry it anywhere.
      expect(answers).toEqual(Array.from({ length: 20 }, () => ''));
      expect(await Promise.all(open)).toEqual(Array.from({ length: 8 }, () => 'completed'));
      expect(await limitCount(sidecar.admin, 'connections')).toBe(20);
      // Below the limit again: served.
      expect(await stream(sidecar.proxy, 3, 1)).toBe('completed');
    } finally {
      sidecar.stop();
    }
  }, 30_000);

  it('under ulimit -n 256 the default limit (from the fd limit) keeps /healthz answering and the admitted streams whole', async () => {
    const sidecar = await startSidecarProcess(simulator.url, { fdLimit: 256 });
    try {
      // (256 - 128 reserved) / 2 = 64 connections; 120 streams of 1.5 s arrive at once.
      const streams = Array.from({ length: 120 }, () => stream(sidecar.proxy, 30, 50));
      await sleep(300);
      const health = await Promise.all(Array.from({ length: 5 }, () => fetch(`${sidecar.admin}/healthz`).then((r) => r.status, (e: Error) => e.message)));
      const witness = await witnessStream(sidecar.proxy).then(
        () => 'served',
        () => 'refused',
      );
      const ends = await Promise.all(streams);
      const completed = ends.filter((e) => e === 'completed').length;
      const refused = ends.filter((e) => e === 'refused').length;
      expect(health).toEqual([200, 200, 200, 200, 200]);
      // Every stream was either served whole or refused before anything was read: none broken halfway.
      expect(completed + refused).toBe(120);
      expect(completed).toBeGreaterThanOrEqual(64);
      expect(await limitCount(sidecar.admin, 'connections')).toBe(refused + (witness === 'refused' ? 1 : 0));
      expect(await limitCount(sidecar.admin, 'fds')).toBe(0);
    } finally {
      sidecar.stop();
    }
  }, 60_000);

  it('out of file descriptors (a limit set above ulimit -n), it counts, survives, and serves once they are free', async () => {
    const sidecar = await startSidecarProcess(simulator.url, { fdLimit: 256, config: 'limits:\n  max_connections: 10000\n' });
    const idle: RawClient[] = [];
    try {
      // Streams take two descriptors each: past ulimit -n the upstream connections fail (a 502
      // each, counted as fds) and the sidecar goes on.
      const ends = await Promise.all(Array.from({ length: 300 }, () => stream(sidecar.proxy, 20, 50)));
      const failed = ends.filter((e) => e !== 'completed').length;
      expect(failed).toBeGreaterThan(0);
      expect(ends.filter((e) => e === 'completed').length).toBeGreaterThan(0);
      expect(await limitCount(sidecar.admin, 'fds')).toBe(ends.filter((e) => e === 'status 502').length);
      // Idle connections hold one descriptor each: accept() itself runs out, and libuv closes the
      // ones it cannot take with its reserved descriptor (uv__emfile_trick); the process goes on.
      for (let i = 0; i < 300; i++) idle.push(await RawClient.connect(sidecar.proxy));
      const shed = await eventually('connections closed by the sidecar', () => idle.filter((c) => c.isClosed).length, (n) => n > 0, 10_000);
      expect(shed).toBeGreaterThan(0);
      for (const client of idle) client.close();
      await sleep(300);
      expect(sidecar.child.exitCode).toBe(null);
      expect((await fetch(`${sidecar.admin}/healthz`)).status).toBe(200);
      expect(await stream(sidecar.proxy, 3, 1)).toBe('completed');
    } finally {
      for (const client of idle) client.close();
      sidecar.stop();
    }
  }, 60_000);
});
