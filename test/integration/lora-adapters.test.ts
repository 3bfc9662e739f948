import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { exchange } from '../helpers/replay-upstream.js';
import { histogram, scrape, sumValues } from '../helpers/prometheus-text.js';
import { eventually, startTestSidecar } from '../helpers/sidecar.js';

/**
 * LoRA adapters end to end: the simulator lists a base model and an adapter in GET /v1/models as
 * vLLM does and, like an engine that evicted the adapter, loads it for 1 s before the first request
 * after 1 s idle. The sidecar labels the requests with the adapter, maps it to its base model in
 * tokentap_model_info, and marks that first request as a cold start with its slow TTFT apart.
 */

const LOAD_MS = 1000;
const IDLE_MS = 1000;

let simulator: RunningSimulator;
beforeAll(async () => {
  simulator = await startSimulator({ port: 0, ttftMs: 5, itlMs: 1, outputTokens: 2, model: 'llama-3.1-8b', loras: ['sql-lora'], loraLoadMs: LOAD_MS, loraUnloadAfterMs: IDLE_MS });
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

describe('LoRA adapters through the sidecar', () => {
  it('labels adapter requests with the adapter, maps it to its base model, and marks the slow first request after idle as a cold start', async () => {
    const sidecar = await startTestSidecar(simulator.url, `model_discovery:\n  interval: 5m\n  adapter_idle_after: ${IDLE_MS}ms\n`);
    try {
      await eventually('the served list', () => sidecar.models.servedModels(), (list) => list !== undefined && list.length > 0);
      expect(sidecar.models.servedModels()).toEqual(['llama-3.1-8b', 'sql-lora']);
      // Idle past both the simulator's unload time and the sidecar's adapter_idle_after.
      await new Promise((resolve) => setTimeout(resolve, IDLE_MS + 200));
      await chat(sidecar.proxyUrl, 'sql-lora');
      await chat(sidecar.proxyUrl, 'sql-lora');
      await chat(sidecar.proxyUrl, 'llama-3.1-8b');
      const m = await eventually('3 requests recorded', () => scrape(sidecar.adminUrl), (s) => sumValues(s, 'tokentap_requests_total') === 3);

      const adapter = { gen_ai_request_model: 'sql-lora' };
      expect(sumValues(m, 'tokentap_requests_total', adapter)).toBe(2);
      expect(sumValues(m, 'tokentap_adapter_cold_starts_total', adapter)).toBe(1);
      expect(sumValues(m, 'tokentap_adapter_cold_starts_total')).toBe(1);
      const cold = histogram(m, 'tokentap_adapter_cold_start_time_to_first_token_seconds', adapter);
      expect(cold.count).toBe(1);
      expect(cold.sum).toBeGreaterThanOrEqual(LOAD_MS / 1000);
      const all = histogram(m, 'gen_ai_server_time_to_first_token_seconds', adapter);
      expect(all.count).toBe(2);
      // The warm request's TTFT (5 ms planned) is what is left: under the 1 s load on any machine.
      expect(all.sum - cold.sum).toBeLessThan(LOAD_MS / 1000);

      const info = (await (await fetch(`${sidecar.adminUrl}/metrics`)).text()).split('\n').filter((line) => line.startsWith('tokentap_model_info'));
      expect(info.sort()).toEqual([
        'tokentap_model_info{gen_ai_request_model="llama-3.1-8b",base_model="llama-3.1-8b"} 1',
        'tokentap_model_info{gen_ai_request_model="sql-lora",base_model="llama-3.1-8b"} 1',
      ]);
    } finally {
      await sidecar.close();
    }
  });
});
