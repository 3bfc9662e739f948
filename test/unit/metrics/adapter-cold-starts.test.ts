import { Writable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../../src/clock/clock.js';
import { loadSettings } from '../../../src/config/load.js';
import { createLogger } from '../../../src/log/logger.js';
import { RequestLineWriter } from '../../../src/log/request-line.js';
import { AdapterColdStarts } from '../../../src/metrics/adapter-cold-starts.js';
import { registerModelInfo } from '../../../src/metrics/model-info.js';
import { ModelLabels } from '../../../src/metrics/model-labels.js';
import { Recorder } from '../../../src/metrics/recorder.js';
import { Telemetry } from '../../../src/metrics/telemetry.js';
import { RequestMonitor } from '../../../src/proxy/request-monitor.js';
import { WorkloadMatcher } from '../../../src/slo/workload-matcher.js';
import { histogram, parsePrometheusText, sumValues } from '../../helpers/prometheus-text.js';
import { chatChunk, sse } from '../../helpers/tap-harness.js';

const IDLE_AFTER_MS = 300_000;

describe('adapter cold starts on a fake clock', () => {
  it('marks the first request after more than adapter_idle_after without one, not the requests that follow it', () => {
    const clock = new ManualClock(0);
    const cold = new AdapterColdStarts(clock, IDLE_AFTER_MS);
    cold.listed(['sql-lora']);
    clock.advance(IDLE_AFTER_MS);
    // Exactly the idle time: not longer than it, so warm.
    expect(cold.requestStarted('sql-lora')).toBe(false);
    clock.advance(IDLE_AFTER_MS + 1);
    expect(cold.requestStarted('sql-lora')).toBe(true);
    expect(cold.requestStarted('sql-lora')).toBe(false);
    clock.advance(1000);
    expect(cold.requestStarted('sql-lora')).toBe(false);
  });

  it('counts idle time from when discovery first listed the adapter (vLLM loads it when added), not from start', () => {
    const clock = new ManualClock(0);
    const cold = new AdapterColdStarts(clock, IDLE_AFTER_MS);
    clock.advance(10 * IDLE_AFTER_MS);
    cold.listed(['new-lora']);
    clock.advance(1000);
    expect(cold.requestStarted('new-lora')).toBe(false);
    // A later listing keeps the adapter's last request time, so an idle adapter stays idle.
    clock.advance(IDLE_AFTER_MS + 1);
    cold.listed(['new-lora']);
    expect(cold.requestStarted('new-lora')).toBe(true);
  });

  it('marks nothing for base models, unlisted names, other and unknown, and forgets adapters no longer listed', () => {
    const clock = new ManualClock(0);
    const cold = new AdapterColdStarts(clock, IDLE_AFTER_MS);
    cold.listed(['a', 'b']);
    clock.advance(IDLE_AFTER_MS + 1);
    for (const model of ['llama-3.1-8b', 'other', 'unknown', 'never-listed']) expect(cold.requestStarted(model)).toBe(false);
    cold.listed(['b']);
    expect(cold.requestStarted('a')).toBe(false);
    expect(cold.requestStarted('b')).toBe(true);
  });
});

const telemetries: Telemetry[] = [];
afterEach(async () => {
  await Promise.all(telemetries.splice(0).map((t) => t.shutdown()));
});

/** One vLLM pod: base model llama-3.1-8b and its adapter sql-lora, discovery answered at t=0. */
function pod() {
  const clock = new ManualClock(0);
  const telemetry = new Telemetry();
  telemetries.push(telemetry);
  const settings = loadSettings({ flags: {}, env: {} });
  const models = new ModelLabels(8);
  registerModelInfo(telemetry.meter, models);
  const served = models.serve(['llama-3.1-8b', 'sql-lora'], new Map([['sql-lora', 'llama-3.1-8b']]));
  const coldStarts = new AdapterColdStarts(clock, IDLE_AFTER_MS);
  coldStarts.listed(served.adapters);
  const logger = createLogger('silent', new Writable({ write: (_c, _e, cb) => cb() }));
  const deps = { clock, recorder: new Recorder(telemetry.meter, settings.buckets), models, logger, requestLines: new RequestLineWriter(logger), workloads: new WorkloadMatcher(settings.workloads), coldStarts };
  /** One streamed request for `model` whose first token comes `ttftMs` after it starts. */
  const request = (model: string, ttftMs: number): void => {
    const monitor = new RequestMonitor(deps, 'POST', '/v1/chat/completions', {});
    monitor.requestBody(model);
    monitor.response(200, 'text/event-stream');
    const [first, stop, done] = sse(chatChunk({ content: 'a' }), chatChunk({}, {}, 'stop'), '[DONE]');
    clock.advance(ttftMs);
    monitor.body(first!);
    monitor.body(stop!);
    monitor.body(done!);
    monitor.bodyEnd();
    monitor.delivered();
  };
  return { clock, telemetry, request };
}

describe('adapter cold starts and base models in the /metrics exposition', () => {
  it('counts the cold start and keeps its TTFT apart, so subtracting it from the TTFT histogram leaves the warm requests', async () => {
    const { clock, telemetry, request } = pod();
    request('sql-lora', 100);
    clock.advance(IDLE_AFTER_MS + 1);
    request('sql-lora', 2500);
    request('sql-lora', 120);
    request('llama-3.1-8b', 90);
    clock.advance(IDLE_AFTER_MS + 1);
    request('llama-3.1-8b', 80);

    const m = parsePrometheusText(await telemetry.scrape());
    const adapter = { workload: 'default', gen_ai_request_model: 'sql-lora' };
    expect(sumValues(m, 'tokentap_adapter_cold_starts_total', adapter)).toBe(1);
    expect(sumValues(m, 'tokentap_adapter_cold_starts_total', { gen_ai_request_model: 'llama-3.1-8b' })).toBe(0);
    const cold = histogram(m, 'tokentap_adapter_cold_start_time_to_first_token_seconds', adapter);
    expect(cold).toMatchObject({ count: 1, sum: 2.5 });
    const all = histogram(m, 'gen_ai_server_time_to_first_token_seconds', adapter);
    expect(all.count).toBe(3);
    expect([...cold.buckets.keys()]).toEqual([...all.buckets.keys()]);
    // Warm = all - cold, bucket by bucket: the two warm requests (100 and 120 ms) are all under 0.125 s.
    expect((all.buckets.get(0.125) ?? 0) - (cold.buckets.get(0.125) ?? 0)).toBe(2);
    expect((all.buckets.get(Infinity) ?? 0) - (cold.buckets.get(Infinity) ?? 0)).toBe(2);
  });

  it('exports tokentap_model_info for each model label given, the adapter mapped to its base and the base to itself', async () => {
    const { telemetry, request } = pod();
    request('sql-lora', 100);
    request('llama-3.1-8b', 100);
    request('made-up', 100);
    const text = await telemetry.scrape();
    const lines = text.split('\n').filter((line) => line.startsWith('tokentap_model_info'));
    expect(lines).toEqual([
      'tokentap_model_info{gen_ai_request_model="sql-lora",base_model="llama-3.1-8b"} 1',
      'tokentap_model_info{gen_ai_request_model="llama-3.1-8b",base_model="llama-3.1-8b"} 1',
    ]);
  });
});

describe('adapter in use', () => {
  it('counts idle time from the end of the last request: an adapter serving a long request is not idle', () => {
    const clock = new ManualClock(0);
    const cold = new AdapterColdStarts(clock, IDLE_AFTER_MS);
    cold.listed(['sql-lora']);
    expect(cold.requestStarted('sql-lora')).toBe(false);
    clock.advance(2 * IDLE_AFTER_MS);
    cold.requestEnded('sql-lora');
    clock.advance(IDLE_AFTER_MS);
    expect(cold.requestStarted('sql-lora')).toBe(false);
  });
});
