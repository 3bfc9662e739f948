import { afterEach, describe, expect, it } from 'vitest';
import { startOtlpReceiver } from '../helpers/otlp-receiver.js';
import { exchange, startReplayUpstream } from '../helpers/replay-upstream.js';
import { startServeProcess } from '../helpers/serve-process.js';
import { eventually } from '../helpers/sidecar.js';
import { chatChunk, sse } from '../helpers/tap-harness.js';

/**
 * Span names from client-chosen model names: trace backends index a span's name (Jaeger's
 * operations, Tempo's span-metrics `span_name` label), so it must stay as bounded as the
 * gen_ai_request_model label, while the attribute keeps what the client sent.
 */

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const STREAM = sse(chatChunk({ role: 'assistant', content: '' }), chatChunk({ content: 'Hi' }), chatChunk({}, {}, 'stop'), '[DONE]');
const NAMES = 100;
const MAX_MODELS = 32;

describe('span names under made-up model names', () => {
  it(`gives ${NAMES} requests naming ${NAMES} different models at most max_models + 1 span names (each name became a span name), and each span the model as sent`, async () => {
    const upstream = await startReplayUpstream(() => ({ chunks: STREAM }));
    cleanups.push(() => upstream.close());
    const receiver = await startOtlpReceiver();
    cleanups.push(() => receiver.close());
    const serve = await startServeProcess(upstream.url, [], { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', OTEL_BSP_SCHEDULE_DELAY: '100' });
    cleanups.push(serve.kill);
    for (let batch = 0; batch < NAMES; batch += 10) {
      await Promise.all(
        Array.from({ length: 10 }, (_, i) =>
          exchange(`${serve.proxy}/v1/chat/completions`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ model: `made-up-${batch + i}`, stream: true, messages: [{ role: 'user', content: 'hi' }] }),
          }),
        ),
      );
    }
    const spans = await eventually('every span', () => receiver.spans(), (s) => s.length >= NAMES, 20_000);
    const names = new Set(spans.map((span) => span.name));
    expect(names.size).toBeLessThanOrEqual(MAX_MODELS + 1);
    expect(names).toContain('chat other');
    for (const name of names) expect(name === 'chat other' || /^chat made-up-\d+$/.test(name), name).toBe(true);
    const sent = new Set(spans.map((span) => span.attributes['gen_ai.request.model']));
    expect(sent.size).toBe(NAMES);
  }, 60_000);
});
