import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { exchange, startReplayUpstream } from '../helpers/replay-upstream.js';
import { startServeProcess } from '../helpers/serve-process.js';
import { eventually } from '../helpers/sidecar.js';
import { chatChunk, sse } from '../helpers/tap-harness.js';

/**
 * The built CLI exporting spans to a collector that is broken: it takes each export request whole
 * and never answers. Spans pile up; the streams must not notice, the span queue must stay bounded
 * and say what it dropped, and shutdown must not wait for the collector.
 */

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const STREAM = sse(chatChunk({ role: 'assistant', content: '' }), chatChunk({ content: 'Hel' }), chatChunk({ content: 'lo' }), chatChunk({}, {}, 'stop'), '[DONE]');

/** An OTLP/HTTP receiver that reads every export (http/json) and never answers it. */
async function startHangingCollector() {
  const spanCounts: number[] = [];
  const server = http.createServer((req) => {
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(parts).toString('utf8')) as { resourceSpans?: Array<{ scopeSpans?: Array<{ spans?: unknown[] }> }> };
      spanCounts.push((body.resourceSpans ?? []).flatMap((rs) => rs.scopeSpans ?? []).flatMap((ss) => ss.spans ?? []).length);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    /** Spans in each export request received (none answered). */
    spanCounts,
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

describe('a broken OTLP collector', () => {
  it('that never answers leaves every stream byte for byte, bounds the span queue, counts each span it drops as otlp_span_queue, and does not hold up shutdown (review reproduction: dropped spans were counted nowhere)', async () => {
    const upstream = await startReplayUpstream(() => ({ chunks: STREAM, gapMs: 2 }));
    cleanups.push(() => upstream.close());
    const collector = await startHangingCollector();
    cleanups.push(() => collector.close());
    const queueSize = 4;
    const serve = await startServeProcess(upstream.url, [], {
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${collector.url}/v1/traces`,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_BSP_MAX_QUEUE_SIZE: String(queueSize),
      OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '2',
      OTEL_BSP_SCHEDULE_DELAY: '20',
      // Neither the exporter nor the span processor gives up on the export during the test.
      OTEL_EXPORTER_OTLP_TIMEOUT: '120000',
      OTEL_BSP_EXPORT_TIMEOUT: '120000',
    });
    cleanups.push(serve.kill);

    const requests = 16;
    for (let i = 0; i < requests; i++) {
      const response = await exchange(`${serve.proxy}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'm', stream: true, messages: [] }),
      });
      expect(response.ended).toBe('clean');
      expect(response.body.equals(Buffer.concat(STREAM))).toBe(true);
      // The first export must have left before the queue fills, or it would not be in flight.
      if (i === 0) await eventually('the first export request', () => collector.spanCounts.length, (n) => n >= 1, 10_000);
    }

    // One export in flight, unanswered; the queue full behind it; every other span dropped.
    expect(collector.spanCounts).toHaveLength(1);
    const inFlight = collector.spanCounts[0]!;
    const dropped = requests - inFlight - queueSize;
    expect(dropped).toBeGreaterThan(0);
    const metrics = await (await fetch(`${serve.admin}/metrics`)).text();
    expect(metrics).toContain(`tokentap_limit_exceeded_total{limit="otlp_span_queue"} ${dropped}\n`);

    serve.child.kill('SIGTERM');
    const exit = await serve.exit;
    expect(exit.code).toBe(0);
    expect(serve.logs().filter((l) => l.msg === 'final OTLP export incomplete')).toEqual([expect.objectContaining({ problem: 'timed out' })]);
  }, 60_000);
});
