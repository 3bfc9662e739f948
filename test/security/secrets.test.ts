import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../src/clock/clock.js';
import { loadSettings } from '../../src/config/load.js';
import { TokentapError } from '../../src/errors.js';
import { createLogger } from '../../src/log/logger.js';
import { RequestLineWriter } from '../../src/log/request-line.js';
import { redactUrl } from '../../src/log/redact-url.js';
import { ModelLabels } from '../../src/metrics/model-labels.js';
import { decodeDelimited } from '../../src/metrics/protobuf-exposition.js';
import { Recorder } from '../../src/metrics/recorder.js';
import { Telemetry } from '../../src/metrics/telemetry.js';
import { createProxyServer, type ProxyServer } from '../../src/proxy/proxy-server.js';
import { WorkloadMatcher } from '../../src/slo/workload-matcher.js';
import { OtelRequestTracer } from '../../src/tracing/otel-request-tracer.js';
import { loadOtlpSettings } from '../../src/tracing/otlp-settings.js';
import { startCaptureUpstream } from '../helpers/capture-upstream.js';
import { RawClient } from '../helpers/raw-http.js';
import { startServeProcess } from '../helpers/serve-process.js';
import { eventually } from '../helpers/sidecar.js';

/**
 * Nothing secret leaves: credentials in a request target (userinfo, query), in operator URLs
 * (upstream, OTLP endpoints, DCGM), and control characters from request bodies never reach a log
 * line, a metric label or a span attribute.
 */

