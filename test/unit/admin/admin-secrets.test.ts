import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAdminServer } from '../../../src/admin/admin-server.js';
import { StatusSource } from '../../../src/admin/status-source.js';
import { systemClock } from '../../../src/clock/clock.js';
import { loadSettings } from '../../../src/config/load.js';
import { Telemetry } from '../../../src/metrics/telemetry.js';
import { startServeProcess } from '../../helpers/serve-process.js';

/**
 * Issue 23 item 1: /status.json and the status page showed the upstream URL with its credentials
 * (`http://op:SECRET@host`). The admin listener binds 0.0.0.0 without authentication (Prometheus
 * must reach it), so no route it serves may carry a secret from an operator URL: the upstream, the
 * OTLP endpoints and headers, the DCGM exporter. `tokentap serve` (dist/, as users run it) gets
 * each with userinfo secrets, and the OTLP and DCGM URLs query secrets too; every route the admin listener has, in every form it
 * answers (HTML, JSON, /metrics text and protobuf, HEAD), is read whole, head and body.
 */

const SECRETS = ['UPUSERSECRET', 'UPPASSSECRET', 'OTLPPASSSECRET', 'OTLPQUERYSECRET', 'OTLPHEADERSECRET', 'DCGMPASSSECRET', 'DCGMQUERYSECRET'];
// The upstream takes no query (configuration refuses one): its secret is the userinfo.
const UPSTREAM = 'http://UPUSERSECRET:UPPASSSECRET@127.0.0.1:1';
const ENV = {
  OTEL_EXPORTER_OTLP_ENDPOINT: 'http://otel:OTLPPASSSECRET@127.0.0.1:9',
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://otel:OTLPPASSSECRET@127.0.0.1:9/v1/traces?api_key=OTLPQUERYSECRET',
  OTEL_EXPORTER_OTLP_HEADERS: 'authorization=Bearer OTLPHEADERSECRET',
  TOKENTAP_DCGM_URL: 'http://dcgm:DCGMPASSSECRET@127.0.0.1:9/metrics?token=DCGMQUERYSECRET',
};

/**
 * Every GET path of the admin listener, read from Fastify's own route tree of an admin server built
 * as the sidecar builds it (status page included), so a route added later is tested too. A
 * parameter (`:name`) or wildcard segment is filled with a plain word.
 */
async function adminRoutes(): Promise<string[]> {
  const settings = loadSettings({ flags: {}, env: {} });
  const telemetry = new Telemetry();
  const status = new StatusSource({ telemetry, settings, clock: systemClock, version: 'test', probe: async () => ({ ready: true, detail: 'HTTP 200' }) });
  const app = createAdminServer({ telemetry, upstream: settings.upstream, upstreamHealthPath: settings.upstreamHealthPath, status });
  await app.ready();
  const tree = app.printRoutes({ commonPrefix: false, method: 'GET' });
  await app.close();
  await telemetry.shutdown();
  const paths: string[] = [];
  const stack: string[] = [];
  for (const line of tree.split('\n')) {
    const match = /^((?:[│ ] {3})*)[├└]── (\S+) \(/u.exec(line);
    if (match === null) continue;
    const depth = (match[1] as string).length / 4;
    stack.length = depth;
    const full = (stack[depth - 1] ?? '') + (match[2] as string);
    stack.push(full);
    paths.push(full.replace(/:[^/]+/g, 'x').replace(/\*/g, 'x'));
  }
  return paths;
}

let serve: Awaited<ReturnType<typeof startServeProcess>>;

beforeAll(async () => {
  serve = await startServeProcess(UPSTREAM, [], ENV);
  // One request through the proxy, so /metrics and the page carry per-request series too (502: nothing listens on port 1).
  const response = await fetch(`${serve.proxy}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', stream: true, messages: [] }),
  });
  await response.arrayBuffer();
}, 30_000);

afterAll(() => serve?.kill());

function withoutSecrets(where: string, text: string): void {
  for (const secret of SECRETS) expect(text, `${where} holds ${secret}`).not.toContain(secret);
}

describe('the admin listener with secrets in the upstream, OTLP and DCGM URLs', () => {
  it('lists the routes it serves: the page, its data, /metrics and the probes at least', async () => {
    expect(await adminRoutes()).toEqual(expect.arrayContaining(['/', '/status', '/status.json', '/metrics', '/healthz', '/readyz']));
  });

  it('answers no route, in any form, with a secret in its head or body (the reproduction: /status.json named the upstream with op:SECRET@)', async () => {
    const accepts = ['text/html', 'application/json', '*/*', 'application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited'];
    let answered = 0;
    for (const path of await adminRoutes()) {
      for (const method of ['GET', 'HEAD']) {
        for (const accept of accepts) {
          const response = await fetch(`${serve.admin}${path}`, { method, headers: { accept } });
          const body = Buffer.from(await response.arrayBuffer()).toString('latin1');
          let head = '';
          response.headers.forEach((value, name) => (head += `${name}: ${value}\n`));
          withoutSecrets(`${method} ${path} (accept ${accept})`, `${response.status}\n${head}\n\n${body}`);
          answered++;
        }
      }
    }
    expect(answered).toBeGreaterThanOrEqual(6 * 2 * accepts.length);
  });

  it('still names the upstream on the page and in /status.json, redacted as in the logs', async () => {
    const report = (await (await fetch(`${serve.admin}/status.json`)).json()) as { upstream: { url: string; ready: boolean } };
    expect(report.upstream.url).toBe('http://***@127.0.0.1:1/');
    expect(report.upstream.ready).toBe(false);
    const page = await (await fetch(`${serve.admin}/`)).text();
    expect(page).toContain('http://***@127.0.0.1:1/');
    const metrics = await (await fetch(`${serve.admin}/metrics`)).text();
    expect(metrics).toMatch(/^tokentap_build_info\{/m);
    expect(metrics).toMatch(/tokentap_requests_total\{[^}]*outcome="upstream_error"/);
  });
});
