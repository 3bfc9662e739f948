import { readFileSync } from 'node:fs';
import { Writable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../../src/clock/clock.js';
import { loadSettings } from '../../../src/config/load.js';
import { createLogger } from '../../../src/log/logger.js';
import { RequestLineWriter } from '../../../src/log/request-line.js';
import { ModelLabels } from '../../../src/metrics/model-labels.js';
import { Recorder } from '../../../src/metrics/recorder.js';
import { Telemetry } from '../../../src/metrics/telemetry.js';
import { RequestMonitor } from '../../../src/proxy/request-monitor.js';
import { WorkloadMatcher } from '../../../src/slo/workload-matcher.js';
import { encode, grpcFrame } from '../../helpers/grpc-frames.js';
import { histogram, parsePrometheusText, sumValues } from '../../helpers/prometheus-text.js';

/** [grpc-status value, outcome] rows of the table in docs/protocols.md, as a user reads it. */
function grpcStatusTable(): Array<[string, string]> {
  const page = readFileSync(new URL('../../../docs/protocols.md', import.meta.url), 'utf8');
  const section = page.slice(page.indexOf('### `grpc-status`'), page.indexOf('### Proto versions'));
  const rows: Array<[string, string]> = [...section.matchAll(/^\| `[A-Z_]+` \| (\d+) \| `([a-z_]+)`/gm)].map((match) => [match[1]!, match[2]!]);
  const rest = /^\| any other code, or a value that is not a code \| +\| `([a-z_]+)`/m.exec(section)?.[1];
  if (rest === undefined) throw new Error('docs/protocols.md: no row for any other grpc-status');
  return [...rows, ['17', rest], ['not-a-code', rest]];
}

const telemetries: Telemetry[] = [];
afterEach(async () => {
  await Promise.all(telemetries.splice(0).map((t) => t.shutdown()));
});

function setup(configYaml?: string) {
  const clock = new ManualClock(1000);
  const telemetry = new Telemetry();
  telemetries.push(telemetry);
  const settings = loadSettings({ flags: { config: configYaml === undefined ? undefined : 'test.yaml' }, env: {}, readFile: () => configYaml ?? '' });
  const recorder = new Recorder(telemetry.meter, settings.buckets);
  const lines: Array<Record<string, unknown>> = [];
  const logger = createLogger(
    'info',
    new Writable({
      write: (chunk, _e, cb) => {
        lines.push(JSON.parse(String(chunk)) as Record<string, unknown>);
        cb();
      },
    }),
  );
  const deps = { clock, recorder, models: new ModelLabels(8), logger, requestLines: new RequestLineWriter(logger), workloads: new WorkloadMatcher(settings.workloads) };
  return { clock, telemetry, deps, lines };
}

const GENERATE = '/vllm.grpc.engine.VllmEngine/Generate';
const RESPONSE = 'vllm.grpc.engine.GenerateResponse';
const chunk = (ids: number[]) => grpcFrame(encode(RESPONSE, { chunk: { token_ids: ids, prompt_tokens: 9, completion_tokens: ids.length, cached_tokens: 3 } }));
const complete = (completion: number) => grpcFrame(encode(RESPONSE, { complete: { finish_reason: 'stop', prompt_tokens: 9, completion_tokens: completion, cached_tokens: 3 } }));

/** A vLLM Generate call through a monitor: `at` ms after the start for each frame, then trailers and the end. */
function generate(deps: ReturnType<typeof setup>['deps'], clock: ManualClock, frames: Buffer[], at: number[], trailers: Record<string, string> | undefined, path = GENERATE) {
  const monitor = new RequestMonitor(deps, 'POST', path, { ':path': path, 'content-type': 'application/grpc', te: 'trailers' });
  monitor.requestBody(undefined);
  monitor.response(200, 'application/grpc');
  let now = 0;
  frames.forEach((frame, i) => {
    clock.advance(at[i]! - now);
    now = at[i]!;
    monitor.arrived();
    monitor.body(frame);
  });
  if (trailers !== undefined) monitor.trailers(trailers);
  monitor.bodyEnd();
  monitor.delivered();
}

async function outcomes(telemetry: Telemetry): Promise<Record<string, number>> {
  const m = parsePrometheusText(await telemetry.scrape());
  const found: Record<string, number> = {};
  for (const outcome of ['completed', 'client_cancelled', 'client_error', 'upstream_error', 'truncated', 'timeout']) {
    const n = sumValues(m, 'tokentap_requests_total', { outcome });
    if (n > 0) found[outcome] = n;
  }
  return found;
}

describe('gRPC calls through the request monitor', () => {
  it('records exact TTFT, per-token ITL, TPOT and the token counts of a vLLM Generate stream, and logs the cached tokens', async () => {
    const { clock, telemetry, deps, lines } = setup();
    generate(deps, clock, [chunk([1]), chunk([2, 3, 4]), chunk([5]), complete(5)], [150, 180, 200, 205], { 'grpc-status': '0' });
    const m = parsePrometheusText(await telemetry.scrape());
    const h = (name: string) => histogram(m, name, { workload: 'default' });
    expect(h('gen_ai_server_time_to_first_token_seconds')).toMatchObject({ count: 1, sum: 0.15 });
    const perToken = h('tokentap_inter_token_latency_seconds');
    expect(perToken.count).toBe(4);
    expect(perToken.sum).toBeCloseTo(0.05, 12);
    expect(perToken.buckets.get(0.01)).toBe(3);
    expect(h('gen_ai_server_time_per_output_token_seconds').sum).toBeCloseTo(0.0125, 12);
    expect(histogram(m, 'gen_ai_client_token_usage', { gen_ai_token_type: 'output' }).sum).toBe(5);
    expect(histogram(m, 'gen_ai_client_token_usage', { gen_ai_token_type: 'input' }).sum).toBe(9);
    expect(await outcomes(telemetry)).toEqual({ completed: 1 });
    expect(lines.find((line) => line.msg === 'request')).toMatchObject({ path: GENERATE, outcome: 'completed', input_tokens: 9, output_tokens: 5, cached_input_tokens: 3, token_source: 'usage' });
  });

  // docs/protocols.md#grpc-status, read from the page: each code's row, then the row for any other code.
  const TABLE = grpcStatusTable();

  it('reads the documented table: every code from 0 to 16, and the rest', () => {
    expect(TABLE.map(([code]) => code)).toEqual([...Array.from({ length: 17 }, (_, code) => String(code)), '17', 'not-a-code']);
  });

  it.each(TABLE)('ends a call with grpc-status %s in its trailers as %s', async (status, outcome) => {
    const { clock, telemetry, deps } = setup();
    generate(deps, clock, [chunk([1]), chunk([2])], [100, 120], { 'grpc-status': status, 'grpc-message': 'the engine said so' });
    expect(await outcomes(telemetry)).toEqual({ [outcome]: 1 });
  });

  it.each(TABLE)('ends a trailers-only call (grpc-status %s in its only headers) as %s, a generation', async (status, outcome) => {
    const { telemetry, deps } = setup();
    const monitor = new RequestMonitor(deps, 'POST', GENERATE, { ':path': GENERATE, 'content-type': 'application/grpc' });
    const headers = { 'content-type': 'application/grpc', 'grpc-status': status };
    monitor.response(200, headers['content-type']);
    monitor.trailers(headers);
    monitor.bodyEnd();
    monitor.delivered();
    expect(await outcomes(telemetry)).toEqual({ [outcome]: 1 });
    const m = parsePrometheusText(await telemetry.scrape());
    expect(sumValues(m, 'tokentap_requests_total', { operation: 'generation' })).toBe(1);
  });

  it('ends a call with DEADLINE_EXCEEDED as client_cancelled when the client set grpc-timeout (its deadline), as timeout when it did not', async () => {
    // Reproduction: `grpc-timeout: 1m` from any client made every call a `timeout`, a bad e2e event at any speed.
    const { clock, telemetry, deps } = setup('workloads:\n  - name: default\n    slo: { objective: 0.99, e2e: 60s }\n');
    for (const headers of [{ 'grpc-timeout': '1m' }, {}]) {
      const monitor = new RequestMonitor(deps, 'POST', GENERATE, { ':path': GENERATE, 'content-type': 'application/grpc', te: 'trailers', ...headers });
      monitor.requestBody(undefined);
      monitor.response(200, 'application/grpc');
      clock.advance(5);
      monitor.trailers({ 'grpc-status': '4' });
      monitor.bodyEnd();
      monitor.delivered();
    }
    expect(await outcomes(telemetry)).toEqual({ client_cancelled: 1, timeout: 1 });
    const m = parsePrometheusText(await telemetry.scrape());
    expect(sumValues(m, 'tokentap_slo_events_total', { slo: 'e2e', result: 'bad' })).toBe(1);
    expect(sumValues(m, 'tokentap_slo_events_total', { slo: 'e2e', result: 'good' })).toBe(0);
  });

  it('makes a call whose body ends without grpc-status truncated', async () => {
    const { clock, telemetry, deps } = setup();
    generate(deps, clock, [chunk([1]), chunk([2])], [100, 120], undefined);
    expect(await outcomes(telemetry)).toEqual({ truncated: 1 });
  });

  it('makes a Triton stream that reported an error in a message an upstream error although it ended OK', async () => {
    const { clock, telemetry, deps } = setup();
    const error = grpcFrame(encode('inference.ModelStreamInferResponse', { error_message: 'in-flight batcher failed' }));
    generate(deps, clock, [error], [100], { 'grpc-status': '0' }, '/inference.GRPCInferenceService/ModelStreamInfer');
    expect(await outcomes(telemetry)).toEqual({ upstream_error: 1 });
  });

  it('reads only the grpc-status of a method without a tap, and counts it as other than a generation', async () => {
    const { clock, telemetry, deps } = setup();
    const health = '/vllm.grpc.engine.VllmEngine/HealthCheck';
    generate(deps, clock, [grpcFrame(encode('vllm.grpc.engine.HealthCheckResponse', { healthy: true }))], [3], { 'grpc-status': '5' }, health);
    expect(await outcomes(telemetry)).toEqual({ client_error: 1 });
    const m = parsePrometheusText(await telemetry.scrape());
    expect(sumValues(m, 'tokentap_requests_total', { operation: 'other' })).toBe(1);
  });

  it.each([['text/html; charset=utf-8'], ['application/json'], ['application/grpc-web'], [undefined]])(
    'makes a gRPC call answered 200 with Content-Type %s (not gRPC) an upstream error, whatever its body',
    async (contentType) => {
      // Reproduction: an ingress's HTML page answered 200 to a Generate call was `completed` (a good
      // e2e event) while @grpc/grpc-js failed the call RESOURCE_EXHAUSTED, reading "<htm" as a length.
      const { clock, telemetry, deps } = setup();
      const monitor = new RequestMonitor(deps, 'POST', GENERATE, { ':path': GENERATE, 'content-type': 'application/grpc', te: 'trailers' });
      monitor.requestBody(undefined);
      monitor.response(200, contentType);
      clock.advance(10);
      monitor.arrived();
      monitor.body(Buffer.from('<html>bad gateway</html>'));
      monitor.bodyEnd();
      monitor.delivered();
      expect(await outcomes(telemetry)).toEqual({ upstream_error: 1 });
    },
  );

  it('reads a gRPC answer in any gRPC content type (a + subtype, parameters, any case) as gRPC, and a gRPC-Web request answered in JSON as before', async () => {
    const { clock, telemetry, deps } = setup();
    const pairs = [
      ['application/grpc', 'Application/gRPC+proto; charset=utf-8'],
      ['application/grpc+proto', 'application/grpc;charset=utf-8'],
      ['application/grpc', 'application/grpc ; charset=utf-8'],
    ];
    for (const [request, response] of pairs) {
      const monitor = new RequestMonitor(deps, 'POST', GENERATE, { ':path': GENERATE, 'content-type': request });
      monitor.requestBody(undefined);
      monitor.response(200, response);
      clock.advance(10);
      monitor.arrived();
      monitor.body(chunk([1]));
      monitor.trailers({ 'grpc-status': '0' });
      monitor.bodyEnd();
      monitor.delivered();
    }
    const web = new RequestMonitor(deps, 'POST', '/x.Y/Z', { ':path': '/x.Y/Z', 'content-type': 'application/grpc-web+proto' });
    web.requestBody(undefined);
    web.response(200, 'application/json');
    web.bodyEnd();
    web.delivered();
    expect(await outcomes(telemetry)).toEqual({ completed: 4 });
  });

  it('makes a call to a method without a tap whose body ends without any grpc-status an upstream error, and one ended OK completed', async () => {
    // Reproduction: recorded `completed` while @grpc/grpc-js failed the call INTERNAL ("Call ended without gRPC status").
    const { clock, telemetry, deps } = setup();
    const health = '/vllm.grpc.engine.VllmEngine/HealthCheck';
    const healthy = grpcFrame(encode('vllm.grpc.engine.HealthCheckResponse', { healthy: true }));
    generate(deps, clock, [healthy], [3], undefined, health);
    expect(await outcomes(telemetry)).toEqual({ upstream_error: 1 });
    generate(deps, clock, [healthy], [3], { 'grpc-status': '0' }, health);
    expect(await outcomes(telemetry)).toEqual({ upstream_error: 1, completed: 1 });
  });

  it('counts a trailers call of a response that has no tap as nothing, and leaves HTTP/1.1 outcomes as they were', async () => {
    const { clock, telemetry, deps } = setup();
    const monitor = new RequestMonitor(deps, 'POST', '/v1/chat/completions', {});
    monitor.requestBody('m');
    monitor.response(200, 'text/event-stream');
    clock.advance(10);
    monitor.body(Buffer.from('data: {"choices":[{"index":0,"delta":{"content":"a"}}]}\n\ndata: [DONE]\n\n'));
    monitor.trailers({ 'grpc-status': '13' });
    monitor.bodyEnd();
    monitor.delivered();
    expect(await outcomes(telemetry)).toEqual({ completed: 1 });
  });
});
