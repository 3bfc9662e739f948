import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type RunningSimulator } from '../../../src/simulator/server.js';
import { limitCount, rssMiB, startSidecarProcess } from './harness.js';

/** `count` requests for /v1/models, `concurrency` at a time on keep-alive connections; resolves with the statuses seen. */
async function requests(proxy: string, count: number, concurrency: number): Promise<Map<number, number>> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
  const statuses = new Map<number, number>();
  let next = 0;
  const one = (): Promise<void> =>
    new Promise((resolve, reject) => {
      http
        .get(new URL('/v1/models', proxy), { agent }, (response) => {
          response.resume();
          response.on('end', () => {
            statuses.set(response.statusCode ?? 0, (statuses.get(response.statusCode ?? 0) ?? 0) + 1);
            resolve();
          });
        })
        .on('error', reject);
    });
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next++ < count) await one();
    }),
  );
  agent.destroy();
  return statuses;
}

describe('limits.log_buffer_bytes: log lines held when stdout does not drain', () => {
  let simulator: RunningSimulator;
  beforeAll(async () => {
    simulator = await startSimulator({ port: 0 });
  });
  afterAll(async () => {
    await simulator.close();
  });

  it('drops and counts request lines past the cap when nobody reads stdout; every request is still answered', async () => {
    // stdout is a pipe the test never reads: it fills at the pipe's 64 KiB, then lines wait in the logger.
    const sidecar = await startSidecarProcess(simulator.url, { readStdout: false, config: 'limits:\n  log_buffer_bytes: 262144\n' });
    try {
      await requests(sidecar.proxy, 200, 8);
      const beforeRss = rssMiB(sidecar.pid);
      // 8,000 request lines of about 350 bytes: 2.8 MB of log that cannot go anywhere.
      const statuses = await requests(sidecar.proxy, 8_000, 16);
      const grewMiB = rssMiB(sidecar.pid) - beforeRss;
      const dropped = await limitCount(sidecar.admin, 'log_buffer_bytes');
      process.stdout.write(`unread stdout: ${dropped} of 8,200 lines dropped, RSS +${grewMiB.toFixed(1)} MiB\n`);
      expect(statuses).toEqual(new Map([[200, 8_000]]));
      // At most 256 KiB wait (about 750 lines) plus what the pipe took: the rest is dropped and counted.
      expect(dropped).toBeGreaterThan(6_000);
      expect(grewMiB).toBeLessThan(60);
    } finally {
      sidecar.stop();
    }
  }, 120_000);
});
