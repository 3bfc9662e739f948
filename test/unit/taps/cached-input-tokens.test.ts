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
import { createAnthropicSseTap } from '../../../src/taps/anthropic-sse.js';
import { createLlamaCppSseTap } from '../../../src/taps/llamacpp-sse.js';
import { createOpenAIJsonTap } from '../../../src/taps/openai-json.js';
import { createOpenAIResponsesSseTap } from '../../../src/taps/openai-responses-sse.js';
import { createOpenAISseTap } from '../../../src/taps/openai-sse.js';
import type { TapFactory } from '../../../src/taps/tap.js';
import { llamacppStream, splitEvents, vllmStream } from '../../helpers/fixtures.js';
import { histogram, parsePrometheusText, sumValues } from '../../helpers/prometheus-text.js';
import { runTap } from '../../helpers/tap-harness.js';

/**
 * Prefix-cache hits as each server reports them, on the real captures of test/fixtures with the
 * field added as the server's own source writes it (the captured servers ran without a cache hit
 * to report, or before the field existed):
 * - vLLM `UsageInfo.prompt_tokens_details: PromptTokenUsageInfo {cached_tokens}`
 *   (vllm/entrypoints/openai/protocol.py; sent with `--enable-prompt-tokens-details`), on the
 *   usage-only chunk of `stream_options.include_usage`;
 * - SGLang the same `prompt_tokens_details.cached_tokens` (python/sglang/srt/entrypoints/openai/
 *   protocol.py `UsageInfo`; sent with `--enable-cache-report`);
 * - llama.cpp `timings.cache_n` (`result_timings::to_json`) and, in newer builds, also
 *   `usage.prompt_tokens_details.cached_tokens` (`usage_json_oaicompat`), both in
 *   ggml-org/llama.cpp tools/server/server-task.cpp; `prompt_tokens` = `cache_n` + `prompt_n`;
 * - Anthropic `cache_read_input_tokens` (docs.anthropic.com prompt caching);
 * - OpenAI Responses `input_tokens_details.cached_tokens`, in the real capture (0).
 */
function cachedOf(create: TapFactory, chunks: readonly Buffer[]) {
  const run = runTap(create, chunks);
  return { input: run.timeline.reportedInputTokens, cached: run.timeline.reportedCachedInputTokens, ratio: run.timeline.cachedInputRatio, problems: run.problems };
}

const text = (buffer: Buffer) => buffer.toString('utf8');
const replaced = (buffer: Buffer, from: string, to: string): Buffer => {
  const source = text(buffer);
  if (!source.includes(from)) throw new Error(`fixture no longer contains ${from}`);
  return Buffer.from(source.replace(from, to));
};

/** vLLM's chat capture with the usage-only chunk `include_usage` adds, its prompt 32 of 48 tokens from the cache (two 16-token blocks). */
function vllmWithCachedTokens(details: string): Buffer[] {
  const events = splitEvents(vllmStream('chat.sse'));
  const usage = `data: {"id":"chatcmpl-8169acc5f415bc00","object":"chat.completion.chunk","created":1796110911,"model":"tiny","choices":[],"usage":{"prompt_tokens":48,"total_tokens":64,"completion_tokens":16${details}}}\n\n`;
  return [...events.slice(0, -1), Buffer.from(usage), ...events.slice(-1)];
}

