import { describe, expect, it } from 'vitest';
import { modelParentsOf, servedModelsOf } from '../../../src/discovery/served-models.js';
import { ModelLabels } from '../../../src/metrics/model-labels.js';

describe('reading the served model names from a listing', () => {
  it('reads an OpenAI/vLLM /v1/models list: every id (served names and LoRA adapters), not the weights path', () => {
    const vllm = {
      object: 'list',
      data: [
        { id: 'qwen2.5-7b', object: 'model', owned_by: 'vllm', root: 'Qwen/Qwen2.5-7B-Instruct', parent: null, max_model_len: 8192 },
        { id: 'sql-lora', object: 'model', owned_by: 'vllm', root: '/adapters/sql', parent: 'qwen2.5-7b' },
      ],
    };
    expect(servedModelsOf(vllm)).toEqual(['qwen2.5-7b', 'sql-lora']);
  });

  it('reads Ollama /api/tags (name and model) and TGI /info (model_id)', () => {
    expect(servedModelsOf({ models: [{ name: 'llama3.2:latest', model: 'llama3.2:latest', size: 2019393189 }, { name: 'qwen2.5:7b', model: 'qwen2.5:7b' }] })).toEqual(['llama3.2:latest', 'qwen2.5:7b']);
    expect(servedModelsOf({ model_id: 'HuggingFaceH4/zephyr-7b-beta', model_dtype: 'torch.float16', max_input_tokens: 4095 })).toEqual(['HuggingFaceH4/zephyr-7b-beta']);
  });

  it('finds nothing in an answer of another shape, an empty list or names that are not strings', () => {
    for (const body of [null, 'sim-model', [], {}, { data: [] }, { data: [{ id: 7 }, { name: 'x' }] }, { models: [{}] }, { model_id: '' }, { status: 'ok' }]) {
      expect(servedModelsOf(body), JSON.stringify(body)).toBeUndefined();
    }
  });
});

/**
 * vLLM's `GET /v1/models` with one base model and two LoRA adapters, field for field as
 * `OpenAIServingModels.show_available_models` builds it (vllm/entrypoints/openai/serving_models.py
 * and protocol.py `ModelCard`/`ModelPermission`, vllm-project/vllm@075e9ba825513f0e50ae1a5185d6db0ee405f84e):
 * the base card has `root` = the weights path, `parent` null and `max_model_len`; a LoRA card has
 * `root` = the adapter's path, `parent` = its base model's served name and no `max_model_len`.
 */
const permission = (id: string) => ({ id, object: 'model_permission', created: 1745013322, allow_create_engine: false, allow_sampling: true, allow_logprobs: true, allow_search_indices: false, allow_view: true, allow_fine_tuning: false, organization: '*', group: null, is_blocking: false });
const VLLM_LISTING_WITH_ADAPTERS = {
  object: 'list',
  data: [
    { id: 'llama-3.1-8b', object: 'model', created: 1745013322, owned_by: 'vllm', root: '/models/meta-llama/Llama-3.1-8B-Instruct', parent: null, max_model_len: 131072, permission: [permission('modelperm-91177890c6b54610876d0b3cae1b6e67')] },
    { id: 'sql-lora', object: 'model', created: 1745013322, owned_by: 'vllm', root: '/adapters/sql-lora', parent: 'llama-3.1-8b', max_model_len: null, permission: [permission('modelperm-dfa39c019d7f4328ac1ea3cfdbab746f')] },
    { id: 'support-lora', object: 'model', created: 1745013322, owned_by: 'vllm', root: '/adapters/support-lora', parent: 'llama-3.1-8b', max_model_len: null, permission: [permission('modelperm-5ed883dd35534fd89feb98a182217e3a')] },
  ],
};

