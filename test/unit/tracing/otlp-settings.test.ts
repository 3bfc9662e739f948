import { describe, expect, it } from 'vitest';
import { problemsOf } from '../../helpers/problems.js';
import { loadOtlpSettings } from '../../../src/tracing/otlp-settings.js';

const problems = (env: Record<string, string>): readonly string[] => problemsOf(() => loadOtlpSettings(env));

describe('OTLP settings from the OTEL_* environment', () => {
  it('is off without an endpoint, and off with OTEL_SDK_DISABLED=true even with one', () => {
    expect(loadOtlpSettings({})).toBeUndefined();
    expect(loadOtlpSettings({ OTEL_SERVICE_NAME: 'x', OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' })).toBeUndefined();
    expect(loadOtlpSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_SDK_DISABLED: 'true' })).toBeUndefined();
  });

  it('appends each signal path to the generic endpoint, defaulting to http/protobuf and the specification intervals', () => {
    expect(loadOtlpSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/' })).toEqual({
      metrics: { url: 'http://collector:4318/v1/metrics', protocol: 'http/protobuf', intervalMs: 60_000, timeoutMs: 30_000 },
      traces: { url: 'http://collector:4318/v1/traces', protocol: 'http/protobuf' },
      resourceAttributes: { 'service.name': 'tokentap' },
    });
  });

  it('uses a signal-specific endpoint as is and exports only that signal', () => {
    const settings = loadOtlpSettings({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://c.example/custom/traces', OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json' });
    expect(settings?.metrics).toBeUndefined();
    expect(settings?.traces).toEqual({ url: 'https://c.example/custom/traces', protocol: 'http/json' });
  });

  it('turns a signal off with OTEL_<SIGNAL>_EXPORTER=none and caps the export timeout at the interval', () => {
    const settings = loadOtlpSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_TRACES_EXPORTER: 'none', OTEL_METRIC_EXPORT_INTERVAL: '5000' });
    expect(settings?.traces).toBeUndefined();
    expect(settings?.metrics).toMatchObject({ intervalMs: 5000, timeoutMs: 5000 });
  });

  it('takes service.name from OTEL_SERVICE_NAME over OTEL_RESOURCE_ATTRIBUTES, decoding percent-encoded values', () => {
    const settings = loadOtlpSettings({
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318',
      OTEL_RESOURCE_ATTRIBUTES: 'service.name=from-attributes, k8s.pod.name=pod-a,note=a%2Cb%20c',
      OTEL_SERVICE_NAME: 'from-variable',
    });
    expect(settings?.resourceAttributes).toEqual({ 'service.name': 'from-variable', 'k8s.pod.name': 'pod-a', note: 'a,b c' });
  });

  it('refuses an unknown OTEL_TRACES_SAMPLER and a missing or out-of-range ratio, which the SDK would silently take as "every trace" (review reproduction: OTEL_TRACES_SAMPLER_ARG=10% exported every span)', () => {
    const traces = { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://c:4318/v1/traces' };
    expect(problems({ ...traces, OTEL_TRACES_SAMPLER: 'alwayson' })).toEqual([
      'OTEL_TRACES_SAMPLER: "alwayson" is not a sampler the OpenTelemetry SDK knows; expected one of parentbased_always_on, always_on, always_off, traceidratio, parentbased_always_off, parentbased_traceidratio',
    ]);
    expect(problems({ ...traces, OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '10%' })).toEqual([
      'OTEL_TRACES_SAMPLER_ARG: traceidratio needs the share of traces to export, a number from 0 to 1 such as 0.1; got "10%", which the SDK would take as 1 (every trace)',
    ]);
    expect(problems({ ...traces, OTEL_TRACES_SAMPLER: 'parentbased_traceidratio' })).toEqual([
      'OTEL_TRACES_SAMPLER_ARG: parentbased_traceidratio needs the share of traces to export, a number from 0 to 1 such as 0.1; got nothing, which the SDK would take as 1 (every trace)',
    ]);
    expect(problems({ ...traces, OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '1.5' })).toHaveLength(1);
    for (const ok of [{ OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.25' }, { OTEL_TRACES_SAMPLER: 'always_on' }, { OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0' }]) {
      expect(loadOtlpSettings({ ...traces, ...ok })?.traces).toBeDefined();
    }
    // Metrics alone: the span processor never reads the sampler.
    expect(loadOtlpSettings({ OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: 'http://c:4318/v1/metrics', OTEL_TRACES_SAMPLER: 'alwayson' })?.metrics).toBeDefined();
  });

  it('refuses gRPC and other bad values, naming every variable at once', () => {
    expect(
      problems({
        OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4317',
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://c:4317',
        OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'grpc',
        OTEL_METRIC_EXPORT_INTERVAL: '10s',
        OTEL_RESOURCE_ATTRIBUTES: 'ok=1,broken',
      }),
    ).toEqual([
      'OTEL_EXPORTER_OTLP_ENDPOINT: expected an http:// or https:// URL such as http://otel-collector:4318, got "collector:4317"',
      'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: "grpc" is not supported; use http/protobuf (the default) or http/json against the collector\'s OTLP/HTTP port (4318)',
      'OTEL_METRIC_EXPORT_INTERVAL: expected a positive whole number of milliseconds, got "10s"',
      'OTEL_RESOURCE_ATTRIBUTES: expected key=value pairs separated by commas (values percent-encoded), got "broken"',
    ]);
    expect(problems({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_METRICS_EXPORTER: 'prometheus' })).toEqual([
      'OTEL_METRICS_EXPORTER: "prometheus" is not supported; expected otlp or none (metrics are also always on the admin listener\'s /metrics)',
    ]);
  });
});