describe('prefix-cache hits read from each server', () => {
  it('reads vLLM prompt_tokens_details.cached_tokens from the usage chunk of a stream', () => {
    expect(cachedOf(createOpenAISseTap, vllmWithCachedTokens(',"prompt_tokens_details":{"cached_tokens":32}'))).toEqual({ input: 48, cached: 32, ratio: 32 / 48, problems: [] });
  });

  it('leaves the cached tokens unknown when vLLM sends no details, or null details', () => {
    expect(cachedOf(createOpenAISseTap, vllmWithCachedTokens('')).cached).toBeNaN();
    const nullDetails = cachedOf(createOpenAISseTap, vllmWithCachedTokens(',"prompt_tokens_details":null'));
    expect([nullDetails.cached, nullDetails.ratio, nullDetails.problems]).toEqual([Number.NaN, Number.NaN, []]);
  });

  it('reads SGLang prompt_tokens_details.cached_tokens from a non-streamed answer', () => {
    const answer = {
      id: '2b1f4c6e0a',
      object: 'chat.completion',
      created: 1796110911,
      model: 'qwen',
      choices: [{ index: 0, message: { role: 'assistant', content: 'Hello', reasoning_content: null, tool_calls: null }, logprobs: null, finish_reason: 'stop', matched_stop: 151645 }],
      usage: { prompt_tokens: 1024, total_tokens: 1030, completion_tokens: 6, prompt_tokens_details: { cached_tokens: 768 } },
    };
    expect(cachedOf(createOpenAIJsonTap, [Buffer.from(JSON.stringify(answer))])).toEqual({ input: 1024, cached: 768, ratio: 0.75, problems: [] });
  });

  it("reads llama.cpp's timings.cache_n from the final chunk of its chat stream", () => {
    const stream = replaced(llamacppStream('chat-completions.sse'), '"timings":{"prompt_n":35', '"timings":{"cache_n":1,"prompt_n":35');
    expect(cachedOf(createOpenAISseTap, splitEvents(stream))).toEqual({ input: 36, cached: 1, ratio: 1 / 36, problems: [] });
  });

  it("prefers llama.cpp's usage details to its timings when a newer build sends both", () => {
    let stream = replaced(llamacppStream('chat-completions.sse'), '"timings":{"prompt_n":35', '"timings":{"cache_n":1,"prompt_n":35');
    stream = replaced(stream, '"total_tokens":164}', '"total_tokens":164,"prompt_tokens_details":{"cached_tokens":1}}');
    expect(cachedOf(createOpenAISseTap, splitEvents(stream))).toMatchObject({ cached: 1, problems: [] });
  });

  it("reads llama.cpp's timings.cache_n from the stop event of native /completion", () => {
    const stream = replaced(llamacppStream('completion-native.sse'), '"timings":{"prompt_n":4', '"timings":{"cache_n":1,"prompt_n":4');
    expect(cachedOf(createLlamaCppSseTap, splitEvents(stream))).toEqual({ input: 5, cached: 1, ratio: 0.2, problems: [] });
  });

  it('reads Anthropic cache_read_input_tokens (not the cache writes) as the cached part of the whole prompt', () => {
    const stream = replaced(
      readFileSync(new URL('../../fixtures/streams/anthropic/messages-basic.sse', import.meta.url)),
      '"usage": {"input_tokens": 25, "output_tokens": 1}',
      '"usage": {"input_tokens": 25, "cache_creation_input_tokens": 75, "cache_read_input_tokens": 900, "output_tokens": 1}',
    );
    expect(cachedOf(createAnthropicSseTap, splitEvents(stream))).toEqual({ input: 1000, cached: 900, ratio: 0.9, problems: [] });
  });

  it('reads the Responses API input_tokens_details.cached_tokens of the real capture: zero, a reported miss', () => {
    const stream = readFileSync(new URL('../../fixtures/streams/openai-responses/text.sse', import.meta.url));
    expect(cachedOf(createOpenAIResponsesSseTap, splitEvents(stream))).toEqual({ input: 37, cached: 0, ratio: 0, problems: [] });
  });

  it('reads the cached tokens of non-streamed Responses and Anthropic answers as their streams do', () => {
    const responses = { object: 'response', usage: { input_tokens: 30, input_tokens_details: { cached_tokens: 20 }, output_tokens: 5, total_tokens: 35 } };
    expect(cachedOf(createOpenAIJsonTap, [Buffer.from(JSON.stringify(responses))])).toMatchObject({ input: 30, cached: 20 });
    const anthropic = { type: 'message', role: 'assistant', content: [], usage: { input_tokens: 4, cache_creation_input_tokens: 100, cache_read_input_tokens: 900, output_tokens: 7 } };
    expect(cachedOf(createOpenAIJsonTap, [Buffer.from(JSON.stringify(anthropic))])).toMatchObject({ input: 1004, cached: 900 });
  });
});

