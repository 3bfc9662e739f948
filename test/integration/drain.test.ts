import http from 'node:http';
import net from 'node:net';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { startOtlpReceiver } from '../helpers/otlp-receiver.js';
import { startServeProcess } from '../helpers/serve-process.js';
import { eventually } from '../helpers/sidecar.js';

/**
 * Graceful drain, end to end: the built CLI in front of the simulator, stopped by real signals.
 * Timing margins are wide (seconds) because the machine is shared; what is asserted is order and
 * outcome, not speed.
 */

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

let simulator: RunningSimulator;
beforeAll(async () => {
  simulator = await startSimulator({ port: 0, ttftMs: 20 });
  return () => simulator.close();
});

const CHAT = JSON.stringify({ model: 'sim-model', stream: true, messages: [{ role: 'user', content: 'drain' }] });

interface Stream {
  /** Resolves at the first body byte. */
  readonly firstChunk: Promise<void>;
  readonly done: Promise<{ body: Buffer; ended: 'clean' | 'error'; atMs: number }>;
  /** Resolves when the underlying socket closes, with performance.now() at that moment. */
  readonly socketClosed: Promise<number>;
}

/** A streamed chat completion; `itlMs` × `tokens` sets its length, `seed` and `id` make its bytes reproducible. */
function stream(baseUrl: string, o: { itlMs: number; tokens: number; seed: number; id: string; agent?: http.Agent }): Stream {
  let firstChunk!: () => void;
  let socketClosed!: (atMs: number) => void;
  const first = new Promise<void>((resolve) => (firstChunk = resolve));
  const closed = new Promise<number>((resolve) => (socketClosed = resolve));
  const done = new Promise<{ body: Buffer; ended: 'clean' | 'error'; atMs: number }>((resolve, reject) => {
    const req = http.request(`${baseUrl}/v1/chat/completions`, {
      method: 'POST',
      agent: o.agent ?? false,
      headers: {
        'content-type': 'application/json',
        'x-sim-itl-ms': String(o.itlMs),
        'x-sim-output-tokens': String(o.tokens),
        'x-sim-seed': String(o.seed),
        // vLLM (and the simulator) name the completion after X-Request-Id, so both runs carry the same id.
        'x-request-id': o.id,
      },
    });
    req.on('socket', (socket) => socket.once('close', () => socketClosed(performance.now())));
    req.on('error', reject);
    req.on('response', (res) => {
      const parts: Buffer[] = [];
      res.on('data', (c: Buffer) => {
        parts.push(c);
        firstChunk();
      });
      let settled = false;
      const finish = (ended: 'clean' | 'error') => {
        if (settled) return;
        settled = true;
        resolve({ body: Buffer.concat(parts), ended, atMs: performance.now() });
      };
      res.on('end', () => finish('clean'));
      res.on('error', () => finish('error'));
      res.on('close', () => finish(res.complete ? 'clean' : 'error'));
    });
    req.end(CHAT);
  });
  return { firstChunk: first, done, socketClosed: closed };
}

/**
 * The simulator stamps `created` with the wall-clock second at request arrival; two runs sent in the
 * first part of a second land in the same one, so their bytes can be compared exactly.
 */
async function startOfASecond(): Promise<void> {
  for (let i = 0; i < 20 && Date.now() % 1000 > 200; i++) await new Promise((r) => setTimeout(r, 1000 - (Date.now() % 1000)));
}

function connectionRefused(url: string): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const socket = net.connect(Number(port), hostname);
    socket.once('connect', () => {
      socket.destroy();
      resolve('connected');
    });
    socket.once('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message));
  });
}

