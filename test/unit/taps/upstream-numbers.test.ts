import { Writable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { encode, grpcFrame } from '../../helpers/grpc-frames.js';
import { ManualClock } from '../../../src/clock/clock.js';
import { loadSettings } from '../../../src/config/load.js';
import { createLogger } from '../../../src/log/logger.js';
import { RequestLineWriter } from '../../../src/log/request-line.js';
import { ModelLabels } from '../../../src/metrics/model-labels.js';
import { decodeDelimited } from '../../../src/metrics/protobuf-exposition.js';
import { Recorder } from '../../../src/metrics/recorder.js';
import { Telemetry } from '../../../src/metrics/telemetry.js';
import { RequestMonitor } from '../../../src/proxy/request-monitor.js';
import { createOpenAISseTap } from '../../../src/taps/openai-sse.js';
import { WorkloadMatcher } from '../../../src/slo/workload-matcher.js';
import { MAX_DURATION_MS, MAX_TOKENS_PER_EVENT, MAX_TOKENS_PER_REQUEST } from '../../../src/taps/upstream-numbers.js';
import { histogram, parsePrometheusText, sumValues } from '../../helpers/prometheus-text.js';
import { chatChunk, runTap, sse } from '../../helpers/tap-harness.js';

/**
 * Issue 23 item 3: a hostile or broken upstream's numbers (token counts, engine durations) must not
 * poison a metric. Each reproduction goes through the request monitor and its tap into a real
 * Telemetry, and is read back from both expositions, text and protobuf.
 */

const telemetries: Telemetry[] = [];
afterEach(async () => {
  await Promise.all(telemetries.splice(0).map((t) => t.shutdown()));
});

type ProtoFamily = {
  name: string;
  metric: Array<{ label: Array<{ name: string; value: string }>; counter?: { value?: number }; histogram?: { sample_count?: number; sample_sum?: number } }>;
};

interface Upstream {
  readonly path: string;
  readonly contentType: string;
  readonly body: readonly Buffer[];
}

/** A sidecar's metrics pipeline; each request runs through a RequestMonitor on a fake clock (first body byte 100 ms in). */
function pipeline() {
  const clock = new ManualClock(1000);
  const telemetry = new Telemetry();
  telemetries.push(telemetry);
  const settings = loadSettings({ flags: {}, env: {} });
  const logger = createLogger('info', new Writable({ write: (_c, _e, cb) => cb() }));
  const deps = { clock, recorder: new Recorder(telemetry.meter, settings.buckets), models: new ModelLabels(8), logger, requestLines: new RequestLineWriter(logger), workloads: new WorkloadMatcher(settings.workloads) };
  return {
    request(upstream: Upstream): void {
      const monitor = new RequestMonitor(deps, 'POST', upstream.path, {});
      monitor.requestBody('m');
      monitor.response(200, upstream.contentType);
      for (const chunk of upstream.body) {
        clock.advance(100);
        monitor.body(chunk);
      }
      monitor.bodyEnd();
      monitor.delivered();
    },
    /** Both expositions of one scrape each: `text(name)` and `proto(name)` read the series of workload default, model m. */
    async scrape() {
      const text = parsePrometheusText(await telemetry.scrape());
      const proto = decodeDelimited(await telemetry.scrapeProtobuf()) as unknown as ProtoFamily[];
      const protoSeries = (name: string, labels: Record<string, string>) =>
        (proto.find((f) => f.name === name)?.metric ?? []).filter((m) => Object.entries(labels).every(([k, v]) => m.label.some((l) => l.name === k && l.value === v)));
      return {
        counterText: (name: string, labels: Record<string, string> = {}) => sumValues(text, name, labels),
        counterProto: (name: string, labels: Record<string, string> = {}) => protoSeries(name, labels).reduce((sum, m) => sum + (m.counter?.value ?? 0), 0),
        histogramText: (name: string) => histogram(text, name),
        histogramProto: (name: string) => {
          const [m] = protoSeries(name, {});
          return { count: m?.histogram?.sample_count ?? 0, sum: m?.histogram?.sample_sum ?? 0 };
        },
      };
    },
  };
}

const chat = (...events: Array<string | object>): Upstream => ({ path: '/v1/chat/completions', contentType: 'text/event-stream', body: sse(...events) });
const ndjson = (...lines: object[]): Upstream => ({ path: '/api/chat', contentType: 'application/x-ndjson', body: lines.map((l) => Buffer.from(`${JSON.stringify(l)}\n`)) });
const llamaNative = (...events: object[]): Upstream => ({ path: '/completion', contentType: 'text/event-stream', body: sse(...events) });

/** A healthy OpenAI-compatible stream of two tokens reporting `usage`. */
function openAiStream(usage: object, extra: object = {}): Upstream {
  return chat(chatChunk({ content: 'a' }), chatChunk({ content: 'b' }), chatChunk({}, {}, 'stop'), { id: 'chatcmpl-1', object: 'chat.completion.chunk', model: 'm', choices: [], usage, ...extra }, '[DONE]');
}

const TOKENS = 'tokentap_tokens_total';
const implausible = { reason: 'implausible_value' };
const output = { gen_ai_token_type: 'output' };
const input = { gen_ai_token_type: 'input' };

describe('no number from an upstream can poison a metric (issue 23 item 3)', () => {
  it('vLLM metrics of 1.7e308 ms: no engine sample, the engine sums stay finite in text and protobuf, two implausible values counted', async () => {
    const p = pipeline();
    p.request(openAiStream({ prompt_tokens: 5, completion_tokens: 2, total_tokens: 7 }, { metrics: { queue_time_ms: 1.7e308, time_to_first_token_ms: 1.7e308, generation_time_ms: 20 } }));
    p.request(openAiStream({ prompt_tokens: 5, completion_tokens: 2, total_tokens: 7 }, { metrics: { queue_time_ms: 40, time_to_first_token_ms: 110, generation_time_ms: 20 } }));
    const s = await p.scrape();
    for (const name of ['tokentap_engine_time_to_first_token_seconds', 'tokentap_engine_queue_time_seconds', 'tokentap_engine_prefill_time_seconds']) {
      expect(s.histogramText(name), name).toMatchObject({ count: 1 });
      expect(s.histogramProto(name), name).toMatchObject({ count: 1 });
    }
    expect(s.histogramText('tokentap_engine_time_to_first_token_seconds').sum).toBeCloseTo(0.15, 12);
    expect(s.histogramProto('tokentap_engine_time_to_first_token_seconds').sum).toBeCloseTo(0.15, 12);
    expect(s.counterText('tokentap_tap_errors_total', implausible)).toBe(2);
    expect(s.counterProto('tokentap_tap_errors_total', implausible)).toBe(2);
  });

  it('two OpenAI usage blocks of 1.7e308 tokens add nothing: tokens_total counts the healthy stream only, in text and protobuf', async () => {
    const p = pipeline();
    p.request(openAiStream({ prompt_tokens: 1.7e308, completion_tokens: 1.7e308, total_tokens: 1.7e308 }));
    p.request(openAiStream({ prompt_tokens: 1.7e308, completion_tokens: 1.7e308, total_tokens: 1.7e308 }));
    p.request(openAiStream({ prompt_tokens: 30, completion_tokens: 2, total_tokens: 32 }));
    const s = await p.scrape();
    expect(s.counterText(TOKENS, input)).toBe(30);
    expect(s.counterProto(TOKENS, input)).toBe(30);
    // The poisoned streams fall back to their counted tokens (two content events each).
    expect(s.counterText(TOKENS, output)).toBe(6);
    expect(s.counterProto(TOKENS, output)).toBe(6);
    expect(s.counterText('tokentap_tap_errors_total', implausible)).toBe(4);
  });

  it('one usage of 1e300 does not freeze tokens_total: a later 30 still adds 30', async () => {
    const p = pipeline();
    p.request(openAiStream({ prompt_tokens: 1e300, completion_tokens: 2, total_tokens: 1e300 }));
    p.request(openAiStream({ prompt_tokens: 30, completion_tokens: 2, total_tokens: 32 }));
    const s = await p.scrape();
    expect(s.counterText(TOKENS, input)).toBe(30);
    expect(s.counterProto(TOKENS, input)).toBe(30);
  });

  it('the same through a non-streamed OpenAI answer: usage of 1.7e308 is dropped and counted', async () => {
    const p = pipeline();
    const answer = { id: 'x', object: 'chat.completion', choices: [{ index: 0, message: { role: 'assistant', content: 'hi' }, finish_reason: 'stop' }], usage: { prompt_tokens: 1.7e308, completion_tokens: -3, total_tokens: 1 } };
    p.request({ path: '/v1/chat/completions', contentType: 'application/json', body: [Buffer.from(JSON.stringify(answer))] });
    const s = await p.scrape();
    expect(s.counterText(TOKENS)).toBe(0);
    expect(s.counterProto(TOKENS)).toBe(0);
    expect(s.counterText('tokentap_tap_errors_total', implausible)).toBe(2);
  });

  it('llama.cpp native tokens_evaluated of 1e300 and a prompt_ms of 1.7e308: dropped, the rest of the stop event kept', async () => {
    const p = pipeline();
    p.request(
      llamaNative(
        { content: 'a', stop: false, tokens_predicted: 1, tokens_evaluated: 4 },
        { content: 'b', stop: false, tokens_predicted: 2, tokens_evaluated: 4 },
        { content: '', stop: true, tokens_predicted: 2, tokens_evaluated: 1e300, timings: { prompt_ms: 1.7e308, predicted_ms: 20 } },
      ),
    );
    const s = await p.scrape();
    expect(s.counterText(TOKENS, input)).toBe(0);
    expect(s.counterText(TOKENS, output)).toBe(2);
    expect(s.counterProto(TOKENS, output)).toBe(2);
    expect(s.histogramText('tokentap_engine_prefill_time_seconds').count).toBe(0);
    expect(s.histogramProto('tokentap_engine_prefill_time_seconds').count).toBe(0);
    expect(s.counterText('tokentap_tap_errors_total', implausible)).toBe(2);
  });

  it('Ollama eval_count of 1.7e308 and durations of 1.7e308 ns: dropped; the counted output and finite durations stand', async () => {
    const p = pipeline();
    const piece = (content: string) => ({ model: 'm', message: { role: 'assistant', content }, done: false });
    p.request(
      ndjson(piece('a'), piece('b'), {
        model: 'm',
        message: { role: 'assistant', content: '' },
        done: true,
        eval_count: 1.7e308,
        prompt_eval_count: 9,
        load_duration: 1.7e308,
        prompt_eval_duration: 130e6,
        eval_duration: 1.7e308,
        total_duration: 1.7e308,
      }),
    );
    const s = await p.scrape();
    expect(s.counterText(TOKENS, output)).toBe(2);
    expect(s.counterProto(TOKENS, output)).toBe(2);
    expect(s.counterText(TOKENS, input)).toBe(9);
    // Load dropped: the engine TTFT is the prefill alone.
    expect(s.histogramText('tokentap_engine_time_to_first_token_seconds').sum).toBeCloseTo(0.13, 12);
    expect(s.histogramProto('tokentap_engine_time_to_first_token_seconds').sum).toBeCloseTo(0.13, 12);
    expect(s.counterText('tokentap_tap_errors_total', implausible)).toBe(4);
  });

  it('one llama.cpp event whose tokens_predicted jumps by 10^7 costs one per-token ITL sample, not 10^7', async () => {
    const p = pipeline();
    p.request(
      llamaNative(
        { content: 'a', stop: false, tokens_predicted: 1, tokens_evaluated: 4 },
        { content: 'b', stop: false, tokens_predicted: MAX_TOKENS_PER_REQUEST, tokens_evaluated: 4 },
        { content: 'c', stop: false, tokens_predicted: MAX_TOKENS_PER_REQUEST, tokens_evaluated: 4 },
      ),
    );
    const s = await p.scrape();
    expect(s.histogramText('tokentap_inter_token_latency_seconds').count).toBe(2);
    expect(s.histogramProto('tokentap_inter_token_latency_seconds').count).toBe(2);
    expect(s.counterText('tokentap_tap_errors_total', implausible)).toBe(1);
  });

  it(`takes ${MAX_TOKENS_PER_EVENT} tokens in one OpenAI event (continuous usage) as plausible`, async () => {
    const p = pipeline();
    const usage = (n: number) => ({ usage: { prompt_tokens: 3, completion_tokens: n, total_tokens: 3 + n } });
    p.request(chat(chatChunk({ content: 'a' }, usage(1)), chatChunk({ content: 'b' }, usage(1 + MAX_TOKENS_PER_EVENT)), chatChunk({}, usage(1 + MAX_TOKENS_PER_EVENT), 'stop'), '[DONE]'));
    const s = await p.scrape();
    expect(s.histogramText('tokentap_inter_token_latency_seconds').count).toBe(MAX_TOKENS_PER_EVENT);
    expect(s.counterText('tokentap_tap_errors_total', implausible)).toBe(0);
  });

  // Security review: one 1 MB event with 40,000 content choices counted 40,000 tokens, 40,000 per-token samples.
  it(`counts an event with more content choices than ${MAX_TOKENS_PER_EVENT} as implausible and takes ${MAX_TOKENS_PER_EVENT} tokens from it; ${MAX_TOKENS_PER_EVENT} choices are plausible`, () => {
    const choices = (n: number) => ({ choices: Array.from({ length: n }, () => ({ delta: { content: 'a' } })) });
    const hostile = runTap(createOpenAISseTap, sse(chatChunk({ content: 'x' }), choices(40_000)));
    expect(hostile.gaps).toEqual([[10, MAX_TOKENS_PER_EVENT]]);
    expect(hostile.problems).toEqual(['implausible_value']);
    const wide = runTap(createOpenAISseTap, sse(chatChunk({ content: 'x' }), choices(MAX_TOKENS_PER_EVENT)));
    expect(wide.gaps).toEqual([[10, MAX_TOKENS_PER_EVENT]]);
    expect(wide.problems).toEqual([]);
  });

  it('counts implausible_value once for a request whose messages claim more than 10^7 tokens in all, and 10^7 output tokens', async () => {
    const p = pipeline();
    const claim = grpcFrame(encode('inference.ModelStreamInferResponse', { infer_response: { outputs: [{ name: 'output_ids', datatype: 'INT32', shape: [1, 1, 1024] }] } }));
    p.request({ path: '/inference.GRPCInferenceService/ModelStreamInfer', contentType: 'application/grpc', body: Array.from({ length: 10_000 }, () => claim) });
    const s = await p.scrape();
    expect(s.counterText(TOKENS, output)).toBe(MAX_TOKENS_PER_REQUEST);
    expect(s.counterText('tokentap_tap_errors_total', implausible)).toBe(1);
  });

  it('refuses Anthropic input tokens whose parts are each within the bound but whose sum is not', async () => {
    const p = pipeline();
    const start = (usage: object) => ({ type: 'message_start', message: { id: 'm', type: 'message', role: 'assistant', content: [], model: 'm', usage } });
    const messages = (usage: object): Upstream => ({ path: '/v1/messages', contentType: 'text/event-stream', body: sse(start(usage), { type: 'message_stop' }) });
    const part = MAX_TOKENS_PER_REQUEST - 1;
    p.request(messages({ input_tokens: part, cache_creation_input_tokens: part, cache_read_input_tokens: part, output_tokens: 1 }));
    p.request(messages({ input_tokens: 10, cache_creation_input_tokens: 20, cache_read_input_tokens: 30, output_tokens: 1 }));
    const s = await p.scrape();
    expect(s.counterText(TOKENS, input)).toBe(60);
    expect(s.counterText('tokentap_tap_errors_total', implausible)).toBe(1);
  });

  it('takes the bounds themselves and refuses one past them: 10^7 tokens and one day are plausible', async () => {
    const p = pipeline();
    p.request(openAiStream({ prompt_tokens: MAX_TOKENS_PER_REQUEST, completion_tokens: 2, total_tokens: 1 }, { metrics: { queue_time_ms: MAX_DURATION_MS, time_to_first_token_ms: 1 } }));
    p.request(openAiStream({ prompt_tokens: MAX_TOKENS_PER_REQUEST + 1, completion_tokens: 2.5, total_tokens: 1 }, { metrics: { queue_time_ms: MAX_DURATION_MS + 1, time_to_first_token_ms: -1 } }));
    const s = await p.scrape();
    expect(s.counterText(TOKENS, input)).toBe(MAX_TOKENS_PER_REQUEST);
    expect(s.histogramText('tokentap_engine_queue_time_seconds')).toMatchObject({ count: 1, sum: MAX_DURATION_MS / 1000 });
    expect(s.counterText('tokentap_tap_errors_total', implausible)).toBe(4);
  });
});
