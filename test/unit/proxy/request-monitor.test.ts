import { Writable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../../src/clock/clock.js';
import { loadSettings } from '../../../src/config/load.js';
import { createLogger } from '../../../src/log/logger.js';
import { ModelLabels } from '../../../src/metrics/model-labels.js';
import { Recorder } from '../../../src/metrics/recorder.js';
import { Telemetry } from '../../../src/metrics/telemetry.js';
import { RequestMonitor } from '../../../src/proxy/request-monitor.js';
import { histogram, parsePrometheusText } from '../../helpers/prometheus-text.js';
import { chatChunk, sse } from '../../helpers/tap-harness.js';

const telemetries: Telemetry[] = [];
afterEach(async () => {
  await Promise.all(telemetries.splice(0).map((t) => t.shutdown()));
});

function setup() {
  const clock = new ManualClock(1000);
  const telemetry = new Telemetry();
  telemetries.push(telemetry);
  const recorder = new Recorder(telemetry.meter, loadSettings({ flags: {}, env: {} }).buckets);
  const logger = createLogger('silent', new Writable({ write: (_c, _e, cb) => cb() }));
  const deps = { clock, recorder, models: new ModelLabels(8), logger };
  return { clock, telemetry, deps };
}

describe('request monitor with a fake clock', () => {
  it('records exact TTFB, TTFT, per-chunk and per-token ITL, TPOT and e2e', async () => {
    const { clock, telemetry, deps } = setup();
    const monitor = new RequestMonitor(deps, 'POST', '/v1/chat/completions?key=secret');
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
    const monitor = new RequestMonitor(deps, 'POST', '/v1/chat/completions');
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
      { labels: { workload: 'default', gen_ai_request_model: 'm', outcome: 'client_cancelled', http_status_class: '2xx' }, value: '1' },
    ]);
    expect(histogram(m, 'gen_ai_server_request_duration_seconds', { outcome: 'client_cancelled' }).sum).toBe(0.5);
  });

  it('keeps forwarding (never throws) and counts the error when a tap throws', async () => {
    const { telemetry, deps } = setup();
    const monitor = new RequestMonitor(deps, 'POST', '/v1/chat/completions');
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
