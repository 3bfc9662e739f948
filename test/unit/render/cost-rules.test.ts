import { describe, expect, it } from 'vitest';
import { loadSettings } from '../../../src/config/load.js';
import { COST_RECORD, costRecordingRules } from '../../../src/render/cost-rules.js';
import { renderPrometheusRules } from '../../../src/render/prometheus-rules.js';

const ALERTS = 'alerts: { grafana_url: https://grafana.test, runbook_base_url: https://runbooks.test }\n';
const settingsFrom = (yaml: string) => loadSettings({ flags: { config: 't.yaml' }, env: {}, readFile: () => `${ALERTS}${yaml}` });

describe('cost recording rules', () => {
  it('are rendered, in a group of their own, only with cost: configured', () => {
    const without = renderPrometheusRules(settingsFrom('workloads: [{ name: chat }]\n'), { windowScale: 1 });
    expect(without.groups.map((g) => g.name)).not.toContain('tokentap-cost');
    const withCost = renderPrometheusRules(settingsFrom('cost: { accelerator_price_per_hour: 2 }\n'), { windowScale: 1 });
    const group = withCost.groups.find((g) => g.name === 'tokentap-cost');
    expect(group?.rules.map((r) => ('record' in r ? r.record : r.alert))).toEqual([
      COST_RECORD.acceleratorSeconds,
      COST_RECORD.cost,
      COST_RECORD.cost,
      COST_RECORD.costPerRequest,
      COST_RECORD.costPerMillionTokens,
      COST_RECORD.costPerMillionInputTokens,
      COST_RECORD.costPerMillionOutputTokens,
      COST_RECORD.costPerGoodRequest,
      'tokentap:request_accelerator_seconds:p50_rate5m',
      'tokentap:request_accelerator_seconds:p99_rate5m',
    ]);
  });

  it('label the two costs with their basis, as the llm-d/OpenCost proposal names them', () => {
    const rules = costRecordingRules(settingsFrom('cost: { accelerator_price_per_hour: 2 }\n'), { windowScale: 1 });
    expect(rules.filter((r) => r.record === COST_RECORD.cost).map((r) => r.labels)).toEqual([{ cost_basis: 'usage' }, { cost_basis: 'allocation' }]);
  });
});
