import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { loadSettings } from '../../../src/config/load.js';
import { TokentapError } from '../../../src/errors.js';

function withFile(yaml: string) {
  return loadSettings({ flags: { config: 'c.yaml' }, env: {}, readFile: () => yaml });
}

describe('model_discovery configuration', () => {
  it('loads the example of docs/model-discovery.md as the page shows it, adapter_idle_after included', () => {
    const page = readFileSync('docs/model-discovery.md', 'utf8');
    const example = /```yaml\n(model_discovery:\n[\s\S]*?)```/.exec(page)?.[1];
    expect(example).toBeDefined();
    expect(withFile(example as string).modelDiscovery).toEqual({ paths: ['/v1/models', '/api/tags', '/info'], intervalMs: 300_000, retryMs: 15_000, timeoutMs: 2000, adapterIdleAfterMs: 300_000 });
  });

  it('reads adapter_idle_after as a duration, 5 minutes by default', () => {
    expect(withFile('model_discovery:\n  adapter_idle_after: 30s\n').modelDiscovery?.adapterIdleAfterMs).toBe(30_000);
    expect(withFile('model_discovery:\n  interval: 1m\n').modelDiscovery?.adapterIdleAfterMs).toBe(300_000);
  });

  it('names the file, line and key of a bad adapter_idle_after', () => {
    let problems: readonly string[] = [];
    try {
      withFile('model_discovery:\n  adapter_idle_after: a while\n');
    } catch (error) {
      problems = (error as TokentapError).problems;
    }
    expect(problems).toEqual(['c.yaml:2: model_discovery.adapter_idle_after: expected a positive duration like "200ms", "30s" or "5m", got "a while"']);
  });
});
