import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { exchange } from '../helpers/replay-upstream.js';
import { parsePrometheusText, scrape, sumValues } from '../helpers/prometheus-text.js';
import { eventually, startTestSidecar } from '../helpers/sidecar.js';

/**
 * Model discovery end to end: the sidecar asks the simulator's GET /v1/models which models it
 * serves, and a flood of made-up model names in request bodies then adds no series to /metrics.
 */

let simulator: RunningSimulator;
beforeAll(async () => {
  simulator = await startSimulator({ port: 0, ttftMs: 1, itlMs: 1, outputTokens: 4, model: 'qwen2.5-7b' });
});
afterAll(async () => {
  await simulator?.close();
});

async function chat(proxyUrl: string, model: string): Promise<void> {
  await exchange(`${proxyUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model, stream: true, messages: [{ role: 'user', content: 'hi' }] }),
  });
}

/** Series of tokentap's own metrics (request and SLO families), not the Node process metrics, whose set varies with GC. */
async function ownSeries(adminUrl: string): Promise<number> {
  const response = await fetch(`${adminUrl}/metrics`);
  const text = await response.text();
  parsePrometheusText(text); // well-formed, or it throws
  return text.split('\n').filter((line) => /^(tokentap_|gen_ai_)/.test(line) && !line.startsWith('tokentap_build_info')).length;
}

async function settled(sidecar: { adminUrl: string }, requests: number): Promise<void> {
  await eventually(`${requests} requests recorded`, () => scrape(sidecar.adminUrl), (m) => sumValues(m, 'tokentap_requests_total') === requests);
}

describe('model discovery', () => {
  it('40 made-up model names add no series once the upstream has listed its models', async () => {
    const sidecar = await startTestSidecar(simulator.url, 'model_discovery:\n  interval: 5m\n');
    try {
      await eventually('the served list', () => sidecar.models.servedModels(), (list) => list !== undefined && list.length > 0);
      expect(sidecar.models.servedModels()).toEqual(['qwen2.5-7b']);
      await chat(sidecar.proxyUrl, 'qwen2.5-7b');
      await chat(sidecar.proxyUrl, 'junk-first');
      await settled(sidecar, 2);
      const before = await ownSeries(sidecar.adminUrl);
      for (let i = 0; i < 40; i++) await chat(sidecar.proxyUrl, `junk-${i}`);
      await settled(sidecar, 42);
      expect(await ownSeries(sidecar.adminUrl)).toBe(before);
      const m = await scrape(sidecar.adminUrl);
      expect(sumValues(m, 'tokentap_requests_total', { gen_ai_request_model: 'other' })).toBe(41);
      expect(sumValues(m, 'tokentap_requests_total', { gen_ai_request_model: 'qwen2.5-7b' })).toBe(1);
    } finally {
      await sidecar.close();
    }
  });

  it('without discovery the same 40 names do add series (the first 32 names seen are kept): the check above can fail', async () => {
    const sidecar = await startTestSidecar(simulator.url, 'model_discovery:\n  enabled: false\n');
    try {
      await chat(sidecar.proxyUrl, 'qwen2.5-7b');
      await chat(sidecar.proxyUrl, 'junk-first');
      await settled(sidecar, 2);
      const before = await ownSeries(sidecar.adminUrl);
      for (let i = 0; i < 40; i++) await chat(sidecar.proxyUrl, `junk-${i}`);
      await settled(sidecar, 42);
      expect(await ownSeries(sidecar.adminUrl)).toBeGreaterThan(before);
      expect(sidecar.models.servedModels()).toBeUndefined();
    } finally {
      await sidecar.close();
    }
  });
});

describe('the discovery request', () => {
  let upstream: Server;
  const seen: { method: string; url: string }[] = [];
  beforeAll(async () => {
    upstream = createServer((req: IncomingMessage, res) => {
      seen.push({ method: req.method ?? '', url: req.url ?? '' });
      req.resume();
      if (req.url === '/v1/models') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ object: 'list', data: [{ id: 'm' }] }));
      } else {
        res.writeHead(404).end();
      }
    });
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  });
  afterAll(async () => {
    await new Promise((resolve) => upstream.close(resolve));
  });

  it('goes straight to the upstream, not through the proxy listener: it is in no request metric', async () => {
    const url = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
    const sidecar = await startTestSidecar(url, 'model_discovery:\n  paths: [/v1/models]\n');
    try {
      await eventually('the served list', () => sidecar.models.servedModels(), (list) => list !== undefined);
      expect(seen).toEqual([{ method: 'GET', url: '/v1/models' }]);
      const m = await scrape(sidecar.adminUrl);
      expect(sumValues(m, 'tokentap_requests_total')).toBe(0);
      expect(m.get('tokentap_requests_total')?.metrics ?? []).toEqual([]);
      expect(sidecar.logs.filter((line) => line['msg'] === 'request')).toEqual([]);
      expect(sidecar.logs.find((line) => String(line['msg']).startsWith('model discovery'))).toMatchObject({ models: ['m'], path: '/v1/models' });
    } finally {
      await sidecar.close();
    }
  });
});

describe('an upstream whose listing changes on every poll (LoRA adapters coming and going)', () => {
  let upstream: Server;
  let generation = 0;
  const namesOf = (g: number): string[] => Array.from({ length: 32 }, (_, i) => `lora-${g}-${i}`);
  beforeAll(async () => {
    upstream = createServer((req: IncomingMessage, res) => {
      req.resume();
      if (req.url === '/v1/models') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ object: 'list', data: namesOf(generation).map((id) => ({ id })) }));
        return;
      }
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.end('data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}\n\ndata: [DONE]\n\n');
      });
    });
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  });
  afterAll(async () => {
    await new Promise((resolve) => upstream.close(resolve));
  });

  it('keeps at most max_models model label values and their series over 12 polls of 32 new names each (39,521 series and 380 values grew before)', async () => {
    const url = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
    const sidecar = await startTestSidecar(url, 'model_discovery:\n  paths: [/v1/models]\n  interval: 100ms\nmetrics:\n  max_models: 32\n');
    try {
      let requests = 0;
      const seriesAfterPoll: number[] = [];
      for (generation = 0; generation < 12; generation++) {
        const names = namesOf(generation);
        await eventually(`listing ${generation}`, () => sidecar.models.servedModels(), (list) => list?.[0] === names[0]);
        for (const name of names) await chat(sidecar.proxyUrl, name);
        requests += names.length;
        await settled(sidecar, requests);
        seriesAfterPoll.push(await ownSeries(sidecar.adminUrl));
      }
      const m = await scrape(sidecar.adminUrl);
      const values = new Set((m.get('tokentap_requests_total')?.metrics ?? []).map((sample) => sample.labels['gen_ai_request_model']));
      expect(values.size).toBe(33);
      expect(sumValues(m, 'tokentap_requests_total', { gen_ai_request_model: 'other' })).toBe(11 * 32);
      // The first poll's 32 names and then one (default, other) set: nothing grows after the second poll.
      expect(seriesAfterPoll.slice(2)).toEqual(Array.from({ length: 10 }, () => seriesAfterPoll[1]));
      expect(sidecar.logs.find((line) => String(line['msg']).startsWith('model discovery: every model label value'))).toMatchObject({ withoutRoom: 32, maxModels: 32 });
    } finally {
      await sidecar.close();
    }
  }, 60_000);
});