describe('reading each adapter\'s base model from a listing', () => {
  it('reads vLLM\'s parent of each LoRA adapter; a base model (parent null) has none, and root (a path) is never a name', () => {
    expect(servedModelsOf(VLLM_LISTING_WITH_ADAPTERS)).toEqual(['llama-3.1-8b', 'sql-lora', 'support-lora']);
    expect([...modelParentsOf(VLLM_LISTING_WITH_ADAPTERS)]).toEqual([['sql-lora', 'llama-3.1-8b'], ['support-lora', 'llama-3.1-8b']]);
  });

  it('reads no parents from Ollama, TGI, a listing without parents or entries of the wrong types', () => {
    for (const body of [null, [], { models: [{ name: 'a', parent: 'b' }] }, { model_id: 'x' }, { data: [{ id: 'a' }, { id: 'b', parent: null }, { id: 'c', parent: '' }, { id: 7, parent: 'a' }, { id: 'd', parent: 3 }, 'e'] }]) {
      expect(modelParentsOf(body).size, JSON.stringify(body)).toBe(0);
    }
  });

  it('keeps the first entry of a duplicated id: a later duplicate cannot give a base model a parent', () => {
    expect([...modelParentsOf({ data: [{ id: 'base', parent: null }, { id: 'base', parent: 'evil' }, { id: 'lora', parent: 'base' }, { id: 'lora', parent: 'evil' }] })]).toEqual([['lora', 'base']]);
  });
});

describe('model labels', () => {
  it('keep the first names seen until the upstream has said what it serves', () => {
    const labels = new ModelLabels(2);
    expect([labels.label('a'), labels.label('b'), labels.label('c'), labels.label('a'), labels.label(undefined), labels.label('')]).toEqual(['a', 'b', 'other', 'a', 'unknown', 'unknown']);
    expect(labels.servedModels()).toBeUndefined();
  });

  it('once the served list is known, keep only served names: 32 made-up names sent first cannot push the served model into "other"', () => {
    const labels = new ModelLabels(32);
    for (let i = 0; i < 32; i++) expect(labels.label(`squat-${i}`)).toBe(`squat-${i}`);
    expect(labels.label('qwen2.5-7b')).toBe('other');
    labels.serve(['qwen2.5-7b']);
    expect(labels.label('qwen2.5-7b')).toBe('qwen2.5-7b');
    expect(labels.label('squat-0')).toBe('other');
    expect(labels.label('never-seen')).toBe('other');
  });

  it('accept an Ollama name without its :latest tag, since Ollama resolves it to the tagged one', () => {
    const labels = new ModelLabels(8);
    labels.serve(['llama3.2:latest', 'qwen2.5:7b']);
    expect([labels.label('llama3.2'), labels.label('llama3.2:latest'), labels.label('qwen2.5'), labels.label('qwen2.5:7b')]).toEqual(['llama3.2', 'llama3.2:latest', 'other', 'qwen2.5:7b']);
  });

  it('bound the served list itself: at most max_models names of at most 128 characters', () => {
    const labels = new ModelLabels(3);
    labels.serve(['x'.repeat(129), 'a', 'b', 'c', 'd']);
    expect(labels.servedModels()).toEqual(['a', 'b', 'c']);
    expect(labels.label('d')).toBe('other');
  });

  it('never give "other" or "unknown" from a request body a first-seen slot: two such names took both slots of max_models 2, and "unknown" passed for a request without a model', () => {
    const labels = new ModelLabels(2);
    expect([labels.label('other'), labels.label('unknown'), labels.label('a'), labels.label('b'), labels.label(undefined)]).toEqual(['other', 'other', 'a', 'b', 'unknown']);
  });

  it('never serve a listed "other" or "unknown" (nor the untagged name of "other:latest"): the overflow of every unlisted name would join an upstream-chosen base model in tokentap_model_info', () => {
    const labels = new ModelLabels(32);
    const served = labels.serve(['other', 'unknown', 'other:latest', 'real'], new Map([['other', 'real'], ['unknown', 'real'], ['other:latest', 'real']]));
    expect(served).toMatchObject({ kept: ['other:latest', 'real'], skipped: 2 });
    expect([labels.label('other'), labels.label('unknown'), labels.label('made-up'), labels.label('other:latest'), labels.label('real')]).toEqual(['other', 'other', 'other', 'other:latest', 'real']);
    expect(labels.modelInfo()).toEqual([['other:latest', 'real'], ['real', 'real']]);
  });

  it('label a request naming a 1 MB model "other" without reading the name: 100 such requests took about 200 ms of event loop (2 ms each)', () => {
    const served = new ModelLabels(32);
    served.serve(['real']);
    const fallback = new ModelLabels(32);
    const names = Array.from({ length: 100 }, (_, i) => `${'x'.repeat(1_000_000)}${i}`);
    const startedMs = performance.now();
    for (const name of names) expect([served.label(name), fallback.label(name)]).toEqual(['other', 'other']);
    // Reading each name costs about 2 ms; not reading it, microseconds: a bound far from both.
    expect(performance.now() - startedMs).toBeLessThan(60);
  });

  it('follow a changed list: a model the upstream no longer lists is "other" from then on', () => {
    const labels = new ModelLabels(8);
    labels.serve(['base', 'lora-a']);
    expect(labels.label('lora-a')).toBe('lora-a');
    labels.serve(['base', 'lora-b']);
    expect([labels.label('lora-a'), labels.label('lora-b')]).toEqual(['other', 'lora-b']);
  });
});

