import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { fencedBlocks, readDoc } from '../helpers/docs.js';
import { scrape } from '../helpers/prometheus-text.js';
import { eventually, startTestSidecar } from '../helpers/sidecar.js';

/**
 * The matching rules of docs/workloads-and-slos.md, through the real proxy in front of the
 * simulator, with the page's own example as the configuration: each request's workload is read
 * back from tokentap_requests_total.
 */
const EXAMPLE = fencedBlocks(readDoc('docs/workloads-and-slos.md'), 'yaml')[0] as string;

let simulator: RunningSimulator;
let sidecar: Awaited<ReturnType<typeof startTestSidecar>>;

beforeAll(async () => {
  simulator = await startSimulator({ port: 0, ttftMs: 1, itlMs: 1, outputTokens: 2 });
  sidecar = await startTestSidecar(simulator.url, EXAMPLE);
});

afterAll(async () => {
  await sidecar?.close();
  await simulator?.close();
});

/** Finished requests per workload. */
async function requestsByWorkload(): Promise<Map<string, number>> {
  const counts = new Map<string, number>();
  for (const sample of (await scrape(sidecar.adminUrl)).get('tokentap_requests_total')?.metrics ?? []) {
    const workload = sample.labels['workload'] as string;
    counts.set(workload, (counts.get(workload) ?? 0) + Number(sample.value));
  }
  return counts;
}

const total = (counts: Map<string, number>) => [...counts.values()].reduce((a, b) => a + b, 0);

/** Sends one streamed request and answers the workload it was counted in. */
async function workloadOf(path: string, headers: http.OutgoingHttpHeaders, model: string): Promise<string> {
  const before = await requestsByWorkload();
  const body = path === '/v1/completions' ? { model, stream: true, prompt: 'hi' } : { model, stream: true, messages: [{ role: 'user', content: 'hi' }] };
  await new Promise<void>((resolve, reject) => {
    const req = http.request(`${sidecar.proxyUrl}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, agent: false }, (res) => {
      res.resume();
      res.on('end', resolve);
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
  const after = await eventually('the request counted', requestsByWorkload, (counts) => total(counts) === total(before) + 1);
  const grown = [...after].filter(([workload, count]) => count > (before.get(workload) ?? 0)).map(([workload]) => workload);
  expect(grown).toHaveLength(1);
  return grown[0] as string;
}

describe('workload matching as docs/workloads-and-slos.md describes it, through the proxy', () => {
  it('tries workloads in order, first match wins, and gives what matches nothing to the last', async () => {
    const chatPath = '/v1/chat/completions';
    // rag's header wins over chat's path, and over code's model: rag comes first.
    expect(await workloadOf(chatPath, { 'x-workload': 'rag' }, 'qwen2.5-coder-7b-instruct')).toBe('rag');
    // code's model wins over chat's path.
    expect(await workloadOf(chatPath, {}, 'qwen2.5-coder-7b-instruct')).toBe('code');
    // chat's alternatives: its path alone, or its header alone on another path.
    expect(await workloadOf(chatPath, {}, 'sim-model')).toBe('chat');
    expect(await workloadOf('/v1/completions', { 'x-workload': 'chat' }, 'sim-model')).toBe('chat');
    // Nothing matches: the last workload.
    expect(await workloadOf('/v1/completions', {}, 'sim-model')).toBe('default');
    // Header names are case-insensitive, values exact; a header sent twice matches neither value.
    expect(await workloadOf('/v1/completions', { 'X-WORKLOAD': 'rag' }, 'sim-model')).toBe('rag');
    expect(await workloadOf('/v1/completions', { 'x-workload': 'RAG' }, 'sim-model')).toBe('default');
    expect(await workloadOf('/v1/completions', { 'x-workload': ['rag', 'rag'] }, 'sim-model')).toBe('default');
    // The model exactly as sent.
    expect(await workloadOf('/v1/completions', {}, 'Qwen2.5-Coder-7B-Instruct')).toBe('default');
  });
});
