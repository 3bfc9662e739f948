import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { histogram, parsePrometheusText, sumValues } from '../../helpers/prometheus-text.js';
import { FAST, simulator } from './helpers.js';

const VLLM_FIXTURE = join(import.meta.dirname, '..', '..', 'fixtures', 'streams', 'vllm', 'server-metrics.prom');

async function chat(url: string, headers: Record<string, string>): Promise<string> {
  const response = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'hello there' }] }),
  });
  return response.text();
}

describe('the simulated engine timings', () => {
  it('puts vLLM per-request metrics on the final usage chunk only, with the configured queue and prefill', async () => {
    const sim = await simulator({ ...FAST, outputTokens: 3 });
    const body = await chat(sim.url, { 'x-sim-per-request-metrics': '1', 'x-sim-engine-queue-ms': '40', 'x-sim-engine-prefill-ms': '110' });
    const chunks = body.split('\n\n').filter((e) => e.startsWith('data: {')).map((e) => JSON.parse(e.slice(6)) as Record<string, unknown>);
    const withMetrics = chunks.filter((c) => 'metrics' in c);
    expect(withMetrics).toHaveLength(1);
    expect(withMetrics[0]).toMatchObject({ choices: [], usage: { completion_tokens: 3 } });
    const metrics = withMetrics[0]!['metrics'] as Record<string, number>;
    expect(Object.keys(metrics)).toEqual(['time_to_first_token_ms', 'generation_time_ms', 'queue_time_ms', 'mean_itl_ms', 'tokens_per_second']);
    expect(metrics).toMatchObject({ time_to_first_token_ms: 110, queue_time_ms: 40 });
    expect(metrics['mean_itl_ms']).toBeCloseTo(metrics['generation_time_ms']! / 2, 9);
  });

  it('sends no metrics without the per-request metrics switch', async () => {
    const sim = await simulator(FAST);
    expect(await chat(sim.url, { 'x-sim-engine-prefill-ms': '110' })).not.toContain('"metrics"');
  });
});

describe('GET /metrics, in vLLM format', () => {
  it('serves the engine series under the names and label set of a real vLLM exposition', async () => {
    const sim = await simulator({ ...FAST, model: 'tiny' });
    await chat(sim.url, { 'x-sim-engine-queue-ms': '400', 'x-sim-engine-prefill-ms': '900' });
    const response = await fetch(`${sim.url}/metrics`);
    expect(response.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    const ours = parsePrometheusText(await response.text());
    // Only the vllm:* families: the capture's Python and HTTP families are not all well-formed for this parser.
    const vllmOnly = readFileSync(VLLM_FIXTURE, 'utf8').split('\n').filter((l) => /^(# (HELP|TYPE) )?vllm:/.test(l)).join('\n');
    const real = parsePrometheusText(vllmOnly);
    for (const [name, family] of ours) {
      const theirs = real.get(name);
      expect(theirs, name).toBeDefined();
      expect(family.type, name).toBe(theirs!.type);
      const labelKeys = (f: typeof family) => Object.keys(f.metrics[0]?.labels ?? {}).sort();
      expect(labelKeys(family), name).toEqual(labelKeys(theirs!));
    }
    expect(sumValues(ours, 'vllm:prefix_cache_queries_total', { model_name: 'tiny', engine: '0' })).toBe(3);
    const queue = histogram(ours, 'vllm:request_queue_time_seconds');
    expect(queue).toMatchObject({ count: 1, sum: 0.4 });
    expect(queue.buckets.get(0.3)).toBe(0);
    expect(queue.buckets.get(0.5)).toBe(1);
    expect(histogram(ours, 'vllm:request_prefill_time_seconds')).toMatchObject({ count: 1, sum: 0.9 });
    expect(sumValues(ours, 'vllm:num_requests_running')).toBe(0);
  });
});
