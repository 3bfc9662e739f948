import { afterEach, describe, expect, it } from 'vitest';
import { scriptedReport, stopScripted, WITH_COST, WORKLOADS } from '../../helpers/cost-script.js';

/** The script and its known answer: test/helpers/cost-script.ts (docs/capacity-and-cost.md's table). */
afterEach(stopScripted);

describe('cost on /status.json', () => {
  it('gives the scripted requests exact cost per request, per good request and per million input and output tokens, on both bases', async () => {
    const { cost } = await scriptedReport(WITH_COST);
    expect(cost).toMatchObject({ configured: true, currency: 'EUR', price_per_hour: 3.6, accelerators: 2, window_s: 1 });
    expect(cost.busy_ratio).toBeCloseTo(0.68, 12);
    const chat = cost.workloads.find((w) => w.name === 'chat')!;
    const batch = cost.workloads.find((w) => w.name === 'batch')!;
    // chat: prefill (150 + 100) ms x 2 accelerators = 0.5 s, decode (70 + 120) ms x 2 = 0.38 s.
    expect(chat).toMatchObject({ requests: 2, input_tokens: 200, output_tokens: 8 });
    expect(chat.accelerator_seconds).toBeCloseTo(0.88, 12);
    expect(chat.usage.cost).toBeCloseTo(0.00088, 15);
    expect(chat.usage.per_request).toBeCloseTo(0.00044, 15);
    expect(chat.usage.per_good_request).toBeCloseTo(0.00044, 15);
    // Prefill's 0.0005 EUR over 200 input tokens; decode's 0.00038 EUR over 8 output tokens.
    expect(chat.usage.per_million_input_tokens).toBeCloseTo(2.5, 9);
    expect(chat.usage.per_million_output_tokens).toBeCloseTo(47.5, 9);
    // Allocation: the pod's 1 s x 2 accelerators x 0.001 = 0.002 EUR, chat's share 0.88 / 1.36.
    expect(chat.allocation.cost).toBeCloseTo((0.002 * 0.88) / 1.36, 15);
    expect(chat.allocation.per_request).toBeCloseTo((0.002 * 0.88) / 1.36 / 2, 15);
    expect(chat.allocation.per_million_input_tokens).toBeCloseTo(((((0.002 * 0.88) / 1.36) * 0.5) / 0.88) * 1e6 / 200, 9);
    // batch: C alone, 0.48 accelerator-seconds; no SLO, so no request "met its SLOs".
    expect(batch.usage.per_request).toBeCloseTo(0.00048, 15);
    expect(batch.usage.per_million_output_tokens).toBeCloseTo((0.0003 * 1e6) / 4, 9);
    expect(batch.usage.per_good_request).toBeNull();
    expect(batch.absent['usage.per_good_request']).toBe('no SLO: set slo: on the workload');
    // The pod: every workload; its allocation is its whole wall time.
    expect(cost.pod.usage.per_request).toBeCloseTo(0.00136 / 3, 15);
    expect(cost.pod.allocation.cost).toBeCloseTo(0.002, 15);
    expect(cost.pod.allocation.per_request).toBeCloseTo(0.002 / 3, 15);
    expect(cost.pod.allocation.per_million_input_tokens).toBeCloseTo((((0.002 * 0.68) / 1.36) * 1e6) / 300, 9);
  });

  it('prices input tokens with the prefill of the requests that reported them only (review reproduction: two equal requests, one streamed without include_usage, read 209 EUR per 1M input tokens against 105 for either alone)', async () => {
    // B ends without a usage report: chat's input tokens are A's 100 alone, so only A's prefill
    // (150 ms x 2 accelerators = 0.3 s, 0.0003 EUR) pays for them; B's counted 2 output tokens
    // still take B's decode.
    const { cost } = await scriptedReport(WITH_COST, ['B']);
    const chat = cost.workloads.find((w) => w.name === 'chat')!;
    expect(chat).toMatchObject({ requests: 2, input_tokens: 100, output_tokens: 6 });
    expect(chat.usage.per_million_input_tokens).toBeCloseTo((0.0003 * 1e6) / 100, 9);
    expect(chat.usage.per_million_output_tokens).toBeCloseTo((0.00038 * 1e6) / 6, 9);
    expect(chat.allocation.per_million_input_tokens).toBeCloseTo(((((0.002 * 0.88) / 1.36) * 0.3) / 0.88) * 1e6 / 100, 9);
    // The pod: A's and C's prefill (0.3 + 0.18 s) over their 200 input tokens.
    expect(cost.pod.usage.per_million_input_tokens).toBeCloseTo((0.00048 * 1e6) / 200, 9);
  });

  it('says why there is no cost per input token when no request of the window reported its input tokens', async () => {
    const { cost } = await scriptedReport(WITH_COST, ['A', 'B']);
    const chat = cost.workloads.find((w) => w.name === 'chat')!;
    expect(chat.input_tokens).toBe(0);
    expect(chat.usage.per_million_input_tokens).toBeNull();
    expect(chat.absent['usage.per_million_input_tokens']).toBe('no request in the window reported its input tokens: ask the server for usage, e.g. inject_usage: true');
  });

  it('gives the share of requests with cached input and the mean cached ratio per workload and for the pod', async () => {
    const { cost } = await scriptedReport(WITH_COST);
    const chat = cost.workloads.find((w) => w.name === 'chat')!;
    expect([chat.requests_with_cached_input_ratio, chat.mean_cached_input_ratio]).toEqual([0.5, 0.25]);
    expect(cost.pod.requests_with_cached_input_ratio).toBeCloseTo(2 / 3, 12);
    expect(cost.pod.mean_cached_input_ratio).toBeCloseTo(0.5, 12);
  });

  it('says "no cost: configured" for every money figure without cost:, and still gives the busy share and cached input', async () => {
    const { cost } = await scriptedReport(WORKLOADS);
    expect(cost).toMatchObject({ configured: false, price_per_hour: null, accelerators: null });
    expect(cost.busy_ratio).toBeCloseTo(0.68, 12);
    for (const figures of [cost.pod, ...cost.workloads]) {
      for (const basis of ['usage', 'allocation'] as const) {
        for (const field of ['cost', 'per_request', 'per_million_input_tokens', 'per_million_output_tokens'] as const) {
          expect(figures[basis][field]).toBeNull();
          expect(figures.absent[`${basis}.${field}`]).toBe('no cost: configured');
        }
      }
    }
    expect(cost.pod.mean_cached_input_ratio).toBeCloseTo(0.5, 12);
  });
});
