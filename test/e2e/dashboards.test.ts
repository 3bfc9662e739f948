import { readFileSync } from 'node:fs';
import { request } from 'node:http';
import { Writable } from 'node:stream';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadSettings, type SloKind, type Workload } from '../../src/config/load.js';
import { createLogger } from '../../src/log/logger.js';
import { CAPACITY_ROW_TITLE } from '../../src/render/capacity-panels.js';
import { dashboardFileText, renderDashboards } from '../../src/render/dashboards.js';
import { startSidecar, type RunningSidecar } from '../../src/sidecar.js';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { allPanels, expandRows, substituteVariables, type DashboardJson, type DashboardPanel, type DashboardTarget } from '../helpers/dashboard-json.js';
import { dcgmFixture, startDcgmExporter } from '../helpers/dcgm-exporter.js';
import { startPrometheus, type PrometheusServer, type PromSample } from '../helpers/prometheus-server.js';
import { exchange } from '../helpers/replay-upstream.js';
import { eventually } from '../helpers/sidecar.js';

/**
 * Every panel query of the rendered dashboards, run against a real Prometheus 2.42 that has
 * scraped four sidecars (example config, simulator upstream, traffic on every workload) and three
 * DCGM exporters serving the fixtures:
 *
 *   pod (namespace llm)          its DCGM exporter                     how Prometheus scrapes the exporter
 *   vllm-chat-6c9f7d8b5-x2kqp    pod-mapped.prom                      plain: keeps pod / namespace
 *   vllm-chat-6c9f7d8b5-m4n2r    newer-exporter-mig.prom (MIG)        as a PodMonitor does: exported_pod / exported_namespace
 *   vllm-code-7d4b9c5f6-p2x8z    no-pod-labels.prom                   plain; the sidecar finds its GPU by UUID
 *   vllm-batch-5b6c7d8e9-k3j4h   a closed port                        (the sidecar counts scrape errors)
 *
 * and the simulator's vLLM-format /metrics once per pod, as each pod's engine container (the
 * engine rows' vllm:* panels). A fifth pod, vllm-lora-..., has model discovery on in front of a
 * simulator that lists a LoRA adapter on its base model, as vLLM does, for the adapter row
 * (tokentap_model_info, adapter cold starts).
 *
 * Template variables are resolved the way Grafana resolves them: each variable's label_values()
 * query is answered by Prometheus's series API, and All becomes the variable's allValue or the
 * alternation of its values. A row that repeats over `workload` is run once per workload, with
 * `$workload` that one value (regex-escaped), as Grafana does with each copy of the row.
 */

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const EXAMPLE_CONFIG = join(ROOT, 'deploy', 'tokentap.yaml');
const NAMESPACE = 'llm';
const MAPPED_POD = 'vllm-chat-6c9f7d8b5-x2kqp';
const MIG_POD = 'vllm-chat-6c9f7d8b5-m4n2r';
const UNLABELLED_POD = 'vllm-code-7d4b9c5f6-p2x8z';
const BROKEN_DCGM_POD = 'vllm-batch-5b6c7d8e9-k3j4h';
const UNLABELLED_GPU = 'GPU-1a2b3c4d-0000-1111-2222-333344445555';
const LORA_POD = 'vllm-lora-6f7a8b9c0-q5w6e';
const BASE_MODEL = 'llama-3.1-8b-instruct';
const ADAPTER = 'sql-lora';
/** The LoRA pod's adapter_idle_after; each round of LoRA traffic first waits longer, so its first adapter request is a cold start. */
const ADAPTER_IDLE_AFTER_MS = 1000;
/** What Grafana puts for $__rate_interval with a 15 s scrape interval is 1m; the same here. */
const BUILTINS = { __rate_interval: '1m', __interval: '15s', __range: '1h' };

interface Running {
  simulator: RunningSimulator;
  loraSimulator: RunningSimulator;
  loraSidecar: RunningSidecar;
  exporters: Array<Awaited<ReturnType<typeof startDcgmExporter>>>;
  sidecars: Array<{ pod: string; sidecar: RunningSidecar }>;
  prometheus: PrometheusServer;
}

let running: Partial<Running> = {};
const settings = loadSettings({ flags: { config: EXAMPLE_CONFIG }, env: {} });
const dashboards = renderDashboards(settings).map(
  (r) => JSON.parse(dashboardFileText(r)) as DashboardJson,
);

