import { Writable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../../src/clock/clock.js';
import { loadSettings } from '../../../src/config/load.js';
import { createLogger } from '../../../src/log/logger.js';
import { RequestLineWriter } from '../../../src/log/request-line.js';
import { IN_FLIGHT_BANDS, InFlightTracker, inFlightBand } from '../../../src/metrics/in-flight-band.js';
import { ModelLabels } from '../../../src/metrics/model-labels.js';
import { Recorder } from '../../../src/metrics/recorder.js';
import { Telemetry } from '../../../src/metrics/telemetry.js';
import { RequestMonitor } from '../../../src/proxy/request-monitor.js';
import { WorkloadMatcher } from '../../../src/slo/workload-matcher.js';
import { histogram, parsePrometheusText } from '../../helpers/prometheus-text.js';
import { chatChunk, sse } from '../../helpers/tap-harness.js';

describe('in-flight bands', () => {
  it('folds counts into power-of-two bands, edges included', () => {
    const cases: Array<[number, string]> = [[1, '1'], [2, '2'], [3, '3-4'], [4, '3-4'], [5, '5-8'], [8, '5-8'], [9, '9-16'], [16, '9-16'], [17, '17-32'], [64, '33-64'], [65, '65-128'], [128, '65-128'], [129, '129-256'], [256, '129-256'], [257, '257+'], [100_000, '257+']];
    for (const [n, band] of cases) expect(inFlightBand(n), `n = ${n}`).toBe(band);
  });

  it('has a bounded label: every count from 1 to 1000 lands in one of ten bands', () => {
    const seen = new Set(Array.from({ length: 1000 }, (_, i) => inFlightBand(i + 1)));
    expect([...seen]).toEqual([...IN_FLIGHT_BANDS]);
  });

  it('counts the requests in flight, the starting one included', () => {
    const tracker = new InFlightTracker();
    expect(tracker.started()).toBe('1');
    expect(tracker.started()).toBe('2');
    expect(tracker.started()).toBe('3-4');
    tracker.finished();
    tracker.finished();
    expect(tracker.started()).toBe('2');
  });
});

const telemetries: Telemetry[] = [];
afterEach(async () => {
  await Promise.all(telemetries.splice(0).map((t) => t.shutdown()));
});

describe('TTFT and ITL by in-flight band through the request monitor', () => {
  it('records each request under the band at its start, not at its end', async () => {
    const clock = new ManualClock(0);
    const telemetry = new Telemetry();
    telemetries.push(telemetry);
    const settings = loadSettings({ flags: { config: 't.yaml' }, env: {}, readFile: () => 'workloads:\n  - name: chat\n    slo: { objective: 0.99, ttft: 300ms }\n' });
    const logger = createLogger('silent', new Writable({ write: (_c, _e, cb) => cb() }));
    const deps = { clock, recorder: new Recorder(telemetry.meter, settings.buckets), models: new ModelLabels(8), logger, requestLines: new RequestLineWriter(logger), workloads: new WorkloadMatcher(settings.workloads), inFlight: new InFlightTracker() };
    const start = () => {
      const monitor = new RequestMonitor(deps, 'POST', '/v1/chat/completions', {});
      monitor.requestBody('m');
      monitor.response(200, 'text/event-stream');
      return monitor;
    };
    const events = sse(chatChunk({ content: 'a' }), chatChunk({ content: 'bc' }, { usage: { prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 } }, 'stop'), '[DONE]');
    const alone = start(); // 1 in flight
    clock.advance(100);
    const second = start(); // 2 in flight
    alone.body(events[0]!); // alone: TTFT 100 ms
    clock.advance(40);
    alone.body(events[1]!); // alone: 40 ms later, a chunk of 2 tokens (cumulative usage 2): 20 ms each
    alone.body(events[2]!);
    alone.bodyEnd();
    alone.delivered();
    clock.advance(160);
    second.body(events[0]!); // second: TTFT 200 ms, still under the band of its start
    second.body(events[2]!);
    second.bodyEnd();
    second.delivered();

    const m = parsePrometheusText(await telemetry.scrape());
    const ttft = (band: string) => histogram(m, 'tokentap_time_to_first_token_by_concurrency_seconds', { workload: 'chat', in_flight: band });
    expect(ttft('1')).toMatchObject({ count: 1, sum: 0.1 });
    expect(ttft('2')).toMatchObject({ count: 1, sum: 0.2 });
    const itl = histogram(m, 'tokentap_inter_token_latency_by_concurrency_seconds', { workload: 'chat', in_flight: '1' });
    expect(itl.count).toBe(2);
    expect(itl.sum).toBeCloseTo(0.04, 12);
    // The label is on the dedicated histograms only.
    expect(m.get('gen_ai_server_time_to_first_token_seconds')?.metrics.some((s) => s.labels?.['in_flight'] !== undefined)).toBe(false);
    // Both finished: the next request is alone again.
    expect(deps.inFlight.started()).toBe('1');
  });
});
