import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { Writable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { ModelDiscovery, type ModelDiscoverySettings } from '../../../src/discovery/model-discovery.js';
import { ManualClock } from '../../../src/clock/clock.js';
import { createLogger } from '../../../src/log/logger.js';
import { AdapterColdStarts } from '../../../src/metrics/adapter-cold-starts.js';
import { LimitCounters } from '../../../src/metrics/limit-counters.js';
import { ModelLabels } from '../../../src/metrics/model-labels.js';
import { eventually } from '../../helpers/sidecar.js';

const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((resolve) => { s.closeAllConnections(); s.close(resolve); })));
});

async function upstream(handle: (path: string, res: ServerResponse, count: number) => void): Promise<URL> {
  let count = 0;
  const server = createServer((req, res) => handle(req.url ?? '/', res, ++count));
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return new URL(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
}

function json(res: ServerResponse, body: unknown): void {
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

function discovery(url: URL, overrides: Partial<ModelDiscoverySettings> = {}) {
  const logs: Record<string, unknown>[] = [];
  const sink = new Writable({ write(chunk: Buffer, _e, cb) { for (const l of chunk.toString().split('\n')) if (l) logs.push(JSON.parse(l)); cb(); } });
  const models = new ModelLabels(32);
  const settings = { paths: ['/v1/models', '/api/tags', '/info'], intervalMs: 300_000, retryMs: 30, timeoutMs: 300, adapterIdleAfterMs: 300_000, ...overrides };
  return { models, logs, discovery: new ModelDiscovery(url, settings, models, createLogger('info', sink)) };
}

describe('model discovery', () => {
  it('tries the listing endpoints in order: a server without /v1/models is read from /api/tags', async () => {
    const url = await upstream((path, res) => (path === '/api/tags' ? json(res, { models: [{ name: 'llama3.2:latest', model: 'llama3.2:latest' }] }) : res.writeHead(404).end()));
    const d = discovery(url);
    expect(await d.discovery.refresh()).toEqual({ ok: true, path: '/api/tags', models: ['llama3.2:latest'] });
    expect(d.models.label('llama3.2')).toBe('llama3.2');
  });

  it('names each endpoint and its problem when none lists models, and keeps the list it had', async () => {
    const url = await upstream((path, res, count) => {
      if (count === 1) return json(res, { data: [{ id: 'kept' }] });
      if (path === '/v1/models') return res.writeHead(503).end();
      if (path === '/api/tags') return res.writeHead(200).end('<html>');
      // /info: never answers within the timeout
    });
    const d = discovery(url, { timeoutMs: 200 });
    expect((await d.discovery.refresh()).ok).toBe(true);
    expect(await d.discovery.refresh()).toEqual({ ok: false, problems: ['/v1/models: HTTP 503', '/api/tags: the answer is not JSON', '/info: no whole answer within 200 ms'] });
    expect(d.models.label('kept')).toBe('kept');
  });

  it('refuses a listing larger than 1 MiB rather than buffering it', async () => {
    const url = await upstream((_path, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(`{"data":[${'{"id":"x"},'.repeat(120_000)}{"id":"y"}]}`);
    });
    const d = discovery(url, { paths: ['/v1/models'] });
    expect(await d.discovery.refresh()).toEqual({ ok: false, problems: ['/v1/models: answer larger than 1048576 bytes'] });
    expect(d.models.servedModels()).toBeUndefined();
  });

  it('counts each listing refused past 1 MiB as model_listing_bytes and each abandoned at its deadline as model_listing_timeout, where only the first of a run of failures was logged', async () => {
    const url = await upstream((path, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      if (path === '/v1/models') res.end(`{"data":[${'{"id":"x"},'.repeat(120_000)}{"id":"y"}]}`);
      // /api/tags: the head, then nothing within the deadline
    });
    const limitCounters = new LimitCounters();
    const settings = { paths: ['/v1/models', '/api/tags'], intervalMs: 300_000, retryMs: 30, timeoutMs: 200, adapterIdleAfterMs: 300_000 };
    const d = discovery(url);
    const counted = new ModelDiscovery(url, settings, d.models, createLogger('silent', new Writable({ write: (_c, _e, cb) => cb() })), undefined, limitCounters);
    for (let i = 0; i < 3; i++) expect((await counted.refresh()).ok).toBe(false);
    expect([limitCounters.count('model_listing_bytes'), limitCounters.count('model_listing_timeout')]).toEqual([3, 3]);
  });

  it('retries soon while the model server is still loading, warns once, then follows the interval', async () => {
    const url = await upstream((_path, res, count) => (count <= 3 ? res.writeHead(503).end() : json(res, { data: [{ id: 'loaded' }] })));
    const d = discovery(url, { paths: ['/v1/models'] });
    d.discovery.start();
    try {
      await eventually('the list after the retries', () => d.models.servedModels(), (list) => list?.[0] === 'loaded', 10_000);
    } finally {
      d.discovery.stop();
    }
    expect(d.logs.filter((l) => l['msg'] === 'model discovery failed; retrying')).toHaveLength(1);
    expect(d.logs.filter((l) => String(l['msg']).startsWith('model discovery: the upstream serves'))).toHaveLength(1);
  });

  it('closes the connection of a 503 or a redirect whose body never ends once the status is read (it read the body for as long as the upstream sent it, past the deadline)', async () => {
    const open = new Set<Socket>();
    const writers: NodeJS.Timeout[] = [];
    const url = await upstream((path, res) => {
      open.add(res.socket as Socket);
      res.socket?.on('close', () => open.delete(res.socket as Socket));
      res.writeHead(path === '/v1/models' ? 503 : 302, { location: path === '/v1/models' ? '/' : `http://127.0.0.1:1${path}`, 'content-type': 'text/html' });
      writers.push(setInterval(() => res.write('x'.repeat(16_384)), 5));
    });
    const d = discovery(url, { paths: ['/v1/models', '/api/tags'], timeoutMs: 500 });
    try {
      expect(await d.discovery.refresh()).toEqual({ ok: false, problems: ['/v1/models: HTTP 503', '/api/tags: HTTP 302'] });
      await eventually('the listing connections closed', () => open.size, (size) => size === 0, 5_000);
    } finally {
      for (const writer of writers) clearInterval(writer);
    }
  });

  it('reports a refused connection by its code', async () => {
    const url = await upstream(() => undefined);
    await new Promise((resolve) => servers.pop()?.close(resolve));
    const d = discovery(url, { paths: ['/v1/models'] });
    expect(await d.discovery.refresh()).toEqual({ ok: false, problems: ['/v1/models: ECONNREFUSED'] });
  });

  it('abandons a listing that drips one byte every 500 ms at the total deadline, warns, and retries (the socket timeout fired only on silence)', async () => {
    const drips: NodeJS.Timeout[] = [];
    const url = await upstream((_path, res, count) => {
      if (count === 1) return json(res, { data: [{ id: 'kept' }] });
      res.writeHead(200, { 'content-type': 'application/json' });
      drips.push(setInterval(() => res.write(' '), 500));
    });
    const d = discovery(url, { paths: ['/v1/models'], intervalMs: 50, retryMs: 50, timeoutMs: 1_000 });
    d.discovery.start();
    try {
      await eventually('the warning', () => d.logs.find((l) => l['msg'] === 'model discovery failed; retrying'), (line) => line !== undefined, 15_000);
      await eventually('a retry after the abandoned listing', () => d.logs.length, () => drips.length >= 2, 15_000);
    } finally {
      d.discovery.stop();
      for (const drip of drips) clearInterval(drip);
    }
    expect(d.logs.find((l) => l['msg'] === 'model discovery failed; retrying')).toMatchObject({ problems: ['/v1/models: no whole answer within 1000 ms'], kept: 'the last list' });
    expect(d.models.label('kept')).toBe('kept');
  });

  it('logs the names it keeps, not the listing: a 10 KB name is counted as skipped, not written to the log', async () => {
    const huge = 'x'.repeat(10_000);
    const url = await upstream((_path, res) => json(res, { data: [{ id: huge }, { id: 'real' }] }));
    const d = discovery(url, { paths: ['/v1/models'] });
    expect((await d.discovery.refresh()).ok).toBe(true);
    const line = d.logs.find((l) => String(l['msg']).startsWith('model discovery: the upstream serves'));
    expect(line).toMatchObject({ models: ['real'], listed: 2, skipped: 1 });
    expect(JSON.stringify(d.logs)).not.toContain('x'.repeat(200));
  });

  it('logs a listing in which no name can be a label (every one too long, with a bidi control or an unpaired surrogate): every request is then "other", and the first listing logged nothing', async () => {
    const url = await upstream((_path, res) => json(res, { data: [{ id: 'x'.repeat(129) }, { id: 'evil\u202egnp' }, { id: 'half\ud800' }] }));
    const d = discovery(url, { paths: ['/v1/models'] });
    expect((await d.discovery.refresh()).ok).toBe(true);
    expect(d.models.label('x'.repeat(129))).toBe('other');
    const line = d.logs.find((l) => String(l['msg']).startsWith('model discovery: the upstream serves'));
    expect(line).toMatchObject({ models: [], listed: 3, skipped: 3, path: '/v1/models' });
  });

  it('logs at most 64 of the names it keeps, and how many more (max_models may be 1000)', async () => {
    const url = await upstream((_path, res) => json(res, { data: Array.from({ length: 200 }, (_, i) => ({ id: `m-${i}` })) }));
    const logs: Record<string, unknown>[] = [];
    const sink = new Writable({ write(chunk: Buffer, _e, cb) { for (const l of chunk.toString().split('\n')) if (l) logs.push(JSON.parse(l)); cb(); } });
    const models = new ModelLabels(100);
    const settings = { paths: ['/v1/models'], intervalMs: 300_000, retryMs: 30, timeoutMs: 300, adapterIdleAfterMs: 300_000 };
    expect((await new ModelDiscovery(url, settings, models, createLogger('info', sink)).refresh()).ok).toBe(true);
    const line = logs.find((l) => String(l['msg']).startsWith('model discovery: the upstream serves'));
    expect(line).toMatchObject({ listed: 200, skipped: 100, notLogged: 36 });
    expect(line?.['models']).toEqual(Array.from({ length: 64 }, (_, i) => `m-${i}`));
    expect(models.servedModels()).toHaveLength(100);
  });

  it('keeps at most max_models model label values over 12 listings that each serve 32 new names (LoRA adapters coming and going), and warns when a listing finds no room', async () => {
    let poll = 0;
    const url = await upstream((_path, res) => json(res, { data: Array.from({ length: 32 }, (_, i) => ({ id: `lora-${poll}-${i}` })) }));
    const d = discovery(url, { paths: ['/v1/models'] });
    const labels = new Set<string>();
    for (poll = 0; poll < 12; poll++) {
      expect((await d.discovery.refresh()).ok).toBe(true);
      for (let i = 0; i < 32; i++) labels.add(d.models.label(`lora-${poll}-${i}`));
    }
    expect(labels.size).toBe(33);
    expect(labels.has('other')).toBe(true);
    expect([...labels].filter((label) => label.startsWith('lora-0-'))).toHaveLength(32);
    // A name no longer listed is not labelled, even one that had a label.
    expect(d.models.label('lora-0-0')).toBe('other');
    const warnings = d.logs.filter((l) => String(l['msg']).startsWith('model discovery: every model label value'));
    expect(warnings).toHaveLength(11);
    expect(warnings[0]).toMatchObject({ withoutRoom: 32, maxModels: 32 });
  });

  it('bounds a hostile vLLM-shaped listing: 20,000 adapters, duplicates and a parent cycle give at most max_models base models and tracked adapters', async () => {
    const data = [
      { id: 'base', parent: null },
      { id: 'base', parent: 'lora-0' },
      { id: 'loop-a', parent: 'loop-b' },
      { id: 'loop-b', parent: 'loop-a' },
      ...Array.from({ length: 20_000 }, (_, i) => ({ id: `lora-${i}`, parent: i % 2 === 0 ? 'base' : 'not-listed' })),
    ];
    const url = await upstream((_path, res) => json(res, { object: 'list', data }));
    const d = discovery(url, { paths: ['/v1/models'] });
    const clock = new ManualClock(0);
    const coldStarts = new AdapterColdStarts(clock, 1000);
    const withColdStarts = new ModelDiscovery(url, { paths: ['/v1/models'], intervalMs: 300_000, retryMs: 30, timeoutMs: 2000, adapterIdleAfterMs: 1000 }, d.models, createLogger('silent', new Writable({ write: (_c, _e, cb) => cb() })), coldStarts);
    expect((await withColdStarts.refresh()).ok).toBe(true);
    const kept = d.models.servedModels() ?? [];
    expect(kept).toHaveLength(32);
    for (let i = 0; i < 40_000; i++) d.models.label(i < 20_000 ? `lora-${i}` : `made-up-${i}`);
    d.models.label('base');
    d.models.label('loop-a');
    const info = new Map(d.models.modelInfo());
    expect(info.size).toBeLessThanOrEqual(32);
    expect(info.get('base')).toBe('base');
    expect(info.get('loop-a')).toBe('other');
    expect(info.get('lora-0')).toBe('base');
    expect(info.get('lora-1')).toBe('other');
    for (const base of info.values()) expect(base === 'other' || kept.includes(base)).toBe(true);
    // Only listed adapters are tracked: a cold start for lora-0 after idle, never for an unlisted name.
    clock.advance(1001);
    expect(coldStarts.requestStarted('lora-0')).toBe(true);
    expect(coldStarts.requestStarted('lora-40')).toBe(false);
    expect(coldStarts.requestStarted('base')).toBe(false);
  });
});
