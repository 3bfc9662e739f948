import { describe, expect, it } from 'vitest';
import { servedModelsOf } from '../../../src/discovery/served-models.js';
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

  it('follow a changed list: a model the upstream no longer lists is "other" from then on', () => {
    const labels = new ModelLabels(8);
    labels.serve(['base', 'lora-a']);
    expect(labels.label('lora-a')).toBe('lora-a');
    labels.serve(['base', 'lora-b']);
    expect([labels.label('lora-a'), labels.label('lora-b')]).toEqual(['other', 'lora-b']);
  });
});
