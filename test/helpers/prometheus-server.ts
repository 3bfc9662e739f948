import { copyFile, writeFile } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { stringify } from 'yaml';
import { startManagedProcess, type ManagedProcess } from './managed-process.js';
import { requireTool } from './required-tools.js';

/**
 * A real Prometheus (the Debian 2.42 binary, `/usr/bin/prometheus`) for tests: free loopback port,
 * temporary config and TSDB, scrape and rule evaluation every second by default.
 *
 *   const prometheus = await startPrometheus({ scrapeTargets: [sidecar.adminUrl], ruleFiles: ['/tmp/x/rules.yaml'] });
 *   try {
 *     await prometheus.waitFor('chat requests scraped', 'sum(tokentap_requests_total{workload="chat"})', (r) => r.length === 1);
 *     const [sample] = await prometheus.query('up');
 *     const firing = await prometheus.waitForAlert('TokentapTTFTP99OverBudget', { workload: 'chat' });
 *   } finally {
 *     await prometheus.stop();
 *   }
 *
 * query() throws with Prometheus's own error text for a bad expression, so a test can also use it to
 * check that a PromQL string (a dashboard panel, a rule) parses and runs.
 */

export interface PrometheusOptions {
  /** Where to scrape: `http://host:port` or `host:port` (path /metrics), or `http://host:port/custom/path`. One job per target, named `target0`, `target1`, … unless `job` is given. */
  scrapeTargets?: Array<string | { url: string; job?: string; labels?: Record<string, string> }>;
  /** Rule files (YAML, plain Prometheus format); copied into the temporary directory. */
  ruleFiles?: string[];
  /** Alertmanager to send alerts to: `http://host:port` or `host:port`. */
  alertmanager?: string;
  /** Default `1s`. */
  scrapeInterval?: string;
  /** Default `1s`. */
  evaluationInterval?: string;
  /** Default 20 s. */
  readyTimeoutMs?: number;
  /** `--enable-feature=` values, e.g. `native-histograms` (which also makes 2.42 scrape by protobuf first). */
  featureFlags?: string[];
}

/** One element of an instant-vector result (`value` already a number; NaN and ±Inf kept). */
export interface PromSample {
  metric: Record<string, string>;
  value: number;
  /** Evaluation time, Unix seconds. */
  time: number;
}

export interface PromSeries {
  metric: Record<string, string>;
  values: Array<{ time: number; value: number }>;
}

/** An alert as /api/v1/alerts reports it. */
export interface PromAlert {
  labels: Record<string, string>;
  annotations: Record<string, string>;
  state: 'pending' | 'firing';
  activeAt: string;
  value: string;
}

export interface PrometheusServer {
  /** `http://127.0.0.1:PORT` */
  readonly url: string;
  /** `127.0.0.1:PORT` */
  readonly address: string;
  /** Instant query; `time` in Unix seconds (default now). Scalars come back as one sample with no labels. */
  query(expr: string, time?: number): Promise<PromSample[]>;
  /** Range query over [start, end] (Unix seconds) with `step` seconds. */
  queryRange(expr: string, start: number, end: number, step: number): Promise<PromSeries[]>;
  /** Polls `query(expr)` every 250 ms until `predicate` holds; throws with `what`, the last result and Prometheus's log after `timeoutMs` (default 20 s). */
  waitFor(what: string, expr: string, predicate: (result: PromSample[]) => boolean, timeoutMs?: number): Promise<PromSample[]>;
  /** Active alerts (pending and firing). */
  alerts(): Promise<PromAlert[]>;
  /** Waits until an alert named `alertname` whose labels include `labels` is firing; returns it. */
  waitForAlert(alertname: string, labels?: Record<string, string>, timeoutMs?: number): Promise<PromAlert>;
  /** Scrape targets with their health (`up`/`down`/`unknown`) and last error. */
  targets(): Promise<Array<{ scrapeUrl: string; health: string; lastError: string }>>;
  /** Prometheus's own log so far. */
  output(): string;
  /** Stops Prometheus and deletes its config and TSDB. Safe to call twice. */
  stop(): Promise<void>;
}

function hostPort(target: string): { address: string; path: string } {
  const url = new URL(target.includes('://') ? target : `http://${target}`);
  return { address: url.host, path: url.pathname === '/' ? '/metrics' : url.pathname };
}

function toNumber(text: string): number {
  // Prometheus writes "+Inf", "-Inf" and "NaN"; Number() reads "NaN" but not "+Inf".
  if (text === '+Inf') return Infinity;
  if (text === '-Inf') return -Infinity;
  return Number(text);
}

