import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parseSimulatorFlags } from '../../../src/simulator/index.js';
import { LoraAdapters } from '../../../src/simulator/lora-adapters.js';
import { CHAT_BODY, rawRequest, simulator, streamRequest } from './helpers.js';

describe('simulated LoRA adapters', () => {
  it('list each adapter after the base model as vLLM does: root its path, parent its base, max_model_len null', async () => {
    const sim = await simulator({ model: 'llama-3.1-8b', loras: ['sql-lora', 'chat-lora=other-base'] });
    const res = await rawRequest(sim.port, 'GET', '/v1/models');
    const list = JSON.parse(res.body.toString('utf8')) as { data: { created: number; permission: { id: string }[] }[] };
    const created = list.data[0]?.created ?? 0;
    const ids = list.data.map((card) => card.permission[0]?.id ?? '');
    for (const id of ids) expect(id).toMatch(/^modelperm-[0-9a-f]{32}$/);
    expect(new Set(ids).size).toBe(3);
    const permission = (id: string) =>
      `"permission":[{"id":"${id}","object":"model_permission","created":${created},"allow_create_engine":false,"allow_sampling":true,"allow_logprobs":true,` +
      `"allow_search_indices":false,"allow_view":true,"allow_fine_tuning":false,"organization":"*","group":null,"is_blocking":false}]`;
    expect(res.body.toString('utf8')).toBe(
      `{"object":"list","data":[` +
        `{"id":"llama-3.1-8b","object":"model","created":${created},"owned_by":"vllm","root":"llama-3.1-8b","parent":null,"max_model_len":8192,${permission(ids[0]!)}},` +
        `{"id":"sql-lora","object":"model","created":${created},"owned_by":"vllm","root":"/adapters/sql-lora","parent":"llama-3.1-8b","max_model_len":null,${permission(ids[1]!)}},` +
        `{"id":"chat-lora","object":"model","created":${created},"owned_by":"vllm","root":"/adapters/chat-lora","parent":"other-base","max_model_len":null,${permission(ids[2]!)}}]}`,
    );
  });

  it('load an adapter idle for longer than the unload time before its prefill, once, and never the base model', () => {
    const loras = new LoraAdapters([{ name: 'sql-lora', base: 'base' }], 800, 1000, 0);
    expect(loras.loadDelayMs('sql-lora', 1000)).toBe(0);
    expect(loras.loadDelayMs('sql-lora', 2001)).toBe(800);
    // Loaded until 2801: in use, not idle, however long the load took.
    expect(loras.loadDelayMs('sql-lora', 3700)).toBe(0);
    expect(loras.loadDelayMs('base', 1_000_000)).toBe(0);
    expect(loras.loadDelayMs('unknown', 1_000_000)).toBe(0);
  });

  it('delay the first token of a request to an unloaded adapter by the load time, on the wire', async () => {
    const sim = await simulator({ model: 'base', loras: ['sql-lora'], ttftMs: 5, itlMs: 1, outputTokens: 2, loraLoadMs: 1000, loraUnloadAfterMs: 300 });
    await new Promise((resolve) => setTimeout(resolve, 350));
    const stream = { ...CHAT_BODY, model: 'sql-lora', stream: true };
    const cold = await streamRequest(sim.url, '/v1/chat/completions', stream);
    const warm = await streamRequest(sim.url, '/v1/chat/completions', stream);
    const base = await streamRequest(sim.url, '/v1/chat/completions', { ...stream, model: 'base' });
    const ttft = (result: typeof cold) => (result.events[1]?.atMs ?? Infinity) - result.sentMs;
    expect(ttft(cold)).toBeGreaterThanOrEqual(1000);
    // Warm: 5 ms planned; loose bounds for a loaded machine, still well under the 1 s load.
    expect(ttft(warm)).toBeLessThan(800);
    expect(ttft(base)).toBeLessThan(800);
  });
});

describe('the simulator command of docs/model-discovery.md', () => {
  it('parses as the page writes it', () => {
    const command = /`tokentap simulate ([^`]+)`/.exec(readFileSync('docs/model-discovery.md', 'utf8'))?.[1];
    expect(command).toBeDefined();
    expect(parseSimulatorFlags((command as string).split(/\s+/))).toEqual({ loras: ['sql-lora'], loraLoadMs: 800, loraUnloadAfterMs: 60_000 });
  });
});
