import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { main } from '../../../src/cli/main.js';
import { loadSettings } from '../../../src/config/load.js';
import { renderPrometheusRules } from '../../../src/render/prometheus-rules.js';
import type { RecordingRule } from '../../../src/render/rule-types.js';

function io() {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  let err = '';
  stderr.on('data', (c: Buffer) => (err += c.toString()));
  stdout.resume();
  return { streams: { stdout, stderr, env: {} }, err: () => err };
}

const WORKLOADS = 'alerts: { grafana_url: https://grafana.example.com, runbook_base_url: https://runbooks.example.com/tokentap }\nworkloads:\n  - name: chat\n    match: { path: /v1/chat/completions }\n    slo: { objective: 0.99, ttft: 200ms, itl: 50ms }\n  - name: default\n';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tokentap-native-render-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function render(config: string, ...flags: string[]): Promise<{ code: number; err: string; rules: string }> {
  await writeFile(join(dir, 'tokentap.yaml'), config);
  const console = io();
  let code: number;
  try {
    code = await main(['render', '--config', join(dir, 'tokentap.yaml'), '--out', join(dir, 'out'), ...flags], console.streams);
  } catch (error) {
    return { code: -1, err: String(error), rules: '' };
  }
  const rules = code === 0 ? await readFile(join(dir, 'out', 'prometheus', 'rules.yaml'), 'utf8') : '';
  return { code, err: console.err(), rules };
}

describe('native rules', () => {
  it('compute the quantiles from the native series and the SLIs from tokentap_slo_events_total, as the classic rules do', () => {
    const settings = loadSettings({ flags: { config: 'c.yaml' }, env: {}, readFile: () => WORKLOADS });
    const rules = renderPrometheusRules(settings, { windowScale: 1, histograms: 'native' }).groups.flatMap((g) => g.rules) as RecordingRule[];
    const p99 = rules.find((r) => r.record === 'tokentap:ttft_seconds:p99_rate5m');
    expect(p99?.expr).toBe('histogram_quantile(0.99, sum by (namespace, workload) (rate(gen_ai_server_time_to_first_token_seconds[5m])))');
    // The SLIs, constants and burn-rate alerts are the classic ones: the counter sees failed and
    // abandoned requests, which no latency histogram holds.
    const classic = renderPrometheusRules(settings, { windowScale: 1 }).groups.flatMap((g) => g.rules) as RecordingRule[];
    const slo = (list: RecordingRule[]) => list.filter((r) => r.record?.startsWith('tokentap:slo_') || ('alert' in r && (r as { alert: string }).alert === 'TokentapErrorBudgetBurn'));
    expect(slo(rules).length).toBeGreaterThan(10);
    expect(slo(rules)).toEqual(slo(classic));
  });

  it('guard the P99 alert with the native sample count: a Prometheus that ingests native histograms stores no _count of them', () => {
    const settings = loadSettings({ flags: { config: 'c.yaml' }, env: {}, readFile: () => WORKLOADS });
    const alert = renderPrometheusRules(settings, { windowScale: 1, histograms: 'native' }).groups.flatMap((g) => g.rules).find((r) => 'alert' in r && r.alert === 'TokentapTTFTP99OverBudget');
    expect(alert?.expr).toBe(
      [
        'tokentap:ttft_seconds:p99_rate5m{workload="chat"} > 0.2',
        'and on (namespace, workload)',
        'histogram_count(sum by (namespace, workload) (increase(gen_ai_server_time_to_first_token_seconds{workload="chat"}[5m]))) >= 100',
      ].join('\n'),
    );
  });

  it('are what render writes for metrics.histograms: native, and for both only with --histograms native', async () => {
    const native = await render(`${WORKLOADS}metrics: { histograms: native }\n`);
    expect(native.code).toBe(0);
    const nativeP99 = 'histogram_quantile(0.99, sum by (namespace, workload) (rate(gen_ai_server_time_to_first_token_seconds[5m])))';
    expect(native.rules).toContain(nativeP99);
    const both = await render(WORKLOADS);
    expect(both.rules).not.toContain(nativeP99);
    expect(both.rules).toContain('_bucket');
    const asked = await render(WORKLOADS, '--histograms', 'native');
    expect(asked.rules).toContain(nativeP99);
    expect(asked.rules).not.toContain('_bucket');
  });

  it('are refused for a sidecar that exposes classic histograms only, and a bad --histograms is named', async () => {
    const refused = await render(`${WORKLOADS}metrics: { histograms: classic }\n`, '--histograms', 'native');
    expect(refused.code).not.toBe(0);
    expect(`${refused.err}`).toMatch(/--histograms native: .*metrics\.histograms: classic/);
    const bad = await render(WORKLOADS, '--histograms', 'sparse');
    expect(bad.code).not.toBe(0);
    expect(bad.err).toMatch(/--histograms: expected "classic" or "native", got "sparse"/);
  });
});