describe('tokentap serve drains on SIGTERM', () => {
  it('fails /readyz, refuses new connections, finishes the in-flight stream byte-identical and exits 0', async () => {
    const serve = await startServeProcess(simulator.url, ['--drain-timeout', '20s']);
    cleanups.push(serve.kill);
    expect((await fetch(`${serve.admin}/readyz`)).status).toBe(200);

    await startOfASecond();
    const direct = stream(simulator.url, { itlMs: 50, tokens: 60, seed: 11, id: 'drain-1' });
    const proxied = stream(serve.proxy, { itlMs: 50, tokens: 60, seed: 11, id: 'drain-1' });
    // A shorter stream on a keep-alive connection: after it ends mid-drain, its idle connection must be closed.
    const agent = new http.Agent({ keepAlive: true });
    cleanups.push(() => agent.destroy());
    const short = stream(serve.proxy, { itlMs: 50, tokens: 10, seed: 12, id: 'drain-2', agent });
    await Promise.all([proxied.firstChunk, short.firstChunk]);

    serve.child.kill('SIGTERM');
    const readyz = await eventually('/readyz to fail', () => fetch(`${serve.admin}/readyz`).then(async (r) => ({ status: r.status, body: (await r.json()) as Record<string, unknown> })), (r) => r.status === 503);
    expect(readyz.body).toMatchObject({ status: 'draining' });
    expect(String(readyz.body.reason)).toContain('SIGTERM');
    expect(await connectionRefused(serve.proxy)).toBe('ECONNREFUSED');
    // /metrics keeps answering during the drain, for a last scrape.
    const scrape = await fetch(`${serve.admin}/metrics`);
    expect(scrape.status).toBe(200);
    expect(await scrape.text()).toContain('tokentap_requests_in_flight');

    const [viaProxy, reference, shortEnd] = await Promise.all([proxied.done, direct.done, short.done]);
    expect(viaProxy.ended).toBe('clean');
    expect(viaProxy.body.toString('utf8')).toContain('data: [DONE]');
    expect(viaProxy.body.equals(reference.body)).toBe(true);
    expect(shortEnd.ended).toBe('clean');
    // The server closed the short stream's keep-alive connection once it went idle, long before
    // Node's 5 s keep-alive timeout and while the long stream was still running.
    const shortSocketClosedAt = await short.socketClosed;
    expect(shortSocketClosedAt).toBeLessThan(viaProxy.atMs);

    const exit = await serve.exit;
    expect(exit.code).toBe(0);
    expect(exit.atMs - viaProxy.atMs).toBeLessThan(10_000);
    const requests = serve.logs().filter((l) => l.msg === 'request');
    expect(requests.map((l) => l.outcome)).toEqual(['completed', 'completed']);
    expect(serve.logs().find((l) => l.msg === 'tokentap drained')).toMatchObject({ drained: true, cut_connections: 0 });
  }, 60_000);

  it('cuts a stream that outlasts drain_timeout, counts it as outcome "shutdown" in the final OTLP export, and exits 0', async () => {
    const receiver = await startOtlpReceiver();
    cleanups.push(() => receiver.close());
    const serve = await startServeProcess(simulator.url, ['--drain-timeout', '1s'], {
      OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: `${receiver.url}/v1/metrics`,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      // Far beyond the test: the only export is the final one made at shutdown.
      OTEL_METRIC_EXPORT_INTERVAL: '600000',
    });
    cleanups.push(serve.kill);

    const long = stream(serve.proxy, { itlMs: 50, tokens: 400, seed: 13, id: 'drain-3' });
    await long.firstChunk;
    const signalledAt = performance.now();
    serve.child.kill('SIGTERM');

    const cut = await long.done;
    expect(cut.ended).toBe('error');
    expect(cut.body.toString('utf8')).not.toContain('[DONE]');
    expect(cut.atMs - signalledAt).toBeLessThan(15_000);
    const exit = await serve.exit;
    expect(exit.code).toBe(0);

    expect(serve.logs().filter((l) => l.msg === 'request').map((l) => l.outcome)).toEqual(['shutdown']);
    expect(serve.logs().find((l) => typeof l.msg === 'string' && l.msg.startsWith('tokentap drain timeout'))).toMatchObject({ drained: false, cut_connections: 1 });
    expect(serve.logs().filter((l) => l.msg === 'final OTLP export incomplete')).toEqual([]);
    const requests = receiver.dataPoints(true).filter((p) => p.metric === 'tokentap.requests');
    expect(requests).toEqual([expect.objectContaining({ attributes: expect.objectContaining({ outcome: 'shutdown', workload: 'default' }), value: 1 })]);
  }, 60_000);

  it('exits 1 at once on a second signal during the drain', async () => {
    const serve = await startServeProcess(simulator.url, ['--drain-timeout', '60s']);
    cleanups.push(serve.kill);
    const long = stream(serve.proxy, { itlMs: 50, tokens: 400, seed: 14, id: 'drain-4' });
    await long.firstChunk;
    serve.child.kill('SIGTERM');
    await eventually('drain to begin', () => serve.logs().some((l) => typeof l.msg === 'string' && l.msg.startsWith('tokentap draining')), (x) => x);
    const secondAt = performance.now();
    serve.child.kill('SIGTERM');
    const exit = await serve.exit;
    expect(exit.code).toBe(1);
    expect(exit.atMs - secondAt).toBeLessThan(10_000);
    expect((await long.done).ended).toBe('error');
  }, 60_000);
});
