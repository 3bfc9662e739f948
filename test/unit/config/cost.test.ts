import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { loadSettings } from '../../../src/config/load.js';
import { problemsOf } from '../../helpers/problems.js';

const withFile = (yaml: string, env: Record<string, string> = {}) => loadSettings({ flags: { config: 'c.yaml' }, env, readFile: () => yaml });

describe('cost: settings', () => {
  it('is off without a cost section', () => {
    expect(loadSettings({ flags: {}, env: {} }).cost).toBeUndefined();
  });

  it('reads the price, the count and the currency, and defaults one accelerator priced in USD', () => {
    expect(withFile('cost: { accelerator_price_per_hour: 2.5, accelerators: 8, currency: EUR }\n').cost).toEqual({ pricePerHour: 2.5, accelerators: 8, currency: 'EUR' });
    const cost = withFile('cost: { accelerator_price_per_hour: 1.2 }\n').cost;
    expect(cost).toEqual({ pricePerHour: 1.2, accelerators: 1, currency: 'USD' });
    expect(Object.isFrozen(cost)).toBe(true);
  });

  it('takes the count from DCGM when an exporter is configured, in the file or by TOKENTAP_DCGM_URL', () => {
    expect(withFile('cost: { accelerator_price_per_hour: 2, accelerators: dcgm }\ndcgm: { url: http://10.0.0.7:9400/metrics }\n').cost?.accelerators).toBe('dcgm');
    expect(withFile('cost: { accelerator_price_per_hour: 2, accelerators: dcgm }\n', { TOKENTAP_DCGM_URL: 'http://10.0.0.7:9400/metrics' }).cost?.accelerators).toBe('dcgm');
  });

  it('refuses a cost section without a price, saying what to write', () => {
    expect(problemsOf(() => withFile('cost: { accelerators: 2 }\n'))).toEqual(['c.yaml:1: cost.accelerator_price_per_hour: required: the price of one accelerator for one hour, e.g. 2.5']);
  });

  it('refuses a price of zero or below, a string price, a fractional or zero count and a currency that is no code, each with its path', () => {
    const problems = problemsOf(() => withFile('cost:\n  accelerator_price_per_hour: 0\n  accelerators: 1.5\n  currency: dollars\n'));
    expect(problems).toEqual([
      'c.yaml:2: cost.accelerator_price_per_hour: expected a price above 0, e.g. 2.5',
      'c.yaml:3: cost.accelerators: expected the number of accelerators of the pod, a whole number from 1 to 1024, or "dcgm" to read it from the DCGM exporter',
      'c.yaml:4: cost.currency: expected a currency code of three capital letters (ISO 4217) such as USD or EUR',
    ]);
    expect(problemsOf(() => withFile('cost: { accelerator_price_per_hour: "2.5", accelerators: 0 }\n'))).toEqual([
      'c.yaml:1: cost.accelerator_price_per_hour: expected the price of one accelerator for one hour, a number such as 2.5',
      'c.yaml:1: cost.accelerators: expected the number of accelerators of the pod, a whole number from 1 to 1024, or "dcgm" to read it from the DCGM exporter',
    ]);
  });

  it('refuses accelerators: dcgm without a DCGM exporter to read, naming both ways out', () => {
    expect(problemsOf(() => withFile('cost:\n  accelerator_price_per_hour: 2\n  accelerators: dcgm\n'))).toEqual([
      'c.yaml:3: cost.accelerators: "dcgm" reads the GPU count from the DCGM exporter, but none is configured: set dcgm.url (or TOKENTAP_DCGM_URL), or give the count as a number',
    ]);
  });

  it('refuses unknown keys in the section', () => {
    expect(problemsOf(() => withFile('cost: { accelerator_price_per_hour: 2, gpus: 4 }\n')).join('\n')).toMatch(/cost.*gpus/);
  });
});

describe('the cost: section as docs/capacity-and-cost.md shows it', () => {
  it('loads exactly as written on the page', () => {
    const page = readFileSync(new URL('../../../docs/capacity-and-cost.md', import.meta.url), 'utf8');
    const snippet = /```yaml\n(cost:[\s\S]*?)```/.exec(page)?.[1];
    expect(snippet).toBeDefined();
    expect(withFile(snippet as string).cost).toEqual({ pricePerHour: 2.5, accelerators: 1, currency: 'USD' });
  });
});
