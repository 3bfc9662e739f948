import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** One export request as it arrived: path, content type, raw body, and the body parsed when it is JSON. */
export interface OtlpExport {
  readonly path: string;
  readonly contentType: string;
  readonly body: Buffer;
  readonly json: unknown;
}

/** An OTLP value as the JSON encoding writes it (proto3 JSON: 64-bit integers may be strings). */
interface AnyValue {
  stringValue?: string;
  intValue?: string | number;
  doubleValue?: number;
  boolValue?: boolean;
  arrayValue?: { values?: AnyValue[] };
}
interface KeyValue {
  key: string;
  value: AnyValue;
}

export interface ReceivedSpan {
  readonly traceId: string;
  readonly spanId: string;
  readonly parentSpanId: string;
  readonly name: string;
  readonly kind: number;
  readonly attributes: Record<string, unknown>;
  readonly events: ReadonlyArray<{ name: string; timeUnixNano: string; attributes: Record<string, unknown> }>;
  readonly startTimeUnixNano: string;
  readonly endTimeUnixNano: string;
  readonly status: { code?: number; message?: string };
  readonly resource: Record<string, unknown>;
}

export interface ReceivedDataPoint {
  readonly metric: string;
  readonly attributes: Record<string, unknown>;
  /** Sum/gauge value, or the histogram's count. */
  readonly value: number;
  /** Which OTLP data kind carried it. */
  readonly kind: 'sum' | 'gauge' | 'histogram' | 'exponentialHistogram';
  /** AGGREGATION_TEMPORALITY_DELTA (1) or _CUMULATIVE (2), as sent; undefined for a gauge. */
  readonly temporality: number | undefined;
  /** Exponential histograms: the scale and the positive buckets (offset, counts), as sent. */
  readonly exponential?: { readonly scale: number; readonly offset: number; readonly bucketCounts: number[]; readonly zeroCount: number };
  readonly resource: Record<string, unknown>;
}

/**
 * A minimal OTLP/HTTP receiver (the collector's :4318 side) on loopback: accepts POST /v1/metrics
 * and /v1/traces in any encoding, answers 200 with an empty JSON response, and keeps every export.
 */
export async function startOtlpReceiver() {
  const exports: OtlpExport[] = [];
  /** What the receiver answers; a test sets 400 to stand for a collector that refuses every batch. */
  let status = 200;
  const server = http.createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', () => {
      const body = Buffer.concat(parts);
      const contentType = req.headers['content-type'] ?? '';
      exports.push({ path: req.url ?? '', contentType, body, json: contentType.includes('json') ? JSON.parse(body.toString('utf8')) : undefined });
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    exports,
    /** Answer every later export with `code` (200 by default). */
    respondWith(code: number) {
      status = code;
    },
    /** Every span received in JSON exports, flattened. */
    spans(): ReceivedSpan[] {
      return exports
        .filter((e) => e.path === '/v1/traces' && e.json !== undefined)
        .flatMap((e) =>
          ((e.json as { resourceSpans?: unknown[] }).resourceSpans ?? []).flatMap((rs) => {
            const r = rs as { resource?: { attributes?: KeyValue[] }; scopeSpans?: Array<{ spans?: Array<Record<string, unknown>> }> };
            const resource = attributeMap(r.resource?.attributes);
            return (r.scopeSpans ?? []).flatMap((ss) =>
              (ss.spans ?? []).map((s) => ({
                traceId: s.traceId as string,
                spanId: s.spanId as string,
                parentSpanId: (s.parentSpanId as string | undefined) ?? '',
                name: s.name as string,
                kind: s.kind as number,
                attributes: attributeMap(s.attributes as KeyValue[] | undefined),
                events: ((s.events as Array<{ name: string; timeUnixNano: string; attributes?: KeyValue[] }> | undefined) ?? []).map((ev) => ({
                  name: ev.name,
                  timeUnixNano: String(ev.timeUnixNano),
                  attributes: attributeMap(ev.attributes),
                })),
                startTimeUnixNano: String(s.startTimeUnixNano),
                endTimeUnixNano: String(s.endTimeUnixNano),
                status: (s.status as { code?: number; message?: string } | undefined) ?? {},
                resource,
              })),
            );
          }),
        );
    },
    /** Data points of every JSON metric export, or of the latest only (cumulative: it has the totals). */
    dataPoints(onlyLatest = false): ReceivedDataPoint[] {
      const metricExports = exports.filter((e) => e.path === '/v1/metrics' && e.json !== undefined);
      return (onlyLatest ? metricExports.slice(-1) : metricExports)
        .flatMap((e) =>
          ((e.json as { resourceMetrics?: unknown[] }).resourceMetrics ?? []).flatMap((rm) => {
            const r = rm as { resource?: { attributes?: KeyValue[] }; scopeMetrics?: Array<{ metrics?: Array<Record<string, unknown>> }> };
            const resource = attributeMap(r.resource?.attributes);
            return (r.scopeMetrics ?? []).flatMap((sm) =>
              (sm.metrics ?? []).flatMap((m) => {
                const kind = (['sum', 'gauge', 'histogram', 'exponentialHistogram'] as const).find((k) => m[k] !== undefined);
                const data = (kind === undefined ? undefined : m[kind]) as { dataPoints?: Array<Record<string, unknown>>; aggregationTemporality?: number } | undefined;
                return (data?.dataPoints ?? []).map((p) => {
                  const positive = p.positive as { offset?: number; bucketCounts?: Array<string | number> } | undefined;
                  return {
                    metric: m.name as string,
                    attributes: attributeMap(p.attributes as KeyValue[] | undefined),
                    value: Number(p.asInt ?? p.asDouble ?? p.count ?? Number.NaN),
                    kind: kind ?? 'sum',
                    temporality: data?.aggregationTemporality,
                    ...(kind === 'exponentialHistogram'
                      ? { exponential: { scale: Number(p.scale ?? 0), offset: Number(positive?.offset ?? 0), bucketCounts: (positive?.bucketCounts ?? []).map(Number), zeroCount: Number(p.zeroCount ?? 0) } }
                      : {}),
                    resource,
                  };
                });
              }),
            );
          }),
        );
    },
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

function attributeMap(list: KeyValue[] | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const { key, value } of list ?? []) out[key] = plain(value);
  return out;
}

function plain(value: AnyValue): unknown {
  if (value.stringValue !== undefined) return value.stringValue;
  if (value.intValue !== undefined) return Number(value.intValue);
  if (value.doubleValue !== undefined) return value.doubleValue;
  if (value.boolValue !== undefined) return value.boolValue;
  if (value.arrayValue !== undefined) return (value.arrayValue.values ?? []).map(plain);
  return undefined;
}
