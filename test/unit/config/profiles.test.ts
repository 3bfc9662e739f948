import { describe, expect, it } from 'vitest';
import { loadSettings } from '../../../src/config/load.js';
import { TokentapError } from '../../../src/errors.js';

function load(yaml: string) {
  return loadSettings({ flags: { config: 'tokentap.yaml' }, env: {}, readFile: () => yaml });
}

function problems(yaml: string): readonly string[] {
  try {
    load(yaml);
  } catch (error) {
    if (error instanceof TokentapError) return error.problems;
    throw error;
  }
  throw new Error('expected the configuration to be refused');
}

describe('profiles: configuration', () => {
  it('records every workload by default: 10,000 requests each, blocks of 512 tokens', () => {
    expect(load('').profiles).toEqual({ maxRequestsPerWorkload: 10_000, blockTokens: 512, workloads: ['default'] });
  });

  it('leaves out a workload with profile: false, and every workload with profiles.enabled: false', () => {
    const two = 'workloads:\n  - name: a\n    match: { path: /a }\n    profile: false\n  - name: b\n';
    expect(load(two).profiles?.workloads).toEqual(['b']);
    expect(load(`${two}profiles:\n  enabled: false\n`).profiles).toBeUndefined();
    expect(load('workloads:\n  - name: a\n    profile: false\n').profiles).toBeUndefined();
  });

  it('takes max_requests_per_workload and block_tokens', () => {
    expect(load('profiles:\n  max_requests_per_workload: 500\n  block_tokens: 16\n').profiles).toMatchObject({ maxRequestsPerWorkload: 500, blockTokens: 16 });
  });

  it('refuses a block below 16 tokens, a cap of 0 requests and a non-boolean profile, naming line and path', () => {
    expect(problems('profiles:\n  block_tokens: 1\n')).toEqual([
      'tokentap.yaml:2: profiles.block_tokens: expected at least 16 tokens (the smallest block replay tools use: vLLM timed_trace, Bailian traces)',
    ]);
    expect(problems('profiles:\n  max_requests_per_workload: 0\n')).toEqual(['tokentap.yaml:2: profiles.max_requests_per_workload: expected a whole number of at least 1']);
    expect(problems('workloads:\n  - name: a\n    profile: "no"\n')).toEqual(['tokentap.yaml:3: workloads[0].profile: expected true or false']);
  });
});