async function startPodSidecar(simulatorUrl: string, pod: string, dcgmUrl: string, env: Record<string, string>): Promise<RunningSidecar> {
  // No model discovery: the simulator lists one model but answers any, and the traffic below uses two.
  const config = `${readFileSync(EXAMPLE_CONFIG, 'utf8')}\ndcgm:\n  url: ${dcgmUrl}\n  interval: 1s\n  timeout: 1s\nmodel_discovery:\n  enabled: false\n`;
  const settings = loadSettings({
    flags: { upstream: simulatorUrl, listen: '127.0.0.1:0', adminListen: '127.0.0.1:0', config: EXAMPLE_CONFIG },
    env: { POD_NAME: pod, POD_NAMESPACE: NAMESPACE, ...env },
    readFile: () => config,
  });
  const discard = new Writable({ write: (_chunk, _encoding, callback) => callback() });
  return startSidecar(settings, createLogger('warn', discard));
}

/** The LoRA pod's sidecar: the example config with model discovery on, no DCGM. */
async function startLoraSidecar(simulatorUrl: string): Promise<RunningSidecar> {
  const config = `${readFileSync(EXAMPLE_CONFIG, 'utf8')}\nmodel_discovery:\n  interval: 5m\n  adapter_idle_after: ${ADAPTER_IDLE_AFTER_MS}ms\n`;
  const settings = loadSettings({
    flags: { upstream: simulatorUrl, listen: '127.0.0.1:0', adminListen: '127.0.0.1:0', config: EXAMPLE_CONFIG },
    env: { POD_NAME: LORA_POD, POD_NAMESPACE: NAMESPACE },
    readFile: () => config,
  });
  const discard = new Writable({ write: (_chunk, _encoding, callback) => callback() });
  return startSidecar(settings, createLogger('warn', discard));
}

