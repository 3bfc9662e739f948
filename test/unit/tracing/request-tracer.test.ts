import { Writable } from 'node:stream';
import { SpanKind, SpanStatusCode } from '@opentelemetry/api';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ManualClock } from '../../../src/clock/clock.js';
import { loadSettings } from '../../../src/config/load.js';
import { createLogger } from '../../../src/log/logger.js';
import { RequestLineWriter } from '../../../src/log/request-line.js';
import { ModelLabels } from '../../../src/metrics/model-labels.js';
import { Recorder, type RequestSummary } from '../../../src/metrics/recorder.js';
import { Telemetry } from '../../../src/metrics/telemetry.js';
import { RequestMonitor } from '../../../src/proxy/request-monitor.js';
import { WorkloadMatcher } from '../../../src/slo/workload-matcher.js';
import { OtelRequestTracer } from '../../../src/tracing/otel-request-tracer.js';
import { OTLP_OFF, startOtlp } from '../../../src/tracing/otlp-pipeline.js';
import { NULL_SPAN, NULL_TRACER, type RequestTracer } from '../../../src/tracing/request-span.js';
import { chatChunk, sse } from '../../helpers/tap-harness.js';

const UPSTREAM = new URL('http://127.0.0.1:8000');
const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  await Promise.all(closers.splice(0).map((close) => close()));
});

function summary(overrides: Partial<RequestSummary> = {}): RequestSummary {
  return {
    outcome: 'completed',
    statusClass: '2xx',
    ttfbMs: 10,
    ttftMs: 150,
    tpotMs: 20,
    e2eMs: 400,
    inputTokens: 12,
    outputTokens: 9,
    tokenSource: 'usage',
    tokenCountMismatch: false,
    ...overrides,
  } as RequestSummary;
}

function otelTracer(clock: ManualClock) {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  closers.push(() => provider.shutdown());
  return { exporter, tracer: new OtelRequestTracer(provider.getTracer('test'), clock, UPSTREAM) };
}

/** A monitor's dependencies on a manual clock, with the given tracer (or none). */
function monitorDeps(tracer: RequestTracer | undefined) {
  const telemetry = new Telemetry();
  closers.push(() => telemetry.shutdown());
  const settings = loadSettings({ flags: {}, env: {} });
  const logger = createLogger('silent', new Writable({ write: (_c, _e, cb) => cb() }));
  const clock = new ManualClock(1000);
  const recorder = new Recorder(telemetry.meter, settings.buckets);
  return { clock, deps: { clock, recorder, models: new ModelLabels(8), logger, requestLines: new RequestLineWriter(logger), workloads: new WorkloadMatcher(settings.workloads), ...(tracer ? { tracer } : {}) } };
}

describe('tracing off', () => {
  it('is the null tracer when no OTLP settings exist, and its spans are one shared no-op object', async () => {
    const otlp = await startOtlp(undefined, new ManualClock(), UPSTREAM, createLogger('silent'));
    expect(otlp).toBe(OTLP_OFF);
    expect(otlp.tracer).toBe(NULL_TRACER);
    expect(otlp.metricPush).toBeUndefined();
    const headers = ['traceparent', '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01', 'x-a', '1'];
    const before = [...headers];
    expect(NULL_TRACER.start('POST', '/v1/chat/completions', 0, { traceparent: headers[1] }, headers)).toBe(NULL_SPAN);
    expect(headers).toEqual(before);
  });

  it('calls the tracer once at request start and once at its end, never per chunk', () => {
    const end = vi.fn();
    const start = vi.fn(() => ({ end }));
    const { clock, deps } = monitorDeps({ start });
    const monitor = new RequestMonitor(deps, 'POST', '/v1/chat/completions', {});
    const upstreamHeaders: string[] = [];
    monitor.trace(upstreamHeaders);
    monitor.requestBody('m');
    monitor.response(200, 'text/event-stream');
    const chunks = sse(...Array.from({ length: 50 }, (_, i) => chatChunk({ content: `t${i}` })), chatChunk({}, {}, 'stop'), '[DONE]');
    for (const chunk of chunks) {
      clock.advance(5);
      monitor.body(chunk);
    }
    monitor.bodyEnd();
    monitor.delivered();
    expect(start).toHaveBeenCalledTimes(1);
    expect(start).toHaveBeenCalledWith('POST', '/v1/chat/completions', 1000, {}, upstreamHeaders);
    expect(end).toHaveBeenCalledTimes(1);
    const [ended, status, workload, requestedModel] = end.mock.calls[0] as unknown as [RequestSummary, number, string, string];
    expect([ended.outcome, ended.outputTokens, status, workload, requestedModel]).toEqual(['completed', 50, 200, 'default', 'm']);
  });

  it('leaves the upstream headers alone when the monitor has no tracer', () => {
    const { deps } = monitorDeps(undefined);
    const monitor = new RequestMonitor(deps, 'POST', '/v1/chat/completions', { traceparent: 'x' });
    const upstreamHeaders = ['traceparent', 'x'];
    monitor.trace(upstreamHeaders);
    expect(upstreamHeaders).toEqual(['traceparent', 'x']);
  });
});

