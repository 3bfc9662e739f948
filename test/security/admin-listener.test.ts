import net from 'node:net';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ADMIN_LIMITS } from '../../src/admin/admin-limits.js';
import { createAdminServer } from '../../src/admin/admin-server.js';
import { LimitCounters } from '../../src/metrics/limit-counters.js';
import { systemClock } from '../../src/clock/clock.js';
import { ProfileStore } from '../../src/profile/profile-store.js';
import { Telemetry } from '../../src/metrics/telemetry.js';

/**
 * The admin listener as a hostile client meets it (admin-limits.ts; found by a hostile review:
 * silent connections took every descriptor, request bodies were held, pipelined scrapes ran the
 * heap out of memory). Each case sends raw bytes on loopback and reads what comes back.
 */

const stops: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  vi.restoreAllMocks();
  for (const stop of stops.splice(0)) await stop();
});

async function start(allowedHosts?: readonly string[]): Promise<{ app: FastifyInstance; port: number; telemetry: Telemetry; counters: LimitCounters }> {
  const telemetry = new Telemetry();
  const counters = new LimitCounters();
  const app = createAdminServer({ telemetry, upstream: new URL('http://127.0.0.1:9/'), upstreamHealthPath: '/health', limitCounters: counters, allowedHosts });
  await app.listen({ host: '127.0.0.1', port: 0 });
  stops.push(async () => {
    await app.close();
    await telemetry.shutdown();
  });
  return { app, port: (app.server.address() as AddressInfo).port, telemetry, counters };
}

/** Sends `payload` on a fresh connection; resolves with what came back once the server closes it, or after `waitMs` (then closes it). */
function exchangeRaw(port: number, payload: string, waitMs = 1_000): Promise<{ text: string; closedByServer: boolean; atMs: number }> {
  const startedMs = performance.now();
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    let text = '';
    let done = false;
    const finish = (closedByServer: boolean): void => {
      if (done) return;
      done = true;
      resolve({ text, closedByServer, atMs: performance.now() - startedMs });
      socket.destroy();
    };
    socket.on('data', (data) => (text += data.toString('latin1')));
    socket.on('close', () => finish(true));
    socket.on('error', () => undefined);
    socket.write(payload);
    setTimeout(() => finish(false), waitMs);
  });
}

const GET_HEALTHZ = 'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n';

/**
 * How long an exchange the server should close waits for it; it ends at the close, so only a
 * failing test waits it out. A loaded CI machine took over a second to close a connection that
 * pipelined 1,500 requests (the 1 s default of exchangeRaw, which a test expecting no close waits).
 */
const CLOSE_WAIT_MS = 10_000;

