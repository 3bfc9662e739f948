import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadSettings } from '../../src/config/load.js';
import { renderPrometheusRules } from '../../src/render/prometheus-rules.js';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { scrape } from '../helpers/prometheus-text.js';
import { exchange } from '../helpers/replay-upstream.js';
import { eventually, startTestSidecar } from '../helpers/sidecar.js';

/**
 * Thresholds whose decimal is not what floating point makes of it after a unit conversion
 * (4.2 / 1000 = 0.004200000000000001, 1.1 * 3600 = 3960.0000000000005): the boundary the sidecar
 * exposes, the constant the rules record and the `le` the rules select must all be the number the
 * file says, or the capacity rules read an empty bucket.
 */
const CONFIG = `
alerts:
  grafana_url: https://grafana.corp.test
  runbook_base_url: https://runbooks.corp.test/tokentap
workloads:
  - name: chat
    slo: { objective: 0.99, ttft: 1.1h, itl: 4.2ms, e2e: 4.1m }
`;

let simulator: RunningSimulator;
let sidecar: Awaited<ReturnType<typeof startTestSidecar>>;

beforeAll(async () => {
  simulator = await startSimulator({ port: 0, ttftMs: 5, itlMs: 2, outputTokens: 4 });
  sidecar = await startTestSidecar(simulator.url, CONFIG);
});

afterAll(async () => {
  await sidecar?.close();
  await simulator?.close();
});

/** The `le` label values the sidecar exposes for a histogram, as written on /metrics. */
function exposedBounds(families: Awaited<ReturnType<typeof scrape>>, name: string): string[] {
  return [...new Set(families.get(name)?.metrics.flatMap((m) => Object.keys(m.buckets ?? {})) ?? [])];
}

describe('SLO thresholds written with a unit conversion', () => {
  it('are exposed, recorded and selected as the decimal the file writes', async () => {
    const body = JSON.stringify({ model: 'sim-model', stream: true, messages: [{ role: 'user', content: 'hi' }] });
    const answer = await exchange(`${sidecar.proxyUrl}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    expect(answer.status).toBe(200);
    const families = await eventually('the request recorded', () => scrape(sidecar.adminUrl), (m) => (m.get('tokentap_requests_total')?.metrics.length ?? 0) > 0);

    expect(exposedBounds(families, 'gen_ai_server_time_to_first_token_seconds')).toContain('3960');
    expect(exposedBounds(families, 'tokentap_inter_token_latency_seconds')).toContain('0.0042');
    expect(exposedBounds(families, 'gen_ai_server_request_duration_seconds')).toContain('246');

    const settings = loadSettings({ flags: { config: 't.yaml' }, env: {}, readFile: () => CONFIG });
    const rules = renderPrometheusRules(settings, { windowScale: 1 }).groups.flatMap((g) => g.rules);
    const thresholds = rules.filter((r) => 'record' in r && r.record === 'tokentap:slo_threshold:seconds').map((r) => r.expr);
    expect(thresholds).toEqual(['vector(3960)', 'vector(0.0042)', 'vector(246)']);

    // The capacity rules' threshold buckets: each `le=~"..."` (RE2, anchored) selects a bound the sidecar exposes.
    const byConcurrency = {
      tokentap_time_to_first_token_by_concurrency_seconds: exposedBounds(families, 'tokentap_time_to_first_token_by_concurrency_seconds'),
      tokentap_inter_token_latency_by_concurrency_seconds: exposedBounds(families, 'tokentap_inter_token_latency_by_concurrency_seconds'),
    };
    for (const [histogram, bounds] of Object.entries(byConcurrency)) {
      const selected = rules.flatMap((r) => [...r.expr.matchAll(new RegExp(`${histogram}_bucket\\{[^}]*le=~"((?:[^"\\\\]|\\\\.)*)"`, 'g'))].map((m) => JSON.parse(`"${m[1]}"`) as string));
      expect(selected.length, histogram).toBeGreaterThan(0);
      for (const pattern of selected) expect(bounds.filter((le) => new RegExp(`^(?:${pattern})$`).test(le)), `${histogram} le=~"${pattern}" among ${bounds.join(' ')}`).toHaveLength(1);
    }
  });
});
