import { Writable } from 'node:stream';
import { ExportResultCode } from '@opentelemetry/core';
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../../src/log/logger.js';
import { loggableEndpoint, OtlpExportHealth, watchExports } from '../../../src/tracing/otlp-export-health.js';

function capturedLogger() {
  const lines: Array<Record<string, unknown>> = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      for (const line of chunk.toString('utf8').split('\n')) if (line) lines.push(JSON.parse(line));
      callback();
    },
  });
  return { logger: createLogger('info', sink), lines };
}

const flush = () => new Promise((resolve) => setImmediate(resolve));
const FAILED = { code: ExportResultCode.FAILED, error: Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:4318'), { code: 'ECONNREFUSED' }) };
const OK = { code: ExportResultCode.SUCCESS };

describe('OTLP export health', () => {
  it('logs once when exports start failing (endpoint and cause) and once when they recover, and counts every failure', async () => {
    const { logger, lines } = capturedLogger();
    const health = new OtlpExportHealth('metrics', 'http://collector:4318/v1/metrics', logger);
    for (const result of [OK, FAILED, FAILED, FAILED, OK, OK, FAILED]) health.observe(result);
    await flush();
    expect(lines.map((l) => [l['level'], l['msg']])).toEqual([
      [40, 'OTLP export failing'],
      [30, 'OTLP export recovered'],
      [40, 'OTLP export failing'],
    ]);
    expect(lines[0]).toMatchObject({ signal: 'metrics', endpoint: 'http://collector:4318/v1/metrics', cause: 'connect ECONNREFUSED 127.0.0.1:4318 (ECONNREFUSED)' });
    expect(lines[1]).toMatchObject({ signal: 'metrics', failedExports: 3 });
    expect(health.failures).toBe(4);
  });

  it('bounds the logged cause, which may hold a collector\'s whole response body', async () => {
    const { logger, lines } = capturedLogger();
    new OtlpExportHealth('traces', 'http://c/v1/traces', logger).observe({ code: ExportResultCode.FAILED, error: new Error('x'.repeat(5000)) });
    await flush();
    expect(String(lines[0]?.['cause']).length).toBeLessThanOrEqual(201);
  });

  it('logs the endpoint without userinfo or query', () => {
    expect(loggableEndpoint('https://user:secret@collector.example.com:4318/v1/traces?token=abc')).toBe('https://collector.example.com:4318/v1/traces');
  });

  it('passes every result on to the SDK unchanged after noting it', () => {
    const { logger } = capturedLogger();
    const health = new OtlpExportHealth('traces', 'http://c/v1/traces', logger);
    const seen: unknown[] = [];
    const exporter = watchExports({ export: (_items: string[], done: (r: typeof FAILED | typeof OK) => void) => done(FAILED) }, health);
    exporter.export(['span'], (result) => seen.push(result));
    expect(seen).toEqual([FAILED]);
    expect(health.failures).toBe(1);
  });
});