describe('OpenTelemetry request span', () => {
  it('times the span, first-token and end events on the monitor clock and records GenAI attributes', () => {
    const clock = new ManualClock(5000);
    const { exporter, tracer } = otelTracer(clock);
    const anchorMs = Date.now() - 5000;
    const headers: string[] = ['content-type', 'application/json'];
    const span = tracer.start('POST', '/v1/chat/completions', 6000, {}, headers);
    span.end(summary(), 200, 'chat', 'llama', 'llama', undefined);

    const [finished] = exporter.getFinishedSpans();
    expect(finished!.kind).toBe(SpanKind.CLIENT);
    expect(finished!.name).toBe('chat llama');
    expect(finished!.attributes).toEqual({
      'server.address': '127.0.0.1',
      'server.port': 8000,
      'http.request.method': 'POST',
      'url.path': '/v1/chat/completions',
      'gen_ai.operation.name': 'chat',
      'gen_ai.request.model': 'llama',
      'gen_ai.usage.input_tokens': 12,
      'gen_ai.usage.output_tokens': 9,
      'http.response.status_code': 200,
      'tokentap.workload': 'chat',
      'tokentap.outcome': 'completed',
      'tokentap.token_source': 'usage',
      'tokentap.ttft_s': 0.15,
      'tokentap.e2e_s': 0.4,
    });
    expect(finished!.status.code).toBe(SpanStatusCode.UNSET);
    const ms = (t: readonly [number, number]) => t[0] * 1000 + t[1] / 1e6;
    // The anchor is read once at construction; allow the few ms between it and this test's Date.now().
    expect(Math.abs(ms(finished!.startTime) - (anchorMs + 6000))).toBeLessThan(50);
    expect(finished!.events.map((e) => [e.name, Math.round(ms(e.time) - ms(finished!.startTime))])).toEqual([
      ['tokentap.first_token', 150],
      ['tokentap.end', 400],
    ]);
    expect(Math.round(ms(finished!.endTime) - ms(finished!.startTime))).toBe(400);
    // The upstream's traceparent names this span as its parent.
    const { traceId, spanId } = finished!.spanContext();
    expect(headers).toEqual(['content-type', 'application/json', 'traceparent', `00-${traceId}-${spanId}-01`]);
  });

  it('gives the model as the client wrote it in the attribute, but bounded: control characters as "?", cut at 128 characters and marked; the span name has its label', () => {
    const { exporter, tracer } = otelTracer(new ManualClock(5000));
    tracer.start('POST', '/v1/chat/completions', 6000, {}, []).end(summary(), 200, 'chat', `m\u001b]0;x\u0007${'y'.repeat(200_000)}`, 'other', undefined);
    const [finished] = exporter.getFinishedSpans();
    const expected = `m?]0;x?${'y'.repeat(128 - 7)}…`;
    expect(finished!.name).toBe('chat other');
    expect(finished!.attributes['gen_ai.request.model']).toBe(expected);
  });

  it('names a model holding bidirectional controls or a line separator with them as "?" (a right-to-left override showed "a\u202egnp.evil" as "alive.png" in a trace UI)', () => {
    const { exporter, tracer } = otelTracer(new ManualClock(5000));
    tracer.start('POST', '/v1/chat/completions', 6000, {}, []).end(summary(), 200, 'chat', 'a\u202egnp.evil\u2066x\u2028y\u061cz', 'other', undefined);
    const [finished] = exporter.getFinishedSpans();
    expect(finished!.attributes['gen_ai.request.model']).toBe('a?gnp.evil?x?y?z');
  });

  it('continues a valid client traceparent, replaces it upstream, and starts a new trace for a malformed one', () => {
    const { exporter, tracer } = otelTracer(new ManualClock());
    const client = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    const headers = ['Traceparent', client, 'TraceState', 'a=1', 'x', 'y'];
    tracer.start('POST', '/v1/completions', 0, { traceparent: client, tracestate: 'a=1' }, headers).end(summary(), 200, 'd', undefined, 'unknown', undefined);
    const [continued] = exporter.getFinishedSpans();
    expect(continued!.spanContext().traceId).toBe('4bf92f3577b34da6a3ce929d0e0e4736');
    expect(continued!.parentSpanContext?.spanId).toBe('00f067aa0ba902b7');
    expect(continued!.name).toBe('text_completion');
    expect(headers).toEqual(['x', 'y', 'traceparent', `00-4bf92f3577b34da6a3ce929d0e0e4736-${continued!.spanContext().spanId}-01`, 'tracestate', 'a=1']);

    const other: string[] = [];
    tracer.start('GET', '/v1/models', 0, { traceparent: 'garbage' }, other).end(summary({ ttftMs: Number.NaN }), 200, 'd', undefined, 'unknown', undefined);
    const fresh = exporter.getFinishedSpans()[1]!;
    expect(fresh.parentSpanContext).toBeUndefined();
    expect(fresh.name).toBe('GET');
    expect(fresh.attributes['gen_ai.operation.name']).toBeUndefined();
    expect(fresh.events.map((e) => e.name)).toEqual(['tokentap.end']);
  });

  it('marks a request that did not complete as an error with error.type set to its outcome', () => {
    const { exporter, tracer } = otelTracer(new ManualClock());
    tracer.start('POST', '/v1/chat/completions', 0, {}, []).end(summary({ outcome: 'shutdown', inputTokens: Number.NaN }), 200, 'd', 'm', 'm', undefined);
    const [span] = exporter.getFinishedSpans();
    expect(span!.status).toEqual({ code: SpanStatusCode.ERROR, message: 'shutdown' });
    expect(span!.attributes['error.type']).toBe('shutdown');
    expect(span!.attributes['gen_ai.usage.input_tokens']).toBeUndefined();
  });
});
