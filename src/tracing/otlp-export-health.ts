import { ExportResultCode, type ExportResult } from '@opentelemetry/core';
import type { Meter } from '@opentelemetry/api';
import type { Logger } from 'pino';
import { SELF_METRICS } from '../metrics/definitions.js';

/**
 * Whether one OTLP exporter's requests succeed: a failure is counted every time, and logged once
 * when the exporter starts failing (with the endpoint and the cause) and once when it recovers, so
 * a collector that is down for an hour writes two log lines, not one per export interval. Before
 * this, a failing export was silent until shutdown.
 */
export class OtlpExportHealth {
  failures = 0;
  private failing = false;
  private failuresInOutage = 0;

  /** `endpoint` is logged: origin and path only, never userinfo or a query. */
  constructor(
    readonly signal: 'metrics' | 'traces',
    private readonly endpoint: string,
    private readonly logger: Logger,
  ) {}

  observe(result: ExportResult): void {
    if (result.code === ExportResultCode.SUCCESS) {
      if (this.failing) {
        this.logger.info({ signal: this.signal, endpoint: this.endpoint, failedExports: this.failuresInOutage }, 'OTLP export recovered');
        this.failing = false;
      }
      return;
    }
    this.failures++;
    this.failuresInOutage = this.failing ? this.failuresInOutage + 1 : 1;
    if (!this.failing) {
      this.failing = true;
      this.logger.warn({ signal: this.signal, endpoint: this.endpoint, cause: causeOf(result.error) }, 'OTLP export failing');
    }
  }
}

/** The error's message, bounded: an exporter error may carry the collector's whole response body. */
function causeOf(error: Error | undefined): string {
  if (error === undefined) return 'unknown';
  const code = (error as { code?: unknown }).code;
  const text = `${error.message}${code === undefined ? '' : ` (${String(code)})`}`;
  return text.length > 200 ? `${text.slice(0, 200)}…` : text;
}

/** The URL as safe to log: scheme, host and path. */
export function loggableEndpoint(url: string): string {
  const parsed = new URL(url);
  return `${parsed.origin}${parsed.pathname}`;
}

interface Exporter<T> {
  export(items: T, resultCallback: (result: ExportResult) => void): void;
}

/** Makes `exporter` report every export's result to `health`, then to the SDK as before. */
export function watchExports<T, E extends Exporter<T>>(exporter: E, health: OtlpExportHealth): E {
  const original = exporter.export.bind(exporter);
  exporter.export = (items: T, resultCallback: (result: ExportResult) => void) =>
    original(items, (result) => {
      health.observe(result);
      resultCallback(result);
    });
  return exporter;
}

/** `tokentap_otlp_export_failures_total{signal}`, read from the health objects at collection time. */
export function attachExportFailureCounter(meter: Meter, health: readonly OtlpExportHealth[]): void {
  if (health.length === 0) return;
  const definition = SELF_METRICS.otlpExportFailures;
  const counter = meter.createObservableCounter(definition.otelName, { unit: definition.unit, description: definition.description });
  counter.addCallback((result) => {
    for (const h of health) result.observe(h.failures, { signal: h.signal });
  });
}