describe('secrets in request targets', () => {
  let upstream: Awaited<ReturnType<typeof startCaptureUpstream>>;
  let server: ProxyServer;
  let proxyUrl: string;
  let telemetry: Telemetry;
  const spans = new InMemorySpanExporter();
  const logs: string[] = [];

  beforeAll(async () => {
    upstream = await startCaptureUpstream();
    telemetry = new Telemetry();
    const settings = loadSettings({ flags: {}, env: {} });
    const sink = new Writable({
      write(chunk: Buffer, _encoding, callback) {
        logs.push(...chunk.toString('utf8').split('\n').filter((l) => l !== ''));
        callback();
      },
    });
    const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] });
    const logger = createLogger('info', sink);
    server = createProxyServer({
      upstream: new URL(upstream.url),
      upstreamIdleTimeoutMs: 10_000,
      monitor: {
        clock: systemClock,
        recorder: new Recorder(telemetry.meter, settings.buckets),
        models: new ModelLabels(8),
        logger,
        requestLines: new RequestLineWriter(logger),
        workloads: new WorkloadMatcher(settings.workloads),
        tracer: new OtelRequestTracer(provider.getTracer('test'), systemClock, new URL(upstream.url)),
      },
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    proxyUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    server?.closeAllConnections();
    await new Promise((resolve) => server?.close(resolve));
    await upstream?.close();
    await telemetry?.shutdown();
  });

  async function send(payload: string): Promise<string> {
    const c = await RawClient.connect(proxyUrl);
    try {
      c.write(payload);
      return await c.read((t) => t.endsWith('}') || t.includes('\r\n\r\ntokentap:'));
    } finally {
      c.close();
    }
  }

  /** Everything observation wrote: log lines, /metrics text, span names and attributes. */
  async function observed(): Promise<string> {
    await eventually('spans', () => spans.getFinishedSpans().length, (n) => n >= 1);
    const spanText = JSON.stringify(spans.getFinishedSpans().map((s) => ({ name: s.name, attributes: s.attributes, events: s.events })));
    return `${logs.join('\n')}\n${await telemetry.scrape()}\n${spanText}`;
  }

  it('forwards an absolute-form target upstream as origin-form with its query, and logs, labels and traces the path only', async () => {
    const body = '{"model":"m1","messages":[]}';
    const text = await send(
      `POST http://model.example:8000/v1/chat/completions?key=QUERYSECRET HTTP/1.1\r\nHost: model.example:8000\r\nAuthorization: Bearer TOKENSECRET\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
    );
    expect(text).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    // The upstream needs the query (as nginx forwards it); only observation must not keep it.
    expect(upstream.connections.at(-1)!.bytes.toString('latin1')).toContain('POST /v1/chat/completions?key=QUERYSECRET HTTP/1.1\r\nHost: model.example:8000\r\n');
    await eventually('the request log line', () => logs.find((l) => l.includes('"msg":"request"')), (l) => l !== undefined);
    const line = JSON.parse(logs.find((l) => l.includes('"msg":"request"'))!) as Record<string, unknown>;
    expect(line.path).toBe('/v1/chat/completions');
    const span = spans.getFinishedSpans().at(-1)!;
    expect(span.attributes['url.path']).toBe('/v1/chat/completions');
    // Routed by the path: the span names the chat operation, as for an origin-form request.
    expect(span.attributes['gen_ai.operation.name']).toBe('chat');
    const all = await observed();
    expect(all).not.toContain('QUERYSECRET');
    expect(all).not.toContain('TOKENSECRET');
    expect(all).not.toContain('model.example');
  });

  it('refuses an absolute-form target with userinfo, and no log, label or span names the credentials', async () => {
    const text = await send('POST http://user:USERINFOSECRET@model.example/v1/chat/completions?key=QUERYSECRET2 HTTP/1.1\r\nHost: model.example\r\nContent-Length: 0\r\n\r\n');
    expect(text).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/);
    expect(text).not.toContain('USERINFOSECRET');
    await eventually('the refusal log line', () => logs.filter((l) => l.includes('"outcome":"client_error"')), (l) => l.length >= 1);
    const refusal = JSON.parse(logs.filter((l) => l.includes('"outcome":"client_error"')).at(-1)!) as Record<string, unknown>;
    expect(refusal).toMatchObject({ method: 'POST', path: '/v1/chat/completions', status: 400 });
    const all = await observed();
    expect(all).not.toContain('USERINFOSECRET');
    expect(all).not.toContain('QUERYSECRET2');
    expect(upstream.connections.map((c) => c.bytes.toString('latin1')).join('')).not.toContain('USERINFOSECRET');
  });

  it('forwards a target with a path parameter or an encoded "?" unchanged, and logs and traces the path with that part hidden (review reproduction: ";jsessionid=" and "%3Fkey=" reached the log line and url.path)', async () => {
    const targets = [
      ['/v1/chat/completions;jsessionid=PARAMSECRET', '/v1/chat/completions;***'],
      ['/v1/chat/completions%3fkey=ENCODEDSECRET', '/v1/chat/completions%3F***'],
    ];
    for (const [target, logged] of targets) {
      const linesBefore = logs.length;
      const spansBefore = spans.getFinishedSpans().length;
      const text = await send(`GET ${target} HTTP/1.1\r\nHost: model.example\r\n\r\n`);
      expect(text).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
      // The upstream gets the target as the client sent it: tokentap relays, it does not rewrite.
      expect(upstream.connections.at(-1)!.bytes.toString('latin1')).toContain(`GET ${target} HTTP/1.1\r\n`);
      const line = await eventually(`the log line of ${target}`, () => logs.slice(linesBefore).find((l) => l.includes('"msg":"request"')), (l) => l !== undefined);
      expect((JSON.parse(line!) as Record<string, unknown>).path).toBe(logged);
      await eventually(`the span of ${target}`, () => spans.getFinishedSpans().length, (n) => n > spansBefore);
      expect(spans.getFinishedSpans().at(-1)!.attributes['url.path']).toBe(logged);
    }
    const all = await observed();
    for (const secret of ['PARAMSECRET', 'ENCODEDSECRET']) expect(all).not.toContain(secret);
  });

  it('refuses a target with a fragment with 400, forwards nothing of it, and logs its path with the fragment hidden', async () => {
    const linesBefore = logs.length;
    const connectionsBefore = upstream.connections.length;
    const text = await send('GET /v1/chat/completions#token=FRAGMENTSECRET HTTP/1.1\r\nHost: model.example\r\n\r\n');
    expect(text).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/);
    expect(text).toContain('fragment');
    expect(upstream.connections.slice(connectionsBefore).map((c) => c.bytes.toString('latin1')).join('')).not.toContain('FRAGMENTSECRET');
    const line = await eventually('the refused request\'s log line', () => logs.slice(linesBefore).find((l) => l.includes('"msg":"request"')), (l) => l !== undefined);
    expect((JSON.parse(line!) as Record<string, unknown>).path).toBe('/v1/chat/completions#***');
    expect(await observed()).not.toContain('FRAGMENTSECRET');
  });

  it('logs and traces a 12 KiB path cut to 1,024 characters and marked, so a long target cannot make every line that long', async () => {
    const longPath = `/v1/${'a'.repeat(12 * 1024)}`;
    const linesBefore = logs.length;
    const spansBefore = spans.getFinishedSpans().length;
    const text = await send(`GET ${longPath} HTTP/1.1\r\nHost: model.example\r\n\r\n`);
    expect(text).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    expect(upstream.connections.at(-1)!.bytes.toString('latin1')).toContain(`GET ${longPath} HTTP/1.1\r\n`);
    const line = await eventually('the long path log line', () => logs.slice(linesBefore).find((l) => l.includes('"msg":"request"')), (l) => l !== undefined);
    expect((JSON.parse(line!) as Record<string, unknown>).path).toBe(`${longPath.slice(0, 1024)}…`);
    expect(line!.length).toBeLessThan(2048);
    await eventually('the long path span', () => spans.getFinishedSpans().length, (n) => n > spansBefore);
    expect(spans.getFinishedSpans().at(-1)!.attributes['url.path']).toBe(`${longPath.slice(0, 1024)}…`);
  });

  it('folds a model name holding ESC, NUL, CR or C1 controls into the label other, and the log line stays one escaped line', async () => {
    const names = ['evil\u001b[31m', 'nul\u0000x', 'cr\rx', 'c1\u009bx'];
    for (const name of names) {
      const body = JSON.stringify({ model: name, messages: [] });
      await send(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
    }
    await eventually('four request lines', () => logs.filter((l) => l.includes('"msg":"request"') && l.includes('"model":"other"')), (l) => l.length >= names.length);
    const metrics = await telemetry.scrape();
    // eslint-disable-next-line no-control-regex
    expect(metrics).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/);
    expect(metrics).toMatch(/gen_ai_request_model="other"/);
    // eslint-disable-next-line no-control-regex
    for (const line of logs) expect(line).not.toMatch(/[\u0000-\u001f]/);
  });

  it('folds a model name holding a bidirectional control or a line separator into the label other (review reproduction: "a\\u202egnp.evil" became a label and a log field that Grafana and a terminal show reversed, "alive.png")', async () => {
    const names = ['a\u202egnp.evil', 'b\u2067x', 'c\u200fx', 'd\u2028x', 'e\u061cx'];
    const asOther = () => logs.filter((l) => l.includes('"msg":"request"') && l.includes('"model":"other"'));
    const before = asOther().length;
    for (const name of names) {
      const body = JSON.stringify({ model: name, messages: [] });
      await send(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
    }
    await eventually('five more request lines for other', asOther, (l) => l.length >= before + names.length);
    const text = await telemetry.scrape();
    expect(text).not.toMatch(/[\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/);
    for (const line of logs) expect(line).not.toMatch(/[\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/);
  });

  it('folds a model name holding an unpaired surrogate into the label other: both expositions stay valid UTF-8', async () => {
    // JSON can spell a lone surrogate; as a label, protobufjs wrote it as bytes that are not UTF-8 and
    // Prometheus (native histograms on) refused every scrape of the pod.
    const asOther = () => logs.filter((l) => l.includes('"msg":"request"') && l.includes('"model":"other"'));
    const before = asOther().length;
    for (const name of ['x\ud800y', 'x\udc01y', '\udbff']) {
      const body = JSON.stringify({ model: name, messages: [] });
      await send(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
    }
    await eventually('three more request lines for other', asOther, (l) => l.length >= before + 3);
    const text = await telemetry.scrape();
    expect(text).not.toContain('\ufffd');
    expect(text.isWellFormed()).toBe(true);
    const protobuf = Buffer.from(await telemetry.scrapeProtobuf());
    // protobufjs reads a surrogate written as UTF-8 bytes (0xED 0xA0..0xBF, what Prometheus refused)
    // back as the lone surrogate, so each label value is checked as decoded. (A scan of the whole
    // message for those bytes also found them inside doubles and failed at random.)
    const families = decodeDelimited(protobuf) as unknown as Array<{ metric: Array<{ label: Array<{ value: string }> }> }>;
    const values = families.flatMap((f) => f.metric.flatMap((m) => m.label.map((l) => l.value)));
    expect(values).toContain('other');
    expect(values.filter((v) => !v.isWellFormed() || v.includes('\ufffd'))).toEqual([]);
  });
});

describe('operator URLs', () => {
  it('redacts userinfo and query and drops the fragment', () => {
    expect(redactUrl(new URL('http://u:p@host:8000/'))).toBe('http://***@host:8000/');
    expect(redactUrl('http://collector:4318/v1/traces?api_key=abc#f')).toBe('http://collector:4318/v1/traces?***');
    expect(redactUrl('http://host:8000')).toBe('http://host:8000/');
    // Text that is not a URL is masked the same way, for configuration errors that quote it.
    expect(redactUrl('http//u:p@host')).toBe('http//u:p@host'.replace('u:p@', '***@'));
    expect(redactUrl('not a url ?token=1')).toBe('not a url ?***');
    expect(redactUrl('collector:4317')).toBe('collector:4317');
  });

  it('names no credential in configuration errors about the upstream, OTLP or DCGM URL', () => {
    const problems = (run: () => unknown): string => {
      try {
        run();
      } catch (error) {
        if (error instanceof TokentapError) return error.problems.join('\n');
        throw error;
      }
      throw new Error('expected a configuration error');
    };
    const upstreamProblem = problems(() => loadSettings({ flags: { upstream: 'https://u:UPSECRET@host:8000/?key=QSECRET' }, env: {} }));
    expect(upstreamProblem).toMatch(/upstream/);
    const dcgmProblem = problems(() => loadSettings({ flags: {}, env: { TOKENTAP_DCGM_URL: 'ftp://u:DCGMSECRET@host/metrics?token=QSECRET' } }));
    expect(dcgmProblem).toMatch(/dcgm/i);
    const otlpProblem = problems(() => loadOtlpSettings({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'collector//u:OTLPSECRET@host?key=QSECRET' }));
    expect(otlpProblem).toContain('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT');
    for (const text of [upstreamProblem, dcgmProblem, otlpProblem]) {
      expect(text).not.toMatch(/UPSECRET|DCGMSECRET|OTLPSECRET|QSECRET/);
    }
  });

  it('logs the upstream, OTLP and DCGM URLs redacted at start-up and in DCGM errors', async () => {
    const upstream = await startCaptureUpstream();
    const port = new URL(upstream.url).port;
    const serve = await startServeProcess(`http://user:UPSTREAMPASS@127.0.0.1:${port}`, [], {
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://otel:OTLPPASS@127.0.0.1:9',
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://otel:OTLPPASS@127.0.0.1:9/v1/traces?api_key=OTLPKEY',
      TOKENTAP_DCGM_URL: 'http://dcgm:DCGMPASS@127.0.0.1:9/metrics?token=DCGMKEY',
    });
    try {
      const serving = serve.logs().find((l) => l.msg === 'tokentap serving')!;
      expect(serving.upstream).toBe(`http://***@127.0.0.1:${port}/`);
      expect(serving.otlp_metrics).toBe('http://***@127.0.0.1:9/v1/metrics');
      expect(serving.otlp_traces).toBe('http://***@127.0.0.1:9/v1/traces?***');
      // The first scrape fails (nothing listens on port 9): its warning names the URL redacted.
      await eventually('a dcgm warning', () => serve.logs().filter((l) => typeof l.msg === 'string' && l.msg.startsWith('dcgm:')), (l) => l.length >= 1, 10_000);
      const everything = `${JSON.stringify(serve.logs())}\n${serve.stderr()}`;
      expect(everything).toContain('http://***@127.0.0.1:9/metrics?***');
      for (const secret of ['UPSTREAMPASS', 'OTLPPASS', 'OTLPKEY', 'DCGMPASS', 'DCGMKEY']) expect(everything).not.toContain(secret);
    } finally {
      serve.kill();
      await upstream.close();
    }
  });
});
