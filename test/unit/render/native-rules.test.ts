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
  it('compute each SLI as 1 - histogram_fraction at the workload threshold, with no sample when the window has no event', () => {
    const settings = loadSettings({ flags: { config: 'c.yaml' }, env: {}, readFile: () => WORKLOADS });
    const rules = renderPrometheusRules(settings, { windowScale: 1, histograms: 'native' }).groups.flatMap((g) => g.rules) as RecordingRule[];
    const ttft1h = rules.find((r) => r.record === 'tokentap:slo_error_ratio:rate1h' && r.labels?.slo === 'ttft');
    expect(ttft1h?.expr).toBe(
      [
        '1 - histogram_fraction(0, 0.2, sum by (namespace, workload) (rate(gen_ai_server_time_to_first_token_seconds{workload="chat"}[1h])))',
        'and on (namespace, workload)',
        '(histogram_count(sum by (namespace, workload) (rate(gen_ai_server_time_to_first_token_seconds{workload="chat"}[1h]))) > 0)',
      ].join('\n'),
    );
    expect(ttft1h?.labels).toEqual({ workload: 'chat', slo: 'ttft' });
    const itl5m = rules.find((r) => r.record === 'tokentap:slo_error_ratio:rate5m' && r.labels?.slo === 'itl');
    expect(itl5m?.expr).toContain('histogram_fraction(0, 0.05, sum by (namespace, workload) (rate(tokentap_inter_token_latency_seconds{workload="chat"}[5m])))');
    // The constants and the alerts are the classic ones: they read the same record names.
    const classic = renderPrometheusRules(settings, { windowScale: 1 }).groups.flatMap((g) => g.rules);
    const alerts = (list: typeof classic) => list.filter((r) => 'alert' in r);
    expect(alerts(rules)).toEqual(alerts(classic));
    expect(rules.filter((r) => r.record === 'tokentap:slo_objective:ratio')).toEqual(classic.filter((r) => 'record' in r && r.record === 'tokentap:slo_objective:ratio'));
  });

  it('are what render writes for metrics.histograms: native, and for both only with --histograms native', async () => {
    const native = await render(`${WORKLOADS}metrics: { histograms: native }\n`);
    expect(native.code).toBe(0);
    expect(native.rules).toContain('histogram_fraction(0, 0.2, ');
    const both = await render(WORKLOADS);
    expect(both.rules).not.toContain('histogram_fraction');
    expect(both.rules).toContain('_bucket');
    const asked = await render(WORKLOADS, '--histograms', 'native');
    expect(asked.rules).toContain('histogram_fraction(0, 0.2, ');
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
