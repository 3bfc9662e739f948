import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { loadSettings } from '../../../src/config/load.js';
import { renderPrometheusRules } from '../../../src/render/prometheus-rules.js';
import type { AlertingRule } from '../../../src/render/rule-types.js';

/**
 * Every alert links a runbook under docs/runbooks/ (one per alert, and per SLO kind for the
 * burn-rate alert), and every runbook has what on-call needs in the order they need it.
 */
const REPO = fileURLToPath(new URL('../../../', import.meta.url));

const CONFIG = `
workloads:
  - name: chat
    match: { header: { x-workload: chat } }
    slo: { objective: 0.99, ttft: 200ms, itl: 50ms, e2e: 5s }
  - name: default
alerts:
  grafana_url: https://grafana.example.com
`;

const alertsOf = (yaml: string) =>
  renderPrometheusRules(loadSettings({ flags: { config: 't.yaml' }, env: {}, readFile: () => yaml }), { windowScale: 1 })
    .groups.flatMap((g) => g.rules)
    .filter((r): r is AlertingRule => 'alert' in r);

describe('runbooks', () => {
  it('with runbook_base_url, every link is that URL and a file name that exists in docs/runbooks, one per alert and SLO kind', () => {
    const base = 'https://git.example.com/platform/tokentap/-/blob/main/docs/runbooks';
    const alerts = alertsOf(`${CONFIG}  runbook_base_url: ${base}/\n`);
    expect(alerts.length).toBeGreaterThan(6);
    const urls = new Set(alerts.map((a) => a.annotations.runbook_url as string));
    expect([...urls].map((url) => url.slice(base.length + 1)).sort()).toEqual(
      [
        'TokentapCapacityHeadroomLow.md',
        'TokentapErrorBudgetBurn-e2e.md',
        'TokentapErrorBudgetBurn-itl.md',
        'TokentapErrorBudgetBurn-ttft.md',
        'TokentapMetricsAbsent.md',
        'TokentapTargetDown.md',
        'TokentapSLONotInRules.md',
        'TokentapTTFTP99OverBudget.md',
        'TokentapUpstreamDown.md',
        'TokentapWatchdog.md',
      ].sort(),
    );
    for (const url of urls) {
      expect(url.startsWith(`${base}/`), url).toBe(true);
      expect(existsSync(join(REPO, 'docs/runbooks', url.slice(base.length + 1))), url).toBe(true);
    }
  });

  const files = ['TokentapErrorBudgetBurn-ttft', 'TokentapErrorBudgetBurn-itl', 'TokentapErrorBudgetBurn-e2e', 'TokentapTTFTP99OverBudget', 'TokentapWatchdog', 'TokentapMetricsAbsent', 'TokentapTargetDown', 'TokentapUpstreamDown', 'TokentapSLONotInRules', 'TokentapCapacityHeadroomLow'];

  it.each(files)('%s.md states the meaning, the impact, how to confirm, the likely causes and the mitigations', (name) => {
    const text = readFileSync(join(REPO, 'docs/runbooks', `${name}.md`), 'utf8');
    const headings = text.match(/^## .+$/gm) ?? [];
    expect(headings.map((h) => h.replace(/,.*$/, ''))).toEqual(['## Meaning', '## Impact', '## Confirm', '## Likely causes', '## Mitigations']);
    expect(text).toContain('```promql');
    expect(text.startsWith(`# ${name.replace(/-(\w+)$/, ', slo="$1"')}\n`)).toBe(true);
  });

  it.each(files.filter((f) => f.startsWith('TokentapErrorBudgetBurn') || f === 'TokentapTTFTP99OverBudget'))(
    '%s.md tells the latency causes apart by their metrics: queueing, long prompts, decode, GPU memory, upstream errors, cancellations',
    (name) => {
      const text = readFileSync(join(REPO, 'docs/runbooks', `${name}.md`), 'utf8');
      for (const metric of ['vllm:num_requests_waiting', 'gen_ai_token_type="input"', 'tokentap:itl_seconds:p99_rate5m', 'DCGM_FI_DEV_FB_USED', 'upstream_error', 'client_cancelled']) {
        expect(text, metric).toContain(metric);
      }
    },
  );
});