/** Queries go as POST forms (long expressions); /api/v1/alerts and /api/v1/targets only answer GET. */
async function api<T>(baseUrl: string, path: string, params: Record<string, string> = {}): Promise<T> {
  const post = Object.keys(params).length > 0;
  const response = await fetch(`${baseUrl}${path}`, {
    method: post ? 'POST' : 'GET',
    ...(post ? { headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams(params).toString() } : {}),
    signal: AbortSignal.timeout(10_000),
  });
  const body = (await response.json()) as { status: string; data: T; error?: string; errorType?: string };
  if (body.status !== 'success') throw new Error(`Prometheus ${path} ${JSON.stringify(params)}: ${body.errorType}: ${body.error}`);
  return body.data;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export async function startPrometheus(options: PrometheusOptions = {}): Promise<PrometheusServer> {
  const targets = options.scrapeTargets ?? [];
  const process: ManagedProcess = await startManagedProcess({
    name: 'prometheus',
    binary: requireTool('prometheus'),
    readyPath: '/-/ready',
    readyTimeoutMs: options.readyTimeoutMs,
    async prepare(dir, address) {
      const ruleFiles: string[] = [];
      for (const [index, file] of (options.ruleFiles ?? []).entries()) {
        const copy = join(dir, `${index}-${basename(file)}`);
        await copyFile(file, copy);
        ruleFiles.push(copy);
      }
      const config = {
        global: { scrape_interval: options.scrapeInterval ?? '1s', evaluation_interval: options.evaluationInterval ?? '1s' },
        rule_files: ruleFiles,
        ...(options.alertmanager
          ? { alerting: { alertmanagers: [{ static_configs: [{ targets: [hostPort(options.alertmanager).address] }] }] } }
          : {}),
        scrape_configs: targets.map((entry, index) => {
          const target = typeof entry === 'string' ? { url: entry } : entry;
          const { address: targetAddress, path } = hostPort(target.url);
          return {
            job_name: target.job ?? `target${index}`,
            metrics_path: path,
            static_configs: [{ targets: [targetAddress], ...(target.labels ? { labels: target.labels } : {}) }],
          };
        }),
      };
      const configFile = join(dir, 'prometheus.yml');
      await writeFile(configFile, stringify(config));
      return [
        `--config.file=${configFile}`,
        `--storage.tsdb.path=${join(dir, 'data')}`,
        `--web.listen-address=${address}`,
        '--log.level=warn',
        // Prometheus sends a firing alert at once, but drops it when the Alertmanager is not discovered
        // yet (discovery syncs every 5 s) and then waits the resend delay (default 1m) to try again.
        '--rules.alert.resend-delay=1s',
        ...(options.featureFlags ?? []).map((flag) => `--enable-feature=${flag}`),
      ];
    },
  });

  const query = async (expr: string, time?: number): Promise<PromSample[]> => {
    const data = await api<{ resultType: string; result: unknown }>(process.url, '/api/v1/query', {
      query: expr,
      ...(time === undefined ? {} : { time: String(time) }),
    });
    if (data.resultType === 'scalar') {
      const [t, v] = data.result as [number, string];
      return [{ metric: {}, value: toNumber(v), time: t }];
    }
    if (data.resultType !== 'vector') throw new Error(`query ${expr} returned a ${data.resultType}, not an instant vector`);
    return (data.result as Array<{ metric: Record<string, string>; value: [number, string] }>).map((r) => ({
      metric: r.metric,
      value: toNumber(r.value[1]),
      time: r.value[0],
    }));
  };

  const alerts = async () => (await api<{ alerts: PromAlert[] }>(process.url, '/api/v1/alerts')).alerts;

  const poll = async <T>(what: string, probe: () => Promise<T>, predicate: (value: T) => boolean, timeoutMs: number): Promise<T> => {
    const deadline = performance.now() + timeoutMs;
    for (;;) {
      const value = await probe();
      if (predicate(value)) return value;
      if (performance.now() > deadline) {
        throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}; last value: ${JSON.stringify(value)}\nPrometheus log:\n${process.output()}`);
      }
      await sleep(250);
    }
  };

  return {
    url: process.url,
    address: process.address,
    query,
    async queryRange(expr, start, end, step) {
      const data = await api<{ result: Array<{ metric: Record<string, string>; values: Array<[number, string]> }> }>(process.url, '/api/v1/query_range', {
        query: expr,
        start: String(start),
        end: String(end),
        step: String(step),
      });
      return data.result.map((r) => ({ metric: r.metric, values: r.values.map(([time, value]) => ({ time, value: toNumber(value) })) }));
    },
    waitFor: (what, expr, predicate, timeoutMs = 20_000) => poll(what, () => query(expr), predicate, timeoutMs),
    alerts,
    async waitForAlert(alertname, labels = {}, timeoutMs = 20_000) {
      const matches = (alert: PromAlert) =>
        alert.state === 'firing' && alert.labels.alertname === alertname && Object.entries(labels).every(([k, v]) => alert.labels[k] === v);
      const active = await poll(`${alertname} ${JSON.stringify(labels)} firing`, alerts, (list) => list.some(matches), timeoutMs);
      return active.find(matches) as PromAlert;
    },
    async targets() {
      const data = await api<{ activeTargets: Array<{ scrapeUrl: string; health: string; lastError: string }> }>(process.url, '/api/v1/targets');
      return data.activeTargets.map(({ scrapeUrl, health, lastError }) => ({ scrapeUrl, health, lastError }));
    },
    output: process.output,
    stop: process.stop,
  };
}
