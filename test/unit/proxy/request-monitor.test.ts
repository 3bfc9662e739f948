import { Writable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../../src/clock/clock.js';
import { loadSettings } from '../../../src/config/load.js';
import { DrainState } from '../../../src/lifecycle/drain-state.js';
import { createLogger } from '../../../src/log/logger.js';
import { RequestLineWriter } from '../../../src/log/request-line.js';
import { ModelLabels } from '../../../src/metrics/model-labels.js';
import { Recorder } from '../../../src/metrics/recorder.js';
import { Telemetry } from '../../../src/metrics/telemetry.js';
import { RequestMonitor } from '../../../src/proxy/request-monitor.js';
import { WorkloadMatcher } from '../../../src/slo/workload-matcher.js';
import { histogram, parsePrometheusText, sumValues } from '../../helpers/prometheus-text.js';
import { chatChunk, sse } from '../../helpers/tap-harness.js';

const telemetries: Telemetry[] = [];
afterEach(async () => {
  await Promise.all(telemetries.splice(0).map((t) => t.shutdown()));
});

/** A monitor's dependencies on a manual clock; `configYaml` configures workloads and buckets. */
function setup(configYaml?: string) {
  const clock = new ManualClock(1000);
  const telemetry = new Telemetry();
  telemetries.push(telemetry);
  const settings = loadSettings({ flags: { config: configYaml === undefined ? undefined : 'test.yaml' }, env: {}, readFile: () => configYaml ?? '' });
  const recorder = new Recorder(telemetry.meter, settings.buckets);
  const logger = createLogger('silent', new Writable({ write: (_c, _e, cb) => cb() }));
  const deps = { clock, recorder, models: new ModelLabels(8), logger, requestLines: new RequestLineWriter(logger), workloads: new WorkloadMatcher(settings.workloads) };
  return { clock, telemetry, deps };
}

describe('request monitor with a fake clock', () => {
  it('records exact TTFB, TTFT, per-chunk and per-token ITL, TPOT and e2e', async () => {
    const { clock, telemetry, deps } = setup();
    const monitor = new RequestMonitor(deps, 'POST', '/v1/chat/completions?key=secret', {});
    monitor.requestBody('m');
    const usage = (n: number) => ({ usage: { prompt_tokens: 5, completion_tokens: n, total_tokens: 5 + n } });
    const events = sse(
      chatChunk({ role: 'assistant', content: '' }, usage(0)), // t=+40: first byte, not a token
      chatChunk({ content: 'a' }, usage(1)), // t=+150: TTFT
      chatChunk({ content: 'bcd' }, usage(4)), // t=+180: 30 ms gap, 3 tokens
      chatChunk({ content: 'e' }, usage(5)), // t=+200: 20 ms gap, 1 token
      chatChunk({}, usage(5), 'stop'),
      '[DONE]',
    );
    monitor.response(200, 'text/event-stream; charset=utf-8');
    const at = [40, 150, 180, 200, 200, 200];
    events.forEach((event, i) => {
      clock.advance(at[i]! - (i === 0 ? 0 : at[i - 1]!));
      monitor.body(event);
    });
    clock.advance(5);
    monitor.bodyEnd();
    monitor.delivered();

    const m = parsePrometheusText(await telemetry.scrape());
    const h = (name: string) => histogram(m, name, { workload: 'default', gen_ai_request_model: 'm' });
    expect(h('tokentap_time_to_first_byte_seconds')).toMatchObject({ count: 1, sum: 0.04 });
    expect(h('gen_ai_server_time_to_first_token_seconds')).toMatchObject({ count: 1, sum: 0.15 });
    expect(h('tokentap_inter_chunk_latency_seconds')).toMatchObject({ count: 2 });
    expect(h('tokentap_inter_chunk_latency_seconds').sum).toBeCloseTo(0.05, 12);
    // 3 samples of 10 ms for the 3-token chunk, 1 sample of 20 ms.
    const perToken = h('tokentap_inter_token_latency_seconds');
    expect(perToken.count).toBe(4);
    expect(perToken.sum).toBeCloseTo(0.05, 12);
    expect(perToken.buckets.get(0.01)).toBe(3);
    // TPOT: (200 - 150) ms over 5 - 1 tokens.
    expect(h('gen_ai_server_time_per_output_token_seconds').sum).toBeCloseTo(0.0125, 12);
    expect(h('gen_ai_server_request_duration_seconds')).toMatchObject({ count: 1, sum: 0.205 });
    expect(histogram(m, 'gen_ai_client_token_usage', { gen_ai_token_type: 'output' }).sum).toBe(5);
    expect(histogram(m, 'gen_ai_client_token_usage', { gen_ai_token_type: 'input' }).sum).toBe(5);
  });

  it('records no TTFT for a stream that never produced a token, and counts it once', async () => {
    const { clock, telemetry, deps } = setup();
    const monitor = new RequestMonitor(deps, 'POST', '/v1/chat/completions', {});
    monitor.requestBody('m');
    monitor.response(200, 'text/event-stream');
    monitor.body(sse(chatChunk({ role: 'assistant', content: '' }))[0]!);
    clock.advance(500);
    monitor.fail('client_cancelled');
    monitor.delivered();
    monitor.fail('upstream_error');
    const m = parsePrometheusText(await telemetry.scrape());
    expect(histogram(m, 'gen_ai_server_time_to_first_token_seconds').count).toBe(0);
    expect(m.get('tokentap_requests_total')!.metrics).toEqual([
      { labels: { workload: 'default', gen_ai_request_model: 'm', outcome: 'client_cancelled', http_status_class: '2xx', operation: 'generation' }, value: '1' },
    ]);
    expect(histogram(m, 'gen_ai_server_request_duration_seconds', { outcome: 'client_cancelled' }).sum).toBe(0.5);
  });

  it('keeps forwarding (never throws) and counts the error when a tap throws', async () => {
    const { telemetry, deps } = setup();
    const monitor = new RequestMonitor(deps, 'POST', '/v1/chat/completions', {});
    monitor.requestBody('m');
    monitor.response(200, 'text/event-stream');
    // A chunk that is not a Buffer makes the decoder throw inside the tap.
    expect(() => monitor.body('not a buffer' as unknown as Buffer)).not.toThrow();
    expect(() => monitor.body(sse(chatChunk({ content: 'a' }))[0]!)).not.toThrow();
    monitor.bodyEnd();
    monitor.delivered();
    const m = parsePrometheusText(await telemetry.scrape());
    expect(m.get('tokentap_tap_errors_total')!.metrics).toEqual([{ labels: { workload: 'default', gen_ai_request_model: 'm', reason: 'tap_exception' }, value: '1' }]);
  });
});

describe('request monitor: workloads and SLO events on a fake clock', () => {
  const config = [
    'workloads:',
    '  - name: chat',
    '    match: { header: { x-workload: chat } }',
    '    slo: { objective: 0.99, ttft: 200ms, itl: 50ms, e2e: 1s }',
    '  - name: code',
    '    match: { model: coder-7b }',
    '    slo: { objective: 0.95, ttft: 300ms }',
    '  - name: default',
    '',
  ].join('\n');
  const chat = { 'x-workload': 'chat' };

  /** `{ "ttft/good": 1, ... }` for one workload; absent keys mean no series. */
  async function sloEvents(telemetry: Telemetry, workload: string): Promise<Record<string, number>> {
    const family = parsePrometheusText(await telemetry.scrape()).get('tokentap_slo_events_total');
    const out: Record<string, number> = {};
    for (const s of family?.metrics ?? []) {
      if (s.labels['workload'] === workload) out[`${s.labels['slo']}/${s.labels['result']}`] = Number(s.value);
    }
    return out;
  }

  /** Streams one-token content events at the given times (ms after the start), then the end at `endAtMs`. */
  function stream(clock: ManualClock, monitor: RequestMonitor, tokenAtMs: readonly number[], endAtMs: number): void {
    monitor.response(200, 'text/event-stream');
    let now = 0;
    for (const atMs of tokenAtMs) {
      clock.advance(atMs - now);
      now = atMs;
      monitor.body(sse(chatChunk({ content: 'x' }))[0]!);
    }
    clock.advance(endAtMs - now);
    monitor.body(sse(chatChunk({}, {}, 'stop'), '[DONE]').reduce((a, b) => Buffer.concat([a, b])));
    monitor.bodyEnd();
    monitor.delivered();
  }

  it('counts TTFT, e2e and per-token ITL good and bad for the matched workload, agreeing with the threshold buckets', async () => {
    const { clock, telemetry, deps } = setup(config);
    const monitor = new RequestMonitor(deps, 'POST', '/v1/chat/completions', chat);
    monitor.requestBody('m');
    // TTFT 150 ms (good); gaps of 30, 50 (exactly the threshold: good), 51 (bad) and 20 ms; e2e 400 ms.
    stream(clock, monitor, [150, 180, 230, 281, 301], 400);
    expect(await sloEvents(telemetry, 'chat')).toEqual({
      'ttft/good': 1, 'ttft/bad': 0,
      'e2e/good': 1, 'e2e/bad': 0,
      'itl/good': 3, 'itl/bad': 1,
    });
    const m = parsePrometheusText(await telemetry.scrape());
    const itl = histogram(m, 'tokentap_inter_token_latency_seconds', { workload: 'chat' });
    expect(itl.buckets.get(0.05)).toBe(3);
    expect(itl.count).toBe(4);
  });

  it('counts ITL per token: a 3-token event 120 ms after the previous is 3 good tokens of 40 ms, 180 ms is 3 bad ones', async () => {
    const { clock, telemetry, deps } = setup(config);
    const monitor = new RequestMonitor(deps, 'POST', '/v1/chat/completions', chat);
    monitor.requestBody('m');
    monitor.response(200, 'text/event-stream');
    // Cumulative usage per chunk tells the tap how many tokens each content event carried.
    const [first, second, third, done] = sse(
      ...[1, 4, 7].map((n) => chatChunk({ content: 'abc' }, { usage: { prompt_tokens: 1, completion_tokens: n, total_tokens: n + 1 } })),
      '[DONE]',
    );
    clock.advance(100);
    monitor.body(first!);
    clock.advance(120);
    monitor.body(second!);
    clock.advance(180);
    monitor.body(third!);
    monitor.body(done!);
    monitor.bodyEnd();
    monitor.delivered();
    const counts = await sloEvents(telemetry, 'chat');
    expect(counts['itl/good']! + counts['itl/bad']!).toBe(histogram(parsePrometheusText(await telemetry.scrape()), 'tokentap_inter_token_latency_seconds').count);
    expect({ good: counts['itl/good'], bad: counts['itl/bad'] }).toEqual({ good: 3, bad: 3 });
  });

  it('counts a first token exactly at the TTFT threshold as good, as bucket{le="0.2"} does', async () => {
    const { clock, telemetry, deps } = setup(config);
    const monitor = new RequestMonitor(deps, 'POST', '/v1/chat/completions', chat);
    monitor.requestBody('m');
    stream(clock, monitor, [200], 200);
    expect(await sloEvents(telemetry, 'chat')).toMatchObject({ 'ttft/good': 1, 'ttft/bad': 0 });
    const ttft = histogram(parsePrometheusText(await telemetry.scrape()), 'gen_ai_server_time_to_first_token_seconds', { workload: 'chat' });
    expect(ttft.buckets.get(0.2)).toBe(1);
  });

  it('counts a late first token as bad TTFT and a slow completion as bad e2e', async () => {
    const { clock, telemetry, deps } = setup(config);
    const monitor = new RequestMonitor(deps, 'POST', '/v1/chat/completions', chat);
    monitor.requestBody('m');
    stream(clock, monitor, [201], 1001);
    expect(await sloEvents(telemetry, 'chat')).toMatchObject({ 'ttft/good': 0, 'ttft/bad': 1, 'e2e/good': 0, 'e2e/bad': 1 });
  });

  it('counts a request abandoned without a first token after longer than the TTFT threshold as bad TTFT', async () => {
    const { clock, telemetry, deps } = setup(config);
    const monitor = new RequestMonitor(deps, 'POST', '/v1/chat/completions', chat);
    monitor.requestBody('m');
    monitor.response(200, 'text/event-stream');
    monitor.body(sse(chatChunk({ role: 'assistant', content: '' }))[0]!);
    clock.advance(250);
    monitor.fail('client_cancelled');
    // Cancelled at 250 ms, before the 1 s e2e threshold: no e2e event.
    expect(await sloEvents(telemetry, 'chat')).toEqual({ 'ttft/good': 0, 'ttft/bad': 1 });
  });

  it('counts nothing for a request abandoned without a first token sooner than the TTFT threshold', async () => {
    const { clock, telemetry, deps } = setup(config);
    const monitor = new RequestMonitor(deps, 'POST', '/v1/chat/completions', chat);
    monitor.requestBody('m');
    clock.advance(150);
    monitor.fail('client_cancelled');
    expect(await sloEvents(telemetry, 'chat')).toEqual({});
    expect(sumValues(parsePrometheusText(await telemetry.scrape()), 'tokentap_requests_total', { workload: 'chat' })).toBe(1);
  });

  it('counts an upstream timeout before any header as bad TTFT and bad e2e', async () => {
    const { clock, telemetry, deps } = setup(config);
    const monitor = new RequestMonitor(deps, 'POST', '/v1/chat/completions', chat);
    monitor.requestBody('m');
    clock.advance(1500);
    monitor.fail('timeout', 504);
    expect(await sloEvents(telemetry, 'chat')).toEqual({ 'ttft/good': 0, 'ttft/bad': 1, 'e2e/good': 0, 'e2e/bad': 1 });
  });

  it('counts a fast upstream failure as bad e2e and bad TTFT (the user got no token at all)', async () => {
    const { clock, telemetry, deps } = setup(config);
    const monitor = new RequestMonitor(deps, 'POST', '/v1/chat/completions', chat);
    monitor.requestBody('m');
    clock.advance(20);
    monitor.response(503, 'application/json');
    monitor.body(Buffer.from('{"error":"overloaded"}'));
    monitor.bodyEnd();
    monitor.delivered();
    expect(await sloEvents(telemetry, 'chat')).toEqual({ 'ttft/good': 0, 'ttft/bad': 1, 'e2e/good': 0, 'e2e/bad': 1 });
  });

  it('counts no TTFT or e2e event for a client error (400), but does for 429 after the threshold', async () => {
    const { clock, telemetry, deps } = setup(config);
    for (const status of [400, 429]) {
      const monitor = new RequestMonitor(deps, 'POST', '/v1/chat/completions', chat);
      monitor.requestBody('m');
      clock.advance(300);
      monitor.response(status, 'application/json');
      monitor.body(Buffer.from('{"error":"no"}'));
      monitor.bodyEnd();
      monitor.delivered();
    }
    expect(await sloEvents(telemetry, 'chat')).toEqual({ 'ttft/good': 0, 'ttft/bad': 1, 'e2e/good': 0, 'e2e/bad': 1 });
  });

  it('counts no TTFT event for a non-streamed answer, only e2e', async () => {
    const { clock, telemetry, deps } = setup(config);
    const monitor = new RequestMonitor(deps, 'POST', '/v1/chat/completions', chat);
    monitor.requestBody('m');
    clock.advance(600);
    monitor.response(200, 'application/json');
    monitor.body(Buffer.from(JSON.stringify({ choices: [{ index: 0, message: { role: 'assistant', content: 'hi' }, finish_reason: 'stop' }] })));
    monitor.bodyEnd();
    monitor.delivered();
    expect(await sloEvents(telemetry, 'chat')).toEqual({ 'e2e/good': 1, 'e2e/bad': 0 });
  });

  it('matches on the model from the request body, and puts unmatched requests in the last workload (no SLO: no events)', async () => {
    const { clock, telemetry, deps } = setup(config);
    const coder = new RequestMonitor(deps, 'POST', '/v1/chat/completions', {});
    coder.requestBody('coder-7b');
    stream(clock, coder, [350], 400);
    const other = new RequestMonitor(deps, 'POST', '/v1/chat/completions', { 'x-workload': 'batch' });
    other.requestBody('m');
    stream(clock, other, [100], 120);
    expect(await sloEvents(telemetry, 'code')).toEqual({ 'ttft/good': 0, 'ttft/bad': 1 });
    expect(await sloEvents(telemetry, 'default')).toEqual({});
    const m = parsePrometheusText(await telemetry.scrape());
    expect(sumValues(m, 'tokentap_requests_total', { workload: 'code', gen_ai_request_model: 'coder-7b' })).toBe(1);
    expect(sumValues(m, 'tokentap_requests_total', { workload: 'default' })).toBe(1);
  });
});

describe('request monitor: its request line', () => {
  it('reports a request line the log destination refuses as a failure of the finish step, once, after the metrics are recorded and the drain count released', async () => {
    const { clock, telemetry, deps } = setup();
    const warnings: Array<Record<string, unknown>> = [];
    const logger = createLogger('info', new Writable({ write: (c: Buffer, _e, cb) => (warnings.push(JSON.parse(c.toString('utf8')) as Record<string, unknown>), cb()) }));
    const refusing = new Writable();
    refusing.write = () => {
      throw new Error('log destination broke');
    };
    const drain = new DrainState();
    const monitor = new RequestMonitor({ ...deps, logger, requestLines: new RequestLineWriter(createLogger('info', refusing)), drain }, 'POST', '/v1/chat/completions', {});
    monitor.requestBody('m');
    monitor.response(200, 'application/json');
    clock.advance(30);
    monitor.body(Buffer.from(JSON.stringify({ choices: [{ index: 0, message: { role: 'assistant', content: 'hi' }, finish_reason: 'stop' }] })));
    monitor.bodyEnd();
    expect(() => monitor.delivered()).not.toThrow();
    expect(warnings).toEqual([expect.objectContaining({ level: 40, step: 'finish', method: 'POST', path: '/v1/chat/completions', err: expect.objectContaining({ message: 'log destination broke' }) })]);
    expect(await Promise.race([drain.whenIdle().then(() => 'idle'), new Promise((resolve) => setImmediate(() => resolve('a request still counted')))])).toBe('idle');
    const m = parsePrometheusText(await telemetry.scrape());
    expect(sumValues(m, 'tokentap_requests_total', { workload: 'default', gen_ai_request_model: 'm' })).toBe(1);
  });
  it('still writes the request line and records the request when its held inter-token samples fail to go in', async () => {
    const { clock, telemetry, deps } = setup();
    const lines: Array<Record<string, unknown>> = [];
    const logger = createLogger('info', new Writable({ write: (c: Buffer, _e, cb) => (lines.push(JSON.parse(c.toString('utf8')) as Record<string, unknown>), cb()) }));
    const recorder = deps.recorder;
    const real = recorder.interTokenSeries.bind(recorder);
    recorder.interTokenSeries = (attributes, band) => {
      const series = real(attributes, band);
      return {
        record: (gapMs, tokens) => series.record(gapMs, tokens),
        end: () => {
          throw new Error('flush broke');
        },
      };
    };
    const monitor = new RequestMonitor({ ...deps, logger, requestLines: new RequestLineWriter(logger) }, 'POST', '/v1/chat/completions', {});
    monitor.requestBody('m');
    monitor.response(200, 'text/event-stream');
    for (const event of sse(chatChunk({ content: 'a' }), chatChunk({ content: 'b' }), chatChunk({ content: 'c' }), '[DONE]')) {
      clock.advance(20);
      monitor.body(event);
    }
    monitor.bodyEnd();
    expect(() => monitor.delivered()).not.toThrow();
    expect(lines.filter((line) => line['msg'] === 'request')).toEqual([expect.objectContaining({ outcome: 'completed', output_tokens: 3 })]);
    expect(lines.filter((line) => line['step'] === 'finish')).toEqual([expect.objectContaining({ err: expect.objectContaining({ message: 'flush broke' }) })]);
    const m = parsePrometheusText(await telemetry.scrape());
    expect(sumValues(m, 'tokentap_requests_total', { workload: 'default', gen_ai_request_model: 'm' })).toBe(1);
    expect(histogram(m, 'gen_ai_server_time_to_first_token_seconds', { workload: 'default', gen_ai_request_model: 'm' }).count).toBe(1);
  });
});