/** After idle, two requests to the adapter (the first a cold start, the second warm) and one to its base model, one after the other. */
async function loraTraffic(proxyUrl: string): Promise<void> {
  await new Promise((resolve) => setTimeout(resolve, ADAPTER_IDLE_AFTER_MS + 200));
  for (const model of [ADAPTER, ADAPTER, BASE_MODEL]) {
    await exchange(`${proxyUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-sim-ttft-ms': '20', 'x-sim-itl-ms': '5', 'x-sim-output-tokens': '8' },
      body: JSON.stringify({ model, stream: true, messages: [{ role: 'user', content: 'hello' }] }),
    });
  }
}

/** As vLLM with --enable-per-request-metrics: queue and prefill on the final usage chunk, for the "where TTFT goes" panels. */
const ENGINE_TIMINGS = { 'x-sim-per-request-metrics': '1', 'x-sim-engine-queue-ms': '4', 'x-sim-engine-prefill-ms': '12' };

/** One request per workload of the example config, and a cancelled and a truncated one. */
async function traffic(proxyUrl: string): Promise<void> {
  const chat = (headers: Record<string, string>, model = 'llama-3.1-8b-instruct') =>
    exchange(`${proxyUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...ENGINE_TIMINGS, 'x-sim-ttft-ms': '20', 'x-sim-itl-ms': '5', 'x-sim-output-tokens': '8', ...headers },
      body: JSON.stringify({ model, stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'hello' }] }),
    });
  // As llama.cpp: no queue time, prefill as prompt_ms, for the panels' queue-or-outside series.
  const llamaCompletion = (headers: Record<string, string>, model = 'llama-3.1-8b-instruct') =>
    exchange(`${proxyUrl}/completion`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-sim-engine-prefill-ms': '12', 'x-sim-ttft-ms': '20', 'x-sim-itl-ms': '5', 'x-sim-output-tokens': '8', ...headers },
      body: JSON.stringify({ model, stream: true, n_predict: 8, prompt: 'hello' }),
    });
  await Promise.all([
    llamaCompletion({ 'x-workload': 'chat' }),
    llamaCompletion({ 'x-workload': 'rag' }),
    llamaCompletion({ 'x-workload': 'summarisation' }),
    llamaCompletion({}, 'qwen2.5-coder-7b-instruct'),
    llamaCompletion({}),
    chat({ 'x-workload': 'chat' }),
    chat({ 'x-workload': 'rag' }),
    chat({ 'x-workload': 'summarisation' }),
    chat({}, 'qwen2.5-coder-7b-instruct'),
    chat({ 'x-workload': 'chat', 'x-sim-fault': 'truncate:3' }),
    exchange(`${proxyUrl}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...ENGINE_TIMINGS, 'x-sim-ttft-ms': '20', 'x-sim-itl-ms': '5', 'x-sim-output-tokens': '8' },
      body: JSON.stringify({ model: 'llama-3.1-8b-instruct', stream: true, stream_options: { include_usage: true }, prompt: 'hello' }),
    }),
    cancelAfterFirstChunk(`${proxyUrl}/v1/chat/completions`, {
      'content-type': 'application/json',
      'x-workload': 'chat',
      'x-sim-ttft-ms': '20',
      'x-sim-itl-ms': '200',
      'x-sim-output-tokens': '50',
    }),
  ]);
}

/**
 * A client that gives up mid-stream: it waits for the first body chunk (however long a loaded
 * machine takes), then closes the connection. Settles when the socket is closed, within 30 s.
 */
function cancelAfterFirstChunk(url: string, headers: Record<string, string>): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: 'POST', headers, agent: false });
    const timer = setTimeout(() => {
      req.destroy();
      reject(new Error(`no first chunk from ${url} within 30 s`));
    }, 30_000);
    req.on('error', () => undefined);
    req.on('close', () => {
      clearTimeout(timer);
      resolve();
    });
    req.on('response', (res) => res.once('data', () => req.destroy()));
    req.end(JSON.stringify({ model: 'llama-3.1-8b-instruct', stream: true, messages: [{ role: 'user', content: 'hello' }] }));
  });
}

beforeAll(async () => {
  const simulator = await startSimulator({ port: 0 });
  running.simulator = simulator;
  running.loraSimulator = await startSimulator({ port: 0, model: BASE_MODEL, loras: [ADAPTER], loraLoadMs: 200, loraUnloadAfterMs: ADAPTER_IDLE_AFTER_MS });
  running.loraSidecar = await startLoraSidecar(running.loraSimulator.url);
  const loraSidecar = running.loraSidecar;
  await eventually('the LoRA pod\'s model discovery', () => loraSidecar.models.servedModels(), (list) => list?.length === 2, 30_000);
  const mapped = await startDcgmExporter({ kind: 'text', body: dcgmFixture('pod-mapped.prom') });
  const mig = await startDcgmExporter({ kind: 'text', body: dcgmFixture('newer-exporter-mig.prom') });
  const unlabelled = await startDcgmExporter({ kind: 'text', body: dcgmFixture('no-pod-labels.prom') });
  const dead = await startDcgmExporter({ kind: 'status', status: 200 });
  await dead.close();
  running.exporters = [mapped, mig, unlabelled];
  running.sidecars = [];
  for (const [pod, url, env] of [
    [MAPPED_POD, mapped.url, {}],
    [MIG_POD, mig.url, {}],
    [UNLABELLED_POD, unlabelled.url, { NVIDIA_VISIBLE_DEVICES: UNLABELLED_GPU }],
    [BROKEN_DCGM_POD, dead.url, {}],
  ] as const) {
    running.sidecars.push({ pod, sidecar: await startPodSidecar(simulator.url, pod, url, env) });
  }
  running.prometheus = await startPrometheus({
    scrapeTargets: [
      ...running.sidecars.map(({ pod, sidecar }) => ({ url: sidecar.adminUrl, job: `tokentap-${pod}`, labels: { namespace: NAMESPACE, pod } })),
      { url: running.loraSidecar.adminUrl, job: `tokentap-${LORA_POD}`, labels: { namespace: NAMESPACE, pod: LORA_POD } },
      // The engine container of each pod: the simulator's vLLM-format /metrics, with the pod's target labels.
      ...running.sidecars.map(({ pod }) => ({ url: simulator.url, job: `vllm-${pod}`, labels: { namespace: NAMESPACE, pod } })),
      { url: mapped.url, job: 'dcgm-node-1' },
      // A PodMonitor attaches the exporter pod's own labels; Prometheus renames the exporter's to exported_*.
      { url: mig.url, job: 'dcgm-node-7', labels: { namespace: 'gpu-operator', pod: 'nvidia-dcgm-exporter-7xk2p' } },
      { url: unlabelled.url, job: 'dcgm-node-2' },
    ],
  });
  const prometheus = running.prometheus;
  await prometheus.waitFor('every target up', 'up == 1', (r) => r.length === 12, 60_000);
  // A counter's series starts at its first increment, which rate() and increase() cannot see: send
  // traffic, let Prometheus scrape every series, then send more so every rate has an increase.
  for (const { sidecar } of running.sidecars) await traffic(sidecar.proxyUrl);
  await loraTraffic(running.loraSidecar.proxyUrl);
  await prometheus.waitFor('the first round of requests scraped', `count by (pod) (tokentap_requests_total{pod!="${LORA_POD}", outcome=~"completed|truncated|client_cancelled"})`, (r) => r.length === 4 && r.every((s) => s.value >= 3), 60_000);
  // Every LoRA request's TTFT scraped, not only the cold start counted at its start.
  const loraTtfts = `sum(gen_ai_server_time_to_first_token_seconds_count{pod="${LORA_POD}"})`;
  await prometheus.waitFor('the first round of LoRA requests scraped', loraTtfts, (r) => r[0]?.value === 3, 60_000);
  for (const { sidecar } of running.sidecars) await traffic(sidecar.proxyUrl);
  await loraTraffic(running.loraSidecar.proxyUrl);
  await prometheus.waitFor('the second round of requests scraped', 'sum by (pod) (increase(tokentap_requests_total[1m])) > 0', (r) => r.length === 5, 60_000);
  await prometheus.waitFor('the second round of LoRA requests scraped', loraTtfts, (r) => r[0]?.value === 6, 60_000);
  await prometheus.waitFor('two adapter cold starts scraped', `tokentap_adapter_cold_starts_total{pod="${LORA_POD}"}`, (r) => r.length === 1 && r[0]?.value === 2, 60_000);
  await prometheus.waitFor('sidecar GPU gauges of three pods', 'count by (pod) (tokentap_gpu_memory_used_bytes)', (r) => r.length === 3, 60_000);
  await prometheus.waitFor('DCGM scrape errors of the broken pod', 'tokentap_dcgm_scrape_errors_total', (r) => r.some((s) => s.metric.pod === BROKEN_DCGM_POD), 60_000);
}, 300_000);

afterAll(async () => {
  await running.prometheus?.stop();
  for (const { sidecar } of running.sidecars ?? []) await sidecar.close();
  await running.loraSidecar?.close();
  await running.loraSimulator?.close();
  for (const exporter of running.exporters ?? []) await exporter.close();
  await running.simulator?.close();
  running = {};
}, 60_000);

function escapeRegex(value: string): string {
  return value.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** Answers Grafana's `label_values(selector, label)` as the Prometheus data source does (series API). */
async function labelValues(prometheus: PrometheusServer, query: string): Promise<string[]> {
  const match = /^label_values\((.+),\s*(\w+)\)$/.exec(query);
  if (match === null) throw new Error(`not a label_values() query: ${query}`);
  const [, selector, label] = match as unknown as [string, string, string];
  const response = await fetch(`${prometheus.url}/api/v1/series`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ 'match[]': selector, start: String(Date.now() / 1000 - 3600) }).toString(),
  });
  const body = (await response.json()) as { status: string; data: Array<Record<string, string>>; error?: string };
  if (body.status !== 'success') throw new Error(`label_values query ${query}: ${body.error}`);
  return [...new Set(body.data.map((s) => s[label]).filter((v): v is string => v !== undefined && v !== ''))].sort();
}

/** Every variable at "All", resolved in order: allValue if it has one, else the alternation of its values. */
async function resolveAll(prometheus: PrometheusServer, dashboard: DashboardJson): Promise<{ values: Record<string, string>; options: Record<string, string[]> }> {
  const values: Record<string, string> = { ...BUILTINS };
  const options: Record<string, string[]> = {};
  for (const variable of dashboard.templating.list) {
    if (variable.type === 'datasource') continue;
    const found = await labelValues(prometheus, substituteVariables(String(variable.query), values));
    options[variable.name] = found;
    values[variable.name] = variable.allValue ?? `(${found.map(escapeRegex).join('|')})`;
  }
  return { values, options };
}

/**
 * A query expected to answer that returns nothing is asked again after one and two scrape intervals
 * before it counts: on a loaded machine one scrape of a sidecar (or its reading of DCGM) can miss its
 * 1 s timeout, and a failed scrape leaves its series absent until the next one succeeds. A panel
 * that finds nothing finds nothing three times. (Queries expected to be empty are asked once.)
 */
async function seriesOf(prometheus: PrometheusServer, expr: string): Promise<PromSample[]> {
  let result = await prometheus.query(expr);
  for (let retry = 0; retry < 2 && result.length === 0; retry++) {
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    result = await prometheus.query(expr);
  }
  return result;
}

async function failures(
  prometheus: PrometheusServer,
  panels: DashboardPanel[],
  values: Record<string, string>,
  expectedEmpty: (panel: DashboardPanel, target: DashboardTarget) => boolean = () => false,
): Promise<string[]> {
  const problems: string[] = [];
  for (const panel of panels) {
    for (const target of panel.targets ?? []) {
      const expr = substituteVariables(target.expr, values);
      try {
        const result = expectedEmpty(panel, target) ? await prometheus.query(expr) : await seriesOf(prometheus, expr);
        if (result.length === 0) problems.push(`"${panel.title}" (${target.refId}) returned no series: ${expr.slice(0, 300)}`);
      } catch (error) {
        problems.push(`"${panel.title}" (${target.refId}) failed: ${(error as Error).message}`);
      }
    }
  }
  return problems;
}

/** The SLO kind of a budget-line query (legend "budget" on a latency panel, "TTFT budget" / "ITL budget" on the capacity panels). */
function budgetKind(panel: DashboardPanel, target: { legendFormat?: string }): SloKind | undefined {
  const legend = target.legendFormat ?? '';
  if (!legend.endsWith('budget')) return undefined;
  const text = `${legend} ${panel.title}`;
  return text.includes('TTFT') ? 'ttft' : text.includes('ITL') ? 'itl' : 'e2e';
}

/** A query of a repeated row that has nothing to answer for `workload`: SLO, goodput or budget without that part configured. */
function isUnconfigured(panel: DashboardPanel, target: { legendFormat?: string }, workload: Workload | undefined): boolean {
  if (workload === undefined) return false;
  const kind = budgetKind(panel, target);
  if (kind !== undefined) return workload.slo?.thresholdsS[kind] === undefined;
  const aboutSlo = /SLO attainment|error budget|burn rate/.test(panel.title) || (target.legendFormat ?? '').startsWith('goodput');
  return aboutSlo && workload.slo === undefined;
}

const GPU_FROM_DCGM = ['GPU memory used and total (DCGM)', 'GPU memory free (DCGM)', 'GPU utilisation (DCGM)'];
const GPU_FROM_SIDECAR = ['GPU memory used and total (sidecar)', 'GPU utilisation (sidecar)'];

describe('the PromQL of docs/model-discovery.md against a real Prometheus', () => {
  const page = readFileSync(join(ROOT, 'docs', 'model-discovery.md'), 'utf8');
  const [byBaseModel, warmBuckets] = [...page.matchAll(/```promql\n([\s\S]*?)```/g)].map((m) => m[1] as string);

  it('groups TTFT by base model: the LoRA pod\'s adapter and base model under the base model', async () => {
    const result = await (running.prometheus as PrometheusServer).query(byBaseModel as string);
    expect(result.map((r) => [r.metric.namespace, r.metric.base_model])).toEqual([[NAMESPACE, BASE_MODEL]]);
    expect(result[0]?.value).toBeGreaterThan(0);
  }, 60_000);

  it('leaves the warm requests\' TTFT buckets when the cold starts\' are subtracted, and every series without a cold start whole', async () => {
    const prometheus = running.prometheus as PrometheusServer;
    // Both in one query, so the rates are over the same samples: two queries at one evaluation time
    // can still differ, when a scrape stamped before that time is stored between them.
    const both = await prometheus.query(
      `label_replace(${warmBuckets as string}, "query", "warm", "", "") or label_replace(rate(gen_ai_server_time_to_first_token_seconds_bucket[5m]), "query", "all", "", "")`,
    );
    const part = (name: string) => both.filter((r) => r.metric.query === name).map((r) => ({ ...r, metric: Object.fromEntries(Object.entries(r.metric).filter(([label]) => label !== 'query')) }));
    const warm = part('warm');
    const all = part('all');
    expect(warm.length).toBe(all.length);
    const inf = (samples: typeof all, model: string) => samples.filter((r) => r.metric.gen_ai_request_model === model && r.metric.le === '+Inf');
    // Two cold and two warm adapter requests over the two rounds: some rate left, less than all.
    const [warmAdapter] = inf(warm, ADAPTER);
    const [allAdapter] = inf(all, ADAPTER);
    expect(warmAdapter?.value).toBeGreaterThan(0);
    expect(warmAdapter?.value).toBeLessThan(allAdapter?.value ?? 0);
    // A model without cold starts (the base model, and every pod without discovery) keeps all its requests.
    const byKey = (samples: typeof all) => new Map(samples.map((r) => [JSON.stringify(r.metric), r.value]));
    const warmByKey = byKey(warm);
    const whole = all.filter((r) => r.metric.gen_ai_request_model !== ADAPTER);
    expect(whole.length).toBeGreaterThan(0);
    for (const r of whole) expect(warmByKey.get(JSON.stringify(r.metric)), JSON.stringify(r.metric)).toBe(r.value);
  }, 60_000);
});

describe.each(dashboards.map((d) => [d.uid, d] as const))('dashboard %s against a real Prometheus', (_uid, dashboard) => {
  const panels = allPanels(dashboard).filter((p) => p.type !== 'row');

  it('offers the namespace, workloads, pods and models that were scraped in its variables', async () => {
    const { options } = await resolveAll(running.prometheus as PrometheusServer, dashboard);
    expect(options.namespace).toEqual([NAMESPACE]);
    expect(options.workload).toEqual(['chat', 'code', 'default', 'rag', 'summarisation']);
    expect(options.pod).toEqual([BROKEN_DCGM_POD, MIG_POD, MAPPED_POD, UNLABELLED_POD, LORA_POD].sort());
    expect(options.model).toEqual(['llama-3.1-8b-instruct', 'qwen2.5-coder-7b-instruct', ADAPTER]);
  }, 60_000);

  it('every panel query parses and returns data with every variable at All, per workload in the repeated rows, except what the workload has not configured', async () => {
    const prometheus = running.prometheus as PrometheusServer;
    const { values, options } = await resolveAll(prometheus, dashboard);
    // Capacity and cost reads recording rules and the cost accounting's series: capacity-dashboard.test.ts runs it.
    const rows = expandRows(dashboard, { workload: options.workload ?? [] }).filter((r) => r.title !== CAPACITY_ROW_TITLE);
    expect(rows.filter((r) => r.repeat !== undefined)).toHaveLength(2 * 5);
    expect(rows.flatMap((r) => r.panels).length).toBe(16 + 5 * 15);
    for (const row of rows) {
      const workload = settings.workloads.find((w) => w.name === row.repeat?.value);
      const scoped = row.repeat === undefined ? values : { ...values, workload: escapeRegex(row.repeat.value) };
      const problems = await failures(prometheus, row.panels, scoped, (panel, target) => isUnconfigured(panel, target, workload));
      // A workload answers no SLO, goodput or budget query for what its configuration does not have.
      const expected = row.panels.flatMap((panel) =>
        (panel.targets ?? []).filter((t) => isUnconfigured(panel, t, workload)).map((t) => `"${panel.title}" (${t.refId}) returned no series`),
      );
      expect(problems.map((p) => p.replace(/ returned no series: .*$/s, ' returned no series')), row.title).toEqual(expected);
    }
  }, 240_000);

  it('draws in each workload\'s row that workload\'s own configured budget, and no budget line for a threshold it does not have', async () => {
    const prometheus = running.prometheus as PrometheusServer;
    const { values, options } = await resolveAll(prometheus, dashboard);
    let lines = 0;
    for (const row of expandRows(dashboard, { workload: options.workload ?? [] })) {
      if (row.repeat === undefined) continue;
      const workload = settings.workloads.find((w) => w.name === row.repeat?.value);
      for (const panel of row.panels) {
        for (const target of (panel.targets ?? []).filter((t) => budgetKind(panel, t) !== undefined)) {
          const threshold = workload?.slo?.thresholdsS[budgetKind(panel, target) as SloKind];
          const result = await prometheus.query(substituteVariables(target.expr, { ...values, workload: escapeRegex(row.repeat.value) }));
          expect(result.map((r) => [r.metric.workload, r.value]), `${row.title} / ${panel.title}`).toEqual(threshold === undefined ? [] : [[row.repeat.value, threshold]]);
          if (threshold !== undefined) lines++;
        }
      }
    }
    // Every configured threshold once on its latency panel, and TTFT and ITL once more on their capacity panels.
    const configured = settings.workloads.flatMap((w) => Object.keys(w.slo?.thresholdsS ?? {}));
    expect(lines).toBe(configured.length + configured.filter((k) => k !== 'e2e').length);
  }, 120_000);

  it('with var-workload set to a workload that has no series, every per-workload panel is empty: no query is pinned to a workload', async () => {
    const prometheus = running.prometheus as PrometheusServer;
    const { values } = await resolveAll(prometheus, dashboard);
    const rows = expandRows(dashboard, { workload: ['nosuchworkload'] }).filter((r) => r.repeat !== undefined);
    const repeated = rows.flatMap((r) => r.panels);
    expect(repeated.length).toBe(15);
    const targets = repeated.flatMap((p) => p.targets ?? []).length;
    // failures() lists every query that returned no series: all of them.
    expect(await failures(prometheus, repeated, { ...values, workload: 'nosuchworkload' }, () => true)).toHaveLength(targets);
    // And the same rows for chat do answer: the emptiness is the filter, not a broken query.
    const chat = expandRows(dashboard, { workload: ['chat'] }).filter((r) => r.repeat !== undefined).flatMap((r) => r.panels);
    const chatWorkload = settings.workloads.find((w) => w.name === 'chat');
    expect((await failures(prometheus, chat, { ...values, workload: 'chat' }, (panel, target) => isUnconfigured(panel, target, chatWorkload))).length).toBeLessThan(targets / 4);
  }, 120_000);

  it('finds the DCGM GPU of a pod whether Prometheus kept the exporter pod label or renamed it exported_pod', async () => {
    const prometheus = running.prometheus as PrometheusServer;
    const { values } = await resolveAll(prometheus, dashboard);
    const gpuPanels = panels.filter((p) => GPU_FROM_DCGM.includes(p.title) || GPU_FROM_SIDECAR.includes(p.title));
    expect(gpuPanels).toHaveLength(5);
    for (const pod of [MAPPED_POD, MIG_POD]) {
      expect(await failures(prometheus, gpuPanels, { ...values, pod: escapeRegex(pod) }), pod).toEqual([]);
    }
    // The MIG pod sees its own instance only: 65300 MiB used, 71020 MiB in total.
    const mig = { ...values, pod: escapeRegex(MIG_POD) };
    const memory = panels.find((p) => p.title === 'GPU memory used and total (DCGM)') as DashboardPanel;
    const [used, total] = await Promise.all((memory.targets ?? []).map((t) => prometheus.query(substituteVariables(t.expr, mig))));
    expect(used?.map((s) => [s.metric.pod, s.metric.GPU_I_ID, s.metric.hostname, s.value])).toEqual([[MIG_POD, '2', 'gpu-node-7', 65300 * 1048576]]);
    expect(total?.map((s) => s.value)).toEqual([(65300 + 5120 + 600) * 1048576]);
  }, 120_000);

  it('shows the GPU of a pod the exporter could not map only through the sidecar gauges', async () => {
    const prometheus = running.prometheus as PrometheusServer;
    const { values } = await resolveAll(prometheus, dashboard);
    const only = { ...values, pod: escapeRegex(UNLABELLED_POD) };
    const dcgm = panels.filter((p) => GPU_FROM_DCGM.includes(p.title));
    const sidecar = panels.filter((p) => GPU_FROM_SIDECAR.includes(p.title));
    expect((await failures(prometheus, dcgm, only, () => true)).length).toBe(4);
    // The no-pod-labels fixture has no utilisation series: only memory comes through.
    expect(await failures(prometheus, sidecar, only, (panel) => panel.title === 'GPU utilisation (sidecar)')).toEqual([expect.stringContaining('"GPU utilisation (sidecar)" (A) returned no series')]);
  }, 120_000);
});