describe('prefix-cache hits from a hostile or broken upstream', () => {
  it('drops and counts more cached tokens than the prompt has, so no share above 1 is recorded', () => {
    expect(cachedOf(createOpenAISseTap, vllmWithCachedTokens(',"prompt_tokens_details":{"cached_tokens":49}'))).toEqual({ input: 48, cached: Number.NaN, ratio: Number.NaN, problems: ['implausible_value'] });
  });

  it('drops and counts a negative, fractional or overflowing cached count, and skips one of another type', () => {
    for (const bad of ['-1', '1.5', '1e400']) {
      expect(cachedOf(createOpenAISseTap, vllmWithCachedTokens(`,"prompt_tokens_details":{"cached_tokens":${bad}}`)), bad).toMatchObject({ cached: Number.NaN, problems: ['implausible_value'] });
    }
    expect(cachedOf(createOpenAISseTap, vllmWithCachedTokens(',"prompt_tokens_details":{"cached_tokens":"32"}'))).toMatchObject({ cached: Number.NaN, problems: [] });
  });

  it('drops an Anthropic cache read larger than the prompt it is part of only when it overflows the bound', () => {
    const usage = { input_tokens: 4, cache_creation_input_tokens: 0, cache_read_input_tokens: 20_000_000, output_tokens: 7 };
    const run = cachedOf(createOpenAIJsonTap, [Buffer.from(JSON.stringify({ type: 'message', usage }))]);
    expect([run.input, run.cached, run.problems]).toEqual([4, Number.NaN, ['implausible_value', 'implausible_value']]);
  });
});

const telemetries: Telemetry[] = [];
afterEach(async () => {
  await Promise.all(telemetries.splice(0).map((t) => t.shutdown()));
});

describe('prefix-cache hits through the request monitor and /metrics', () => {
  it('records each reporting request’s cached share and counts those with any hit, per workload', async () => {
    const clock = new ManualClock(0);
    const telemetry = new Telemetry();
    telemetries.push(telemetry);
    const settings = loadSettings({ flags: { config: 't.yaml' }, env: {}, readFile: () => 'workloads: [{ name: rag }]\n' });
    const logger = createLogger('silent', new Writable({ write: (_c, _e, cb) => cb() }));
    const deps = { clock, recorder: new Recorder(telemetry.meter, settings.buckets), models: new ModelLabels(8), logger, requestLines: new RequestLineWriter(logger), workloads: new WorkloadMatcher(settings.workloads) };
    const answer = (usage: object) => {
      const monitor = new RequestMonitor(deps, 'POST', '/v1/chat/completions', {});
      monitor.requestBody('m');
      monitor.response(200, 'application/json');
      monitor.body(Buffer.from(JSON.stringify({ object: 'chat.completion', choices: [], usage })));
      monitor.bodyEnd();
      monitor.delivered();
    };
    answer({ prompt_tokens: 100, completion_tokens: 1, prompt_tokens_details: { cached_tokens: 75 } });
    answer({ prompt_tokens: 100, completion_tokens: 1, prompt_tokens_details: { cached_tokens: 0 } });
    answer({ prompt_tokens: 100, completion_tokens: 1 }); // no report: no sample
    const m = parsePrometheusText(await telemetry.scrape());
    const ratio = histogram(m, 'tokentap_request_cached_input_ratio', { workload: 'rag' });
    expect([ratio.count, ratio.sum, ratio.buckets.get(0), ratio.buckets.get(0.7), ratio.buckets.get(0.8)]).toEqual([2, 0.75, 1, 1, 2]);
    expect(sumValues(m, 'tokentap_requests_with_cached_input_total', { workload: 'rag' })).toBe(1);
  });
});