describe('base models of the served names (tokentap_model_info)', () => {
  it('map each adapter to the base model vLLM lists as its parent, and each base model to itself, for the names that have a label', () => {
    const labels = new ModelLabels(32);
    const served = labels.serve(servedModelsOf(VLLM_LISTING_WITH_ADAPTERS) ?? [], modelParentsOf(VLLM_LISTING_WITH_ADAPTERS));
    expect(served.adapters).toEqual(['sql-lora', 'support-lora']);
    expect(labels.modelInfo()).toEqual([]);
    for (const model of ['sql-lora', 'llama-3.1-8b', 'made-up']) labels.label(model);
    expect(labels.modelInfo()).toEqual([['sql-lora', 'llama-3.1-8b'], ['llama-3.1-8b', 'llama-3.1-8b']]);
  });

  it('give "other" as the base of an adapter whose parent is not listed, is beyond max_models, or lies in a cycle', () => {
    const labels = new ModelLabels(6);
    const parents = new Map([['orphan', 'not-listed'], ['a', 'b'], ['b', 'a'], ['self', 'self'], ['late-child', 'beyond-max'], ['grandchild', 'a']]);
    labels.serve(['orphan', 'a', 'b', 'self', 'late-child', 'grandchild', 'beyond-max'], parents);
    for (const model of ['orphan', 'a', 'b', 'self', 'late-child', 'grandchild', 'beyond-max']) labels.label(model);
    expect(labels.modelInfo()).toEqual([['orphan', 'other'], ['a', 'other'], ['b', 'other'], ['self', 'other'], ['late-child', 'other'], ['grandchild', 'other']]);
  });

  it('follow a chain of parents to its end (an adapter listed on an adapter)', () => {
    const labels = new ModelLabels(8);
    labels.serve(['top', 'mid', 'base'], new Map([['top', 'mid'], ['mid', 'base']]));
    for (const model of ['top', 'mid', 'base']) labels.label(model);
    expect(labels.modelInfo()).toEqual([['top', 'base'], ['mid', 'base'], ['base', 'base']]);
  });

  it('stay within max_models series over many listings, and drop a name the upstream no longer lists', () => {
    const labels = new ModelLabels(4);
    for (let poll = 0; poll < 12; poll++) {
      const names = ['base', ...Array.from({ length: 8 }, (_, i) => `lora-${poll}-${i}`)];
      labels.serve(names, new Map(names.slice(1).map((name) => [name, 'base'])));
      for (const name of names) labels.label(name);
      expect(labels.modelInfo().length).toBeLessThanOrEqual(4);
    }
    // The four labels went to the first poll's names; that listing is gone, so only base remains.
    expect(labels.modelInfo()).toEqual([['base', 'base']]);
  });

  it('resolve a hostile listing of 1000 names chained parent to parent, and a 1000-name cycle, to a bounded answer', () => {
    const labels = new ModelLabels(1000);
    const names = Array.from({ length: 1000 }, (_, i) => `m${i}`);
    labels.serve(names, new Map(names.slice(0, -1).map((name, i) => [name, `m${i + 1}`])));
    for (const name of names) labels.label(name);
    expect(new Set(labels.modelInfo().map(([, base]) => base))).toEqual(new Set(['m999']));
    labels.serve(names, new Map(names.map((name, i) => [name, `m${(i + 1) % 1000}`])));
    expect(new Set(labels.modelInfo().map(([, base]) => base))).toEqual(new Set(['other']));
  });

  it('give an untagged Ollama name the base of its :latest name', () => {
    const labels = new ModelLabels(4);
    labels.serve(['llama3.2:latest']);
    labels.label('llama3.2');
    expect(labels.modelInfo()).toEqual([['llama3.2', 'llama3.2:latest']]);
  });

  it('know no base before discovery answered: the first names seen have no model_info series', () => {
    const labels = new ModelLabels(4);
    labels.label('sql-lora');
    expect(labels.modelInfo()).toEqual([]);
  });
});
