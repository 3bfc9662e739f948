import type net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { probeUpstream } from '../../src/admin/admin-server.js';
import { startRawUpstream } from '../helpers/raw-http.js';
import { eventually, startTestSidecar } from '../helpers/sidecar.js';

/**
 * The readiness probe (/readyz, the status page) against an upstream that is broken or hostile:
 * kubelet gives /readyz 1 s by default (timeoutSeconds), and every probe's connection must end.
 */

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function rawUpstream(respond: (socket: net.Socket) => void) {
  const upstream = await startRawUpstream((_request, socket) => respond(socket));
  cleanups.push(() => upstream.close());
  return upstream;
}

/** Writes `text` one byte every `everyMs` (never finishing within a test for a long text). */
function drip(socket: net.Socket, text: string, everyMs: number): void {
  let sent = 0;
  const timer = setInterval(() => {
    if (socket.destroyed || sent >= text.length) return clearInterval(timer);
    socket.write(text[sent++]!);
  }, everyMs);
  cleanups.push(() => clearInterval(timer));
}

/** Writes chunks of a chunked body until the socket closes. */
function endlessChunkedBody(socket: net.Socket, status: string): void {
  socket.write(`HTTP/1.1 ${status}\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n`);
  const chunk = `4000\r\n${'x'.repeat(0x4000)}\r\n`;
  const timer = setInterval(() => {
    if (socket.destroyed) return clearInterval(timer);
    socket.write(chunk);
  }, 5);
  cleanups.push(() => clearInterval(timer));
}

describe('readiness probe against a hostile upstream', () => {
  it('answers not ready when the upstream drips its status line a byte every 300 ms: the socket idle timeout alone never fired', async () => {
    // 60 bytes at 300 ms: 18 s to a whole head, far past kubelet's 1 s.
    const dripping = await rawUpstream((socket) => drip(socket, 'HTTP/1.1 200 OK\r\nContent-Length: 0\r\nX-Slow: aaaaaaaaaaaaaaaaa\r\n\r\n', 300));
    const startedMs = performance.now();
    const answer = await Promise.race([probeUpstream(new URL('/health', dripping.url)), new Promise((resolve) => setTimeout(() => resolve('still waiting after 6 s'), 6_000))]);
    expect(answer).toEqual({ ready: false, detail: 'no answer within 800 ms' });
    // Well before the drip could finish (18 s); the deadline is 800 ms.
    expect(performance.now() - startedMs).toBeLessThan(6_000);
    await eventually('the probe connection closed', () => dripping.openSockets().length, (open) => open === 0);
  }, 20_000);

  it('closes the connection once it has the status of a 200 whose body never ends (it read the endless body for as long as the upstream sent it)', async () => {
    const endless = await rawUpstream((socket) => endlessChunkedBody(socket, '200 OK'));
    expect(await probeUpstream(new URL('/health', endless.url))).toEqual({ ready: true, detail: 'HTTP 200' });
    await eventually('the probe connection closed', () => endless.openSockets().length, (open) => open === 0, 5_000);
  }, 20_000);

  it('serves /status.json with the upstream not ready while the upstream drips its head (the page waited for the probe for good)', async () => {
    const upstream = await rawUpstream((socket) => drip(socket, 'HTTP/1.1 200 OK\r\nContent-Length: 0\r\nX-Slow: aaaaaaaaaaaaaaaaa\r\n\r\n', 300));
    const sidecar = await startTestSidecar(upstream.url);
    cleanups.push(() => sidecar.close());
    const response = await fetch(`${sidecar.adminUrl}/status.json`, { signal: AbortSignal.timeout(6_000) });
    expect(response.status).toBe(200);
    expect(((await response.json()) as { upstream: unknown }).upstream).toMatchObject({ ready: false, detail: 'no answer within 800 ms' });
  }, 20_000);

  it('answers every one of 50 concurrent /readyz calls within a few seconds while the upstream drips its head, and again once it recovers', async () => {
    let hostile = true;
    const upstream = await rawUpstream((socket) => (hostile ? drip(socket, 'HTTP/1.1 200 OK\r\nContent-Length: 0\r\nX-Slow: aaaaaaaaaaaaaaaaa\r\n\r\n', 300) : socket.end('HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n')));
    const sidecar = await startTestSidecar(upstream.url);
    cleanups.push(() => sidecar.close());
    const readyz = () => fetch(`${sidecar.adminUrl}/readyz`, { signal: AbortSignal.timeout(6_000) }).then(async (r) => ({ status: r.status, body: (await r.json()) as unknown }));
    const answers = await Promise.all(Array.from({ length: 50 }, readyz));
    expect(answers).toEqual(Array.from({ length: 50 }, () => ({ status: 503, body: { status: 'not ready', upstream: 'no answer within 800 ms' } })));
    // The calls shared one probe: one health request to the upstream, not 50.
    expect(upstream.seen.length).toBe(1);
    hostile = false;
    await eventually('ready again once the upstream answers', () => readyz().then((a) => a.status), (status) => status === 200, 10_000);
  }, 30_000);
});
