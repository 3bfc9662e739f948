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
