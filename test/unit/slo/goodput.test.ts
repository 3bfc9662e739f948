import { Writable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../../src/clock/clock.js';
import { loadSettings, type Workload } from '../../../src/config/load.js';
import { createLogger } from '../../../src/log/logger.js';
import { RequestLineWriter } from '../../../src/log/request-line.js';
import { ModelLabels } from '../../../src/metrics/model-labels.js';
import { Recorder } from '../../../src/metrics/recorder.js';
import { Telemetry } from '../../../src/metrics/telemetry.js';
import { RequestMonitor } from '../../../src/proxy/request-monitor.js';
import { metEverySlo } from '../../../src/slo/goodput.js';
import { recordSloEvents, type FinishedRequestFacts } from '../../../src/slo/slo-events.js';
import { WorkloadMatcher } from '../../../src/slo/workload-matcher.js';
import { histogram, parsePrometheusText, sumValues } from '../../helpers/prometheus-text.js';
import { chatChunk, sse } from '../../helpers/tap-harness.js';

const slo = (thresholdsS: Partial<Record<'ttft' | 'itl' | 'e2e', number>>, itlPercentile = 0.99): NonNullable<Workload['slo']> => ({
  objective: 0.99,
  thresholdsS,
  ttftOn: 'first_token',
  itlPercentile,
});
const completed = (ttftMs: number, e2eMs: number): FinishedRequestFacts => ({ outcome: 'completed', status: 200, nonStreamedAnswer: false, ttftMs, e2eMs });

describe('goodput: a request met every SLO of its workload', () => {
  it('meets TTFT at the threshold (inclusive) and misses it just above', () => {
    expect(metEverySlo(slo({ ttft: 0.2 }), completed(200, 900), 0, 0)).toBe(true);
    expect(metEverySlo(slo({ ttft: 0.2 }), completed(200.001, 900), 0, 0)).toBe(false);
  });

  it('needs every SLO: a good TTFT with a slow e2e is not goodput', () => {
    expect(metEverySlo(slo({ ttft: 0.2, e2e: 1 }), completed(100, 1000), 0, 0)).toBe(true);
    expect(metEverySlo(slo({ ttft: 0.2, e2e: 1 }), completed(100, 1001), 0, 0)).toBe(false);
  });

  it('meets ITL when at most floor((1 - p) x n) tokens were slow: 1 of 100 at p 0.99, not 2', () => {
    expect(metEverySlo(slo({ itl: 0.05 }), completed(100, 900), 100, 1)).toBe(true);
    expect(metEverySlo(slo({ itl: 0.05 }), completed(100, 900), 100, 2)).toBe(false);
    // Fewer than 100 tokens at p 0.99: floor(0.99) = 0 slow tokens allowed.
    expect(metEverySlo(slo({ itl: 0.05 }), completed(100, 900), 99, 1)).toBe(false);
  });

  it('reads the rank without floating-point drift: p 0.07 of 100 tokens allows 93 slow ones', () => {
    expect(metEverySlo(slo({ itl: 0.05 }, 0.07), completed(100, 900), 100, 93)).toBe(true);
    expect(metEverySlo(slo({ itl: 0.05 }, 0.07), completed(100, 900), 100, 94)).toBe(false);
  });

  it('is never goodput when the request did not complete, however fast it was', () => {
    for (const outcome of ['truncated', 'upstream_error', 'client_cancelled', 'timeout', 'client_error', 'shutdown'] as const) {
      expect(metEverySlo(slo({ ttft: 0.2 }), { ...completed(10, 20), outcome }, 0, 0)).toBe(false);
    }
  });

  it('meets TTFT for a non-streamed answer, where TTFT does not apply, if its e2e was good', () => {
    const facts = { ...completed(Number.NaN, 500), nonStreamedAnswer: true };
    expect(metEverySlo(slo({ ttft: 0.2, e2e: 1 }), facts, 0, 0)).toBe(true);
  });
});

const telemetries: Telemetry[] = [];
afterEach(async () => {
  await Promise.all(telemetries.splice(0).map((t) => t.shutdown()));
});

function setup(configYaml: string) {
  const clock = new ManualClock(1000);
  const telemetry = new Telemetry();
  telemetries.push(telemetry);
  const settings = loadSettings({ flags: { config: 'test.yaml' }, env: {}, readFile: () => configYaml });
  const logger = createLogger('silent', new Writable({ write: (_c, _e, cb) => cb() }));
  const deps = { clock, recorder: new Recorder(telemetry.meter, settings.buckets), models: new ModelLabels(8), logger, requestLines: new RequestLineWriter(logger), workloads: new WorkloadMatcher(settings.workloads) };
  /** One streamed chat request; `at[i]` ms after the start is when `events[i]` arrives. */
  const request = (events: Buffer[], at: number[], endMs: number) => {
    const monitor = new RequestMonitor(deps, 'POST', '/v1/chat/completions', {});
    monitor.requestBody('m');
    monitor.response(200, 'text/event-stream');
    const startMs = clock.nowMs();
    events.forEach((event, i) => {
      clock.advance(startMs + at[i]! - clock.nowMs());
      monitor.body(event);
    });
    clock.advance(startMs + endMs - clock.nowMs());
    monitor.bodyEnd();
    monitor.delivered();
  };
  const scrape = async () => parsePrometheusText(await telemetry.scrape());
  /** A request that has started (its body read) and not ended. */
  const started = () => new RequestMonitor(deps, 'POST', '/v1/chat/completions', {}).requestBody('m');
  return { request, scrape, started };
}

/** A reasoning stream: reasoning at 100 ms, the first answer token at `answerMs`, the next 20 ms later. */
const reasoningStream = (answerMs: number) => ({
  events: sse(chatChunk({ reasoning_content: 'hm' }), chatChunk({ content: 'a' }), chatChunk({ content: 'b' }), chatChunk({}, {}, 'stop'), '[DONE]'),
  at: [100, answerMs, answerMs + 20, answerMs + 20, answerMs + 20],
});

describe('goodput and ttft_on end to end through the request monitor', () => {
  it('counts goodput beside the requests: 1 of 2 met TTFT 200 ms and ITL 50 ms', async () => {
    const { request, scrape } = setup('workloads:\n  - name: chat\n    slo: { objective: 0.99, ttft: 200ms, itl: 50ms }\n');
    const fast = reasoningStream(150);
    request(fast.events, fast.at, 200);
    // First token at 100 ms is within TTFT, but the 80 ms gap after the answer token breaks ITL.
    request(sse(chatChunk({ content: 'a' }), chatChunk({ content: 'b' }), '[DONE]'), [100, 180, 180], 190);
    const m = await scrape();
    expect(sumValues(m, 'tokentap_goodput_requests_total', { workload: 'chat' })).toBe(1);
    expect(sumValues(m, 'tokentap_requests_total', { workload: 'chat', operation: 'generation' })).toBe(2);
  });

  it('makes the slow-request series at 0 when the first request of an ITL workload starts, before any can end slow (increase() skips a series\' first step)', async () => {
    const { started, scrape } = setup('workloads:\n  - name: chat\n    match: { path: /v1/chat/completions }\n    slo: { objective: 0.99, itl: 50ms }\n  - name: batch\n    slo: { objective: 0.99, ttft: 1s }\n');
    started();
    const m = await scrape();
    expect(m.get('tokentap_slo_itl_slow_requests_total')?.metrics.map((series) => [series.labels.workload, Number(series.value)])).toEqual([['chat', 0]]);
  });

  it('counts the requests with a token over the ITL threshold, and adds 0 for the others so the series exists', async () => {
    const { request, scrape } = setup('workloads:\n  - name: chat\n    slo: { objective: 0.99, itl: 50ms }\n');
    request(sse(chatChunk({ content: 'a' }), chatChunk({ content: 'b' }), '[DONE]'), [100, 140, 140], 150);
    const quiet = await scrape();
    expect(quiet.get('tokentap_slo_itl_slow_requests_total')?.metrics.map((series) => [series.labels.workload, Number(series.value)])).toEqual([['chat', 0]]);
    // 80 ms, then 30 ms: one slow token, one slow request.
    request(sse(chatChunk({ content: 'a' }), chatChunk({ content: 'b' }), chatChunk({ content: 'c' }), '[DONE]'), [100, 180, 210, 210], 220);
    const m = await scrape();
    expect(sumValues(m, 'tokentap_slo_itl_slow_requests_total', { workload: 'chat' })).toBe(1);
    expect(sumValues(m, 'tokentap_slo_events_total', { workload: 'chat', slo: 'itl', result: 'bad' })).toBe(1);
  });

  it('records the first answer token, and judges TTFT on it with ttft_on: first_answer', async () => {
    const { request, scrape } = setup('workloads:\n  - name: chat\n    slo: { objective: 0.99, ttft: 200ms, ttft_on: first_answer }\n');
    const late = reasoningStream(250);
    request(late.events, late.at, 300);
    const m = await scrape();
    const labels = { workload: 'chat', gen_ai_request_model: 'm' };
    expect(histogram(m, 'gen_ai_server_time_to_first_token_seconds', labels)).toMatchObject({ count: 1, sum: 0.1 });
    expect(histogram(m, 'tokentap_time_to_first_answer_token_seconds', labels)).toMatchObject({ count: 1, sum: 0.25 });
    // The first token (100 ms) was in time; the answer (250 ms) was not.
    expect(sumValues(m, 'tokentap_slo_events_total', { workload: 'chat', slo: 'ttft', result: 'bad' })).toBe(1);
    expect(sumValues(m, 'tokentap_goodput_requests_total', { workload: 'chat' })).toBe(0);
  });

  it('judges the same stream good on the first token by default', async () => {
    const { request, scrape } = setup('workloads:\n  - name: chat\n    slo: { objective: 0.99, ttft: 200ms }\n');
    const late = reasoningStream(250);
    request(late.events, late.at, 300);
    const m = await scrape();
    expect(sumValues(m, 'tokentap_slo_events_total', { workload: 'chat', slo: 'ttft', result: 'good' })).toBe(1);
    expect(sumValues(m, 'tokentap_goodput_requests_total', { workload: 'chat' })).toBe(1);
  });

  it('counts a stream that completed with reasoning only as bad TTFT with ttft_on: first_answer', async () => {
    const { request, scrape } = setup('workloads:\n  - name: chat\n    slo: { objective: 0.99, ttft: 200ms, ttft_on: first_answer }\n');
    request(sse(chatChunk({ reasoning_content: 'hm' }), chatChunk({}, {}, 'length'), '[DONE]'), [100, 110, 110], 120);
    const m = await scrape();
    expect(sumValues(m, 'tokentap_slo_events_total', { workload: 'chat', slo: 'ttft', result: 'bad' })).toBe(1);
    expect(histogram(m, 'tokentap_time_to_first_answer_token_seconds', { workload: 'chat' }).count).toBe(0);
  });

  it('has no TTFT SLO events for a workload whose SLO sets no TTFT threshold (not a series where every request is bad)', async () => {
    const { request, scrape } = setup('workloads:\n  - name: chat\n    slo: { objective: 0.99, e2e: 1s, itl: 50ms }\n');
    request(sse(chatChunk({ content: 'a' }), chatChunk({ content: 'b' }), '[DONE]'), [100, 110, 110], 120);
    const m = await scrape();
    expect(sumValues(m, 'tokentap_slo_events_total', { workload: 'chat', slo: 'e2e', result: 'good' })).toBe(1);
    expect(sumValues(m, 'tokentap_slo_events_total', { workload: 'chat', slo: 'itl', result: 'good' })).toBe(1);
    expect(sumValues(m, 'tokentap_slo_events_total', { workload: 'chat', slo: 'ttft' })).toBe(0);
  });

  it('counts one e2e event and one ITL event per token after the first, good and bad apart, for a workload with every SLO', async () => {
    const { request, scrape } = setup('workloads:\n  - name: chat\n    slo: { objective: 0.99, ttft: 200ms, e2e: 1s, itl: 50ms }\n');
    // Gaps of 20, 80 and 30 ms: two tokens within 50 ms, one beyond.
    request(sse(chatChunk({ content: 'a' }), chatChunk({ content: 'b' }), chatChunk({ content: 'c' }), chatChunk({ content: 'd' }), '[DONE]'), [100, 120, 200, 230, 230], 1200);
    const m = await scrape();
    const events = (slo: string, result: string) => sumValues(m, 'tokentap_slo_events_total', { workload: 'chat', slo, result });
    expect({ ttftGood: events('ttft', 'good'), ttftBad: events('ttft', 'bad'), e2eGood: events('e2e', 'good'), e2eBad: events('e2e', 'bad'), itlGood: events('itl', 'good'), itlBad: events('itl', 'bad') }).toEqual({
      ttftGood: 1,
      ttftBad: 0,
      e2eGood: 0,
      e2eBad: 1,
      itlGood: 2,
      itlBad: 1,
    });
  });

  it('has no ITL series for a one-token stream, nor for a workload whose SLO sets no ITL threshold', async () => {
    const itlSeries = (m: Awaited<ReturnType<ReturnType<typeof setup>['scrape']>>) => (m.get('tokentap_slo_events_total')?.metrics ?? []).filter((sample) => sample.labels.slo === 'itl').length;
    const withItl = setup('workloads:\n  - name: chat\n    slo: { objective: 0.99, itl: 50ms }\n');
    withItl.request(sse(chatChunk({ content: 'a' }), '[DONE]'), [100, 100], 110);
    expect(itlSeries(await withItl.scrape())).toBe(0);
    const withoutItl = setup('workloads:\n  - name: chat\n    slo: { objective: 0.99, e2e: 1s }\n');
    withoutItl.request(sse(chatChunk({ content: 'a' }), chatChunk({ content: 'b' }), '[DONE]'), [100, 120, 120], 130);
    const m = await withoutItl.scrape();
    expect(sumValues(m, 'tokentap_slo_events_total', { workload: 'chat', slo: 'e2e', result: 'good' })).toBe(1);
    expect(itlSeries(m)).toBe(0);
  });

  it('records the requests of a workload without an SLO, with no SLO events', async () => {
    const { request, scrape } = setup('workloads:\n  - name: batch\n');
    request(sse(chatChunk({ content: 'a' }), chatChunk({ content: 'b' }), '[DONE]'), [100, 300, 300], 310);
    const m = await scrape();
    expect(sumValues(m, 'tokentap_requests_total', { workload: 'batch', outcome: 'completed' })).toBe(1);
    expect(m.has('tokentap_slo_events_total') ? sumValues(m, 'tokentap_slo_events_total', {}) : 0).toBe(0);
  });

  it('has no goodput series for a workload without an SLO', async () => {
    const { request, scrape } = setup('workloads:\n  - name: batch\n');
    request(sse(chatChunk({ content: 'a' }), '[DONE]'), [100, 100], 110);
    expect((await scrape()).has('tokentap_goodput_requests_total')).toBe(false);
  });
});

describe('recordSloEvents on its own (the request monitor calls it only for a workload with an SLO, and tallies ITL only with an ITL threshold)', () => {
  /** The SLO event series recorded for one request of `workloadYaml`'s first workload. */
  async function eventsFor(workloadYaml: string, facts: FinishedRequestFacts, itlTokens: number, itlBadTokens: number) {
    const telemetry = new Telemetry();
    telemetries.push(telemetry);
    const settings = loadSettings({ flags: { config: 'test.yaml' }, env: {}, readFile: () => `workloads:\n${workloadYaml}` });
    recordSloEvents(new Recorder(telemetry.meter, settings.buckets), { workload: 'w' }, settings.workloads[0] as Workload, facts, itlTokens, itlBadTokens);
    const m = parsePrometheusText(await telemetry.scrape());
    return (m.get('tokentap_slo_events_total')?.metrics ?? []).map((sample) => `${sample.labels.slo} ${sample.labels.result} ${sample.value}`).sort();
  }

  it('records nothing for a workload without an SLO, whatever tokens it is given', async () => {
    expect(await eventsFor('  - name: w\n', completed(100, 900), 5, 1)).toEqual([]);
  });

  it('records no ITL events for a workload whose SLO sets no ITL threshold, whatever tokens it is given', async () => {
    expect(await eventsFor('  - name: w\n    slo: { objective: 0.99, e2e: 1s }\n', completed(100, 900), 5, 1)).toEqual(['e2e bad 0', 'e2e good 1']);
  });

  it('records the ITL tokens it is given, good and bad apart', async () => {
    expect(await eventsFor('  - name: w\n    slo: { objective: 0.99, itl: 50ms }\n', completed(100, 900), 5, 1)).toEqual(['itl bad 1', 'itl good 4']);
  });
});
