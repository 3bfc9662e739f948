import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { ModelDiscovery, type ModelDiscoverySettings } from '../../../src/discovery/model-discovery.js';
import { createLogger } from '../../../src/log/logger.js';
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
  const settings = { paths: ['/v1/models', '/api/tags', '/info'], intervalMs: 300_000, retryMs: 30, timeoutMs: 300, ...overrides };
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
    expect(await d.discovery.refresh()).toEqual({ ok: false, problems: ['/v1/models: HTTP 503', '/api/tags: the answer is not JSON', '/info: no answer within 200 ms'] });
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

  it('reports a refused connection by its code', async () => {
    const url = await upstream(() => undefined);
    await new Promise((resolve) => servers.pop()?.close(resolve));
    const d = discovery(url, { paths: ['/v1/models'] });
    expect(await d.discovery.refresh()).toEqual({ ok: false, problems: ['/v1/models: ECONNREFUSED'] });
  });
});