describe('the admin listener', () => {
  it('refuses a request body unread, 413, and closes the connection: a POST promising 100 kB, a GET with a body', async () => {
    const { port, counters } = await start();
    const post = await exchangeRaw(port, 'POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"a":', CLOSE_WAIT_MS);
    expect(post.text.split('\r\n')[0]).toBe('HTTP/1.1 413 Payload Too Large');
    expect(post.closedByServer).toBe(true);
    const chunked = await exchangeRaw(port, 'GET /metrics HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel', CLOSE_WAIT_MS);
    expect(chunked.text.split('\r\n')[0]).toBe('HTTP/1.1 413 Payload Too Large');
    expect(chunked.closedByServer).toBe(true);
    const put = await exchangeRaw(port, 'DELETE /metrics HTTP/1.1\r\nHost: x\r\n\r\n');
    expect(put.text.split('\r\n')[0]).toBe('HTTP/1.1 405 Method Not Allowed');
    expect(put.text).toMatch(/\r\nallow: GET, HEAD\r\n/i);
    expect(counters.count('admin_request_refused')).toBe(3);
  });

  it('marks every answer nosniff and no-store, a 404 and the refusals included: no browser reads a JSON or text answer carrying names from traffic as a page, nor keeps a figure', async () => {
    const { port } = await start();
    for (const path of ['/metrics', '/healthz', '/readyz', '/no-such-route']) {
      const response = await fetch(`http://127.0.0.1:${port}${path}`);
      await response.arrayBuffer();
      expect(response.headers.get('x-content-type-options'), path).toBe('nosniff');
      // Figures of the moment: /metrics, /readyz and a 404 had no cache-control at all.
      expect(response.headers.get('cache-control'), path).toBe('no-store');
      expect(response.headers.get('content-type'), path).toMatch(/^(text\/plain|application\/json); /);
    }
    for (const refused of ['DELETE /metrics HTTP/1.1\r\nHost: x\r\n\r\n', 'GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello']) {
      const { text } = await exchangeRaw(port, refused);
      expect(text, refused).toMatch(/^HTTP\/1\.1 4(05|13) /);
      expect(text, refused).toMatch(/\r\nx-content-type-options: nosniff\r\n/i);
    }
  });

  it(`answers ${ADMIN_LIMITS.maxPendingPerConnection} pipelined requests and closes a connection that pipelines more, counted once`, async () => {
    const { port, counters } = await start();
    const within = await exchangeRaw(port, GET_HEALTHZ.repeat(ADMIN_LIMITS.maxPendingPerConnection));
    expect(within.text.match(/HTTP\/1\.1 200 OK/g)).toHaveLength(ADMIN_LIMITS.maxPendingPerConnection);
    expect(within.closedByServer).toBe(false);
    const flood = await exchangeRaw(port, 'GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n'.repeat(1_500), CLOSE_WAIT_MS);
    expect(flood.closedByServer).toBe(true);
    expect(counters.count('admin_pipelined_requests')).toBe(1);
  });

  /** telemetry.scrape() replaced by one that takes `ms` and answers `scrape N`. */
  function slowScrape(telemetry: Telemetry, ms: number) {
    let made = 0;
    return vi.spyOn(telemetry, 'scrape').mockImplementation(async () => {
      const n = made++;
      await new Promise((resolve) => setTimeout(resolve, ms));
      return `scrape ${n}\n`;
    });
  }
  const get = (port: number) => fetch(`http://127.0.0.1:${port}/metrics`).then((r) => r.text());

  it('computes one scrape for requests that come while it is being computed', async () => {
    const { port, telemetry } = await start();
    // A scrape that takes 300 ms (a large exposition): every request in that time shares it.
    const scrape = slowScrape(telemetry, 300);
    const answers = await Promise.all(Array.from({ length: 20 }, () => get(port)));
    expect(new Set(answers)).toEqual(new Set(['scrape 0\n']));
    expect(scrape).toHaveBeenCalledTimes(1);
  });

  it('starts the next scrape no sooner than four times what the last one took after it, and answers it fresh', async () => {
    const { port, telemetry } = await start();
    const scrape = slowScrape(telemetry, 100);
    expect(await get(port)).toBe('scrape 0\n');
    const doneMs = performance.now();
    // A client asking again at once: the next scrape waits out 4 x 100 ms, then is computed anew.
    expect(await get(port)).toBe('scrape 1\n');
    expect(performance.now() - doneMs).toBeGreaterThanOrEqual(4 * 100 + 100 - 20);
    expect(scrape).toHaveBeenCalledTimes(2);
  });

  /** `count` connections to `port`, each connected and, when `head` is given, having sent it. */
  async function holdConnections(port: number, count: number, head = ''): Promise<net.Socket[]> {
    const held: net.Socket[] = [];
    for (let i = 0; i < count; i++) {
      const socket = net.connect(port, '127.0.0.1');
      socket.on('error', () => undefined);
      await new Promise((resolve) => socket.once('connect', resolve));
      if (head !== '') socket.write(head);
      held.push(socket);
    }
    // Give the server time to accept them all (and parse the heads) before the one past the cap.
    await new Promise((resolve) => setTimeout(resolve, 300));
    return held;
  }
  const closedCount = (sockets: readonly net.Socket[]) => sockets.filter((socket) => socket.destroyed || socket.readyState === 'closed' || socket.readableEnded).length;

  it(`answers a probe while ${ADMIN_LIMITS.maxConnections} silent or half-sent connections hold every slot: the oldest one not being answered is closed for it, counted (they made every kubelet probe and scrape fail)`, async () => {
    const { port, counters } = await start();
    for (const head of ['', 'GET /metrics HTTP/1.1\r\nHost: x\r\n']) {
      const held = await holdConnections(port, ADMIN_LIMITS.maxConnections, head);
      try {
        const tripped = counters.count('admin_connections');
        const probe = await exchangeRaw(port, 'GET /healthz HTTP/1.1\r\nHost: 10.0.0.1:9464\r\nConnection: close\r\n\r\n');
        expect(probe.text.split('\r\n')[0], JSON.stringify(head)).toBe('HTTP/1.1 200 OK');
        await new Promise((resolve) => setTimeout(resolve, 100));
        // The oldest went, the rest are still open.
        expect(held[0]?.readyState, JSON.stringify(head)).not.toBe('open');
        expect(closedCount(held.slice(1)), JSON.stringify(head)).toBe(0);
        expect(counters.count('admin_connections')).toBe(tripped + 1);
      } finally {
        for (const socket of held) socket.destroy();
      }
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  });

  it(`holds at most ${ADMIN_LIMITS.maxConnections} connections after a burst of 300 silent ones opened at once, each past the cap closing another`, async () => {
    const { app, port } = await start();
    const sockets = Array.from({ length: 300 }, () => {
      const socket = net.connect(port, '127.0.0.1');
      socket.on('error', () => undefined);
      return socket;
    });
    try {
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      const held = await new Promise<number>((resolve) => app.server.getConnections((_error, count) => resolve(count)));
      expect(held).toBeLessThanOrEqual(ADMIN_LIMITS.maxConnections);
    } finally {
      for (const socket of sockets) socket.destroy();
    }
  });

  it(`keeps at most ${ADMIN_LIMITS.maxConnections} connections: past it, with every one being answered, the newcomer is closed as it comes, counted, and served once they go`, async () => {
    const { port, counters, telemetry } = await start();
    // Each held connection waits on a scrape that takes 2 s: being answered, none is closed for a newcomer.
    vi.spyOn(telemetry, 'scrape').mockImplementation(async () => {
      await new Promise((resolve) => setTimeout(resolve, 2_000));
      return 'slow\n';
    });
    const held = await holdConnections(port, ADMIN_LIMITS.maxConnections, 'GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n');
    try {
      const past = await exchangeRaw(port, GET_HEALTHZ, CLOSE_WAIT_MS);
      expect(past.text).toBe('');
      expect(past.closedByServer).toBe(true);
      expect(counters.count('admin_connections')).toBeGreaterThanOrEqual(1);
      expect(closedCount(held)).toBe(0);
    } finally {
      for (const socket of held) socket.destroy();
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect((await exchangeRaw(port, GET_HEALTHZ)).text.split('\r\n')[0]).toBe('HTTP/1.1 200 OK');
  });

  it(`closes, counted, a connection that reads nothing of a large answer for ${ADMIN_LIMITS.sendIdleTimeoutMs / 1000} s (64 such held 64 copies of the exposition for good)`, async () => {
    const { app, port, telemetry, counters } = await start();
    // 32 MiB: more than loopback's socket buffers take, so the answer waits on the client.
    const exposition = `${'x'.repeat(32 * 1024 * 1024 - 1)}\n`;
    vi.spyOn(telemetry, 'scrape').mockResolvedValue(exposition);
    const socket = net.connect(port, '127.0.0.1');
    socket.on('error', () => undefined);
    let received = 0;
    socket.once('data', (data) => {
      received += data.length;
      // A client that stops reading after the first bytes (paused, it also never sees a close).
      socket.pause();
    });
    socket.write('GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n');
    const startedMs = performance.now();
    const serverConnections = () => new Promise<number>((resolve) => app.server.getConnections((_error, count) => resolve(count)));
    let open = 1;
    while (open > 0 && performance.now() - startedMs < ADMIN_LIMITS.sendIdleTimeoutMs + 15_000) {
      await new Promise((resolve) => setTimeout(resolve, 250));
      open = await serverConnections();
    }
    const tookMs = performance.now() - startedMs;
    socket.destroy();
    expect(received).toBeGreaterThan(0);
    expect(open).toBe(0);
    expect(tookMs).toBeGreaterThanOrEqual(ADMIN_LIMITS.sendIdleTimeoutMs - 100);
    expect(counters.count('admin_send_timeout')).toBe(1);
  }, 60_000);

  it('holds one copy of an exposition however many connections read none of it: 16 clients stalled on one 16 MiB scrape held 16 copies and more', async () => {
    const { app, port, telemetry } = await start();
    const size = 16 * 1024 * 1024;
    const exposition = `${'x'.repeat(size - 1)}\n`;
    // Slow enough that all 16 share one computation.
    vi.spyOn(telemetry, 'scrape').mockImplementation(async () => {
      await new Promise((resolve) => setTimeout(resolve, 300));
      return exposition;
    });
    const heldBytes = () => process.memoryUsage().external + process.memoryUsage().arrayBuffers;
    const baseline = heldBytes();
    const sockets = Array.from({ length: 16 }, () => {
      const socket = net.connect(port, '127.0.0.1');
      socket.on('error', () => undefined);
      socket.once('data', () => socket.pause());
      socket.write('GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n');
      return socket;
    });
    try {
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      expect(await new Promise<number>((resolve) => app.server.getConnections((_error, count) => resolve(count)))).toBe(16);
      // Measured: 16 copies and more with the text sent as a string (each connection's write queue
      // encoding its own), about one with a shared Buffer.
      expect((heldBytes() - baseline) / size).toBeLessThan(5);
    } finally {
      for (const socket of sockets) socket.destroy();
    }
  });

  it(`closes a connection whose head is still coming after ${ADMIN_LIMITS.requestTimeoutMs / 1000} s with 408`, async () => {
    const { port } = await start();
    const socket = net.connect(port, '127.0.0.1');
    socket.on('error', () => undefined);
    let text = '';
    socket.on('data', (data) => (text += data.toString('latin1')));
    const startedMs = performance.now();
    socket.write('GET /metrics HTTP/1.1\r\nHost: x\r\n');
    const trickle = setInterval(() => socket.write('X-A: b\r\n'), 500);
    await new Promise((resolve) => socket.once('close', resolve));
    clearInterval(trickle);
    const closedAfterMs = performance.now() - startedMs;
    expect(text.split('\r\n')[0]).toBe('HTTP/1.1 408 Request Timeout');
    expect(closedAfterMs).toBeGreaterThanOrEqual(ADMIN_LIMITS.requestTimeoutMs - 100);
    // Checked every second: well before Node's default 30 s check would notice.
    expect(closedAfterMs).toBeLessThan(ADMIN_LIMITS.requestTimeoutMs + 15_000);
  }, 40_000);

  it(`closes, at shutdown, a connection whose head is still coming, ${ADMIN_LIMITS.closeGraceMs / 1000} s after close() begins (Node checks no timeout once closing)`, async () => {
    const telemetry = new Telemetry();
    const app = createAdminServer({ telemetry, upstream: new URL('http://127.0.0.1:9/'), upstreamHealthPath: '/health' });
    await app.listen({ host: '127.0.0.1', port: 0 });
    const socket = net.connect((app.server.address() as AddressInfo).port, '127.0.0.1');
    socket.on('error', () => undefined);
    await new Promise((resolve) => socket.once('connect', resolve));
    socket.write('GET /metrics HTTP/1.1\r\nHost: x\r\n');
    await new Promise((resolve) => setTimeout(resolve, 100));
    const startedMs = performance.now();
    const closed = await Promise.race([app.close().then(() => 'closed'), new Promise((resolve) => setTimeout(() => resolve('still open'), 15_000))]);
    const tookMs = performance.now() - startedMs;
    socket.destroy();
    await telemetry.shutdown();
    expect(closed).toBe('closed');
    expect(tookMs).toBeGreaterThanOrEqual(ADMIN_LIMITS.closeGraceMs - 100);
  }, 30_000);

  it('answers an unknown route, a path parameter over 100 characters and a bad percent-encoding without echoing the target, nosniff and no-store (Fastify\'s own 414 and 400 had neither header and quoted the path)', async () => {
    const { port } = await start();
    const marker = 'ECHOMARKER';
    const cases = [
      { target: `/no-such-route/${marker}?token=${marker}`, status: 404 },
      { target: `/x/${marker}${'a'.repeat(200)}`, status: 404 },
      { target: `/profile/${marker}${'a'.repeat(200)}`, status: 414 },
      { target: `/profile/${marker}%E0%A4%A`, status: 400 },
    ];
    const telemetry = new Telemetry();
    const counters = new LimitCounters();
    const store = new ProfileStore({ maxRequestsPerWorkload: 10, blockTokens: 16, workloads: ['chat'] }, systemClock);
    const withProfiles = createAdminServer({ telemetry, upstream: new URL('http://127.0.0.1:9/'), upstreamHealthPath: '/health', profiles: { store, limitCounters: counters } });
    await withProfiles.listen({ host: '127.0.0.1', port: 0 });
    stops.push(async () => {
      await withProfiles.close();
      await telemetry.shutdown();
    });
    const profilePort = (withProfiles.server.address() as AddressInfo).port;
    for (const { target, status } of cases) {
      const { text } = await exchangeRaw(target.startsWith('/profile') ? profilePort : port, `GET ${target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
      expect(text.split('\r\n')[0], target).toMatch(new RegExp(`^HTTP/1\\.1 ${status} `));
      expect(text, target).toMatch(/\r\nx-content-type-options: nosniff\r\n/i);
      expect(text, target).toMatch(/\r\ncache-control: no-store\r\n/i);
      expect(text, target).toMatch(/\r\ncontent-type: application\/json; charset=utf-8\r\n/i);
      expect(text, target).not.toContain(marker);
    }
  });

  it('refuses with 421, counted, a request whose Host is a public name: a rebound page (Host rebind.example:9464) reads no /metrics, /healthz or 404', async () => {
    const { port, counters } = await start();
    for (const host of ['rebind.example:9464', 'REBIND.example.', '127.0.0.1.nip.io:9464', 'localhost.evil.example', 'svc.evil.example', 'a.svc.evil.example:9464', '[::1', 'x:y']) {
      for (const path of ['/metrics', '/healthz', '/no-such-route']) {
        const { text } = await exchangeRaw(port, `GET ${path} HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`);
        expect(text.split('\r\n')[0], `${host} ${path}`).toBe('HTTP/1.1 421 Misdirected Request');
        expect(text, `${host} ${path}`).not.toMatch(/tokentap_|"status":"ok"/);
        expect(text, host).toContain('admin_allowed_hosts');
      }
    }
    expect(counters.count('admin_request_refused')).toBe(8 * 3);
  });

  it('refuses with 403, counted, what a page of another site has a browser ask (Sec-Fetch-Site cross-site or same-site), but not a link followed to a page, the page\'s own fetches or a client without Fetch Metadata', async () => {
    const { port, counters } = await start();
    const status = async (headers: string) =>
      (await exchangeRaw(port, `GET /healthz HTTP/1.1\r\nHost: localhost:9464\r\n${headers}Connection: close\r\n\r\n`)).text.split('\r\n')[0];
    expect(await status('Sec-Fetch-Site: cross-site\r\nSec-Fetch-Mode: no-cors\r\nSec-Fetch-Dest: empty\r\n')).toBe('HTTP/1.1 403 Forbidden');
    expect(await status('Sec-Fetch-Site: same-site\r\nSec-Fetch-Mode: cors\r\nSec-Fetch-Dest: empty\r\n')).toBe('HTTP/1.1 403 Forbidden');
    expect(await status('Sec-Fetch-Site: cross-site\r\nSec-Fetch-Mode: no-cors\r\nSec-Fetch-Dest: image\r\n')).toBe('HTTP/1.1 403 Forbidden');
    // A frame is a navigation too, but not to a document of its own: refused (the page also says frame-ancestors 'none').
    expect(await status('Sec-Fetch-Site: cross-site\r\nSec-Fetch-Mode: navigate\r\nSec-Fetch-Dest: iframe\r\n')).toBe('HTTP/1.1 403 Forbidden');
    expect(counters.count('admin_request_refused')).toBe(4);
    expect(await status('Sec-Fetch-Site: cross-site\r\nSec-Fetch-Mode: navigate\r\nSec-Fetch-Dest: document\r\n')).toBe('HTTP/1.1 200 OK');
    expect(await status('Sec-Fetch-Site: same-origin\r\nSec-Fetch-Mode: cors\r\nSec-Fetch-Dest: empty\r\n')).toBe('HTTP/1.1 200 OK');
    expect(await status('Sec-Fetch-Site: none\r\nSec-Fetch-Mode: navigate\r\nSec-Fetch-Dest: document\r\n')).toBe('HTTP/1.1 200 OK');
    expect(await status('')).toBe('HTTP/1.1 200 OK');
    expect(counters.count('admin_request_refused')).toBe(4);
  });

  it('refuses with 400, counted, a request with two Host lines, whichever comes first (Node kept the first and answered 200)', async () => {
    const { port, counters } = await start();
    for (const hosts of ['Host: x\r\nHost: rebind.example', 'Host: rebind.example\r\nHost: x', 'Host: x\r\nhost: x']) {
      const { text } = await exchangeRaw(port, `GET /healthz HTTP/1.1\r\n${hosts}\r\n\r\n`);
      expect(text.split('\r\n')[0], hosts).toBe('HTTP/1.1 400 Bad Request');
    }
    expect(counters.count('admin_request_refused')).toBe(3);
  });

  it('answers every Host a probe, a scrape or a port-forward sends: pod IPs, localhost, a single label, Service names, and no Host at all (HTTP/1.0)', async () => {
    const { port, counters } = await start();
    const hosts = ['10.244.1.17:9464', '[fd00::17]:9464', '[::1]', 'localhost:9464', '127.0.0.1:9464', 'app.localhost', 'llm-pod:9464', 'tokentap.llm-serving.svc:9464', 'tokentap.llm-serving.svc.cluster.local:9464', 'Gpu-Box.internal.', 'router.home.arpa'];
    for (const host of hosts) {
      const { text } = await exchangeRaw(port, `GET /healthz HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`);
      expect(text.split('\r\n')[0], host).toBe('HTTP/1.1 200 OK');
    }
    const { text } = await exchangeRaw(port, 'GET /healthz HTTP/1.0\r\n\r\n');
    expect(text.split('\r\n')[0]).toBe('HTTP/1.1 200 OK');
    expect(counters.count('admin_request_refused')).toBe(0);
  });

  it('answers the names admin_allowed_hosts lists, exactly or under a .suffix, and no other public name', async () => {
    const { port } = await start(['tokentap.example.com', '.corp.example']);
    const status = async (host: string) => (await exchangeRaw(port, `GET /healthz HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`)).text.split('\r\n')[0];
    expect(await status('tokentap.example.com:443')).toBe('HTTP/1.1 200 OK');
    expect(await status('gpu-1.corp.example')).toBe('HTTP/1.1 200 OK');
    expect(await status('eviltokentap.example.com')).toBe('HTTP/1.1 421 Misdirected Request');
    expect(await status('x.tokentap.example.com')).toBe('HTTP/1.1 421 Misdirected Request');
    expect(await status('corp.example.evil.example')).toBe('HTTP/1.1 421 Misdirected Request');
  });
});
