import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { createProxyServer } from '../../../src/proxy/proxy-server.js';
import type { MonitorDependencies } from '../../../src/proxy/request-monitor.js';
import { RawClient, startRawUpstream } from '../../helpers/raw-http.js';

/** The client-side timers of the relay, with short settings: keep-alive idle close and the head timeout. */

const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const close of closers.splice(0)) await close();
});

async function relay(options: { clientKeepAliveMs: number; headersTimeoutMs: number }) {
  // The slow path answers after 500 ms in two parts: longer than the keep-alive timeout.
  const upstream = await startRawUpstream((request, socket) => {
    if (request.target === '/slow') {
      socket.write('HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nsl');
      setTimeout(() => socket.write('ow'), 500);
    } else {
      socket.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok');
    }
  });
  // Observation off: these timers belong to the relay, not the monitor.
  const server = createProxyServer({ upstream: new URL(upstream.url), upstreamIdleTimeoutMs: 10_000, observe: false, monitor: {} as MonitorDependencies, ...options });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  closers.push(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
    await upstream.close();
  });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

describe('client connection timers', () => {
  it('closes a keep-alive connection idle for the keep-alive timeout, not one whose response is still coming', async () => {
    const url = await relay({ clientKeepAliveMs: 200, headersTimeoutMs: 10_000 });
    const client = await RawClient.connect(url);
    client.write('GET /slow HTTP/1.1\r\nHost: t\r\n\r\n');
    const answered = await client.read((t) => t.endsWith('slow'));
    expect(answered).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    const idleFrom = performance.now();
    await client.readToClose(3_000);
    const idleMs = performance.now() - idleFrom;
    expect(idleMs).toBeGreaterThanOrEqual(150);
    expect(idleMs).toBeLessThan(2_000);
  });

  it('answers 408 and closes when a request head does not complete in time', async () => {
    const url = await relay({ clientKeepAliveMs: 10_000, headersTimeoutMs: 200 });
    const client = await RawClient.connect(url);
    client.write('GET /ok HTTP/1.1\r\nHost: t\r\n');
    const text = await client.readToClose(3_000);
    expect(text).toMatch(/^HTTP\/1\.1 408 Request Timeout\r\n/);
    expect(text).toContain('tokentap: the request head did not arrive in time');
  });
});
