import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { systemClock } from '../../../src/clock/clock.js';
import { loadSettings } from '../../../src/config/load.js';
import { DrainState } from '../../../src/lifecycle/drain-state.js';
import { createLogger } from '../../../src/log/logger.js';
import { RequestLineWriter } from '../../../src/log/request-line.js';
import { ModelLabels } from '../../../src/metrics/model-labels.js';
import { Recorder } from '../../../src/metrics/recorder.js';
import { Telemetry } from '../../../src/metrics/telemetry.js';
import { Exchange } from '../../../src/proxy/exchange.js';
import { createProxyServer } from '../../../src/proxy/proxy-server.js';
import { WorkloadMatcher } from '../../../src/slo/workload-matcher.js';
import type { RequestTracer } from '../../../src/tracing/request-span.js';
import { chatChunk, sse } from '../../helpers/tap-harness.js';
import { exchange, startReplayUpstream } from '../../helpers/replay-upstream.js';

/**
 * Monitoring failures never break or alter a stream: every call the proxy makes into observation
 * code runs inside its socket event handlers, where an exception would be uncaught and take the
 * whole sidecar down. Here every observation dependency throws, and the stream must still arrive
 * byte for byte, the process must survive, and the drain must still see the request finish.
 */

const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  vi.restoreAllMocks();
  for (const close of closers.splice(0)) await close();
});

function boom(): never {
  throw new Error('observation broke');
}

async function proxyWithBrokenObservation(upstream: string) {
  const telemetry = new Telemetry();
  closers.push(() => telemetry.shutdown());
  const settings = loadSettings({ flags: { config: 'test.yaml' }, env: {}, readFile: () => 'workloads:\n  - name: chat\n    slo: { objective: 0.99, ttft: 200ms, itl: 50ms, e2e: 3s }\n' });
  const recorder = new Recorder(telemetry.meter, settings.buckets);
  recorder.started = boom;
  recorder.interTokenSeries = () => ({ record: boom, end: boom });
  recorder.finished = boom;
  recorder.tapProblem = boom;
  recorder.sloEvents = boom;
  const logs: Array<Record<string, unknown>> = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      for (const line of chunk.toString('utf8').split('\n')) if (line) logs.push(JSON.parse(line) as Record<string, unknown>);
      callback();
    },
  });
  const tracer: RequestTracer = { start: boom };
  const drain = new DrainState();
  const logger = createLogger('info', sink);
  const server = createProxyServer({
    upstream: new URL(upstream),
    upstreamIdleTimeoutMs: 10_000,
    monitor: { clock: systemClock, recorder, models: new ModelLabels(8), logger, requestLines: new RequestLineWriter(logger), workloads: new WorkloadMatcher(settings.workloads), tracer, drain },
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  closers.push(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, drain, logs };
}

describe('observation failures', () => {
  it('leave the stream byte-identical, the sidecar running, and the drain count released', async () => {
    const chunks = sse(chatChunk({ role: 'assistant', content: '' }), chatChunk({ content: 'Hel' }), chatChunk({ content: 'lo' }), chatChunk({}, undefined, 'stop'), '[DONE]');
    const upstream = await startReplayUpstream(() => ({ chunks }));
    closers.push(() => upstream.close());
    const proxy = await proxyWithBrokenObservation(upstream.url);

    for (let i = 0; i < 2; i++) {
      const response = await exchange(`${proxy.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{"model":"m","stream":true}',
      });
      expect(response.status).toBe(200);
      expect(response.ended).toBe('clean');
      expect(response.body.equals(Buffer.concat(chunks))).toBe(true);
    }

    // Without the guard in finish(), a failed recording would leave the request counted in flight forever.
    const idle = await Promise.race([proxy.drain.whenIdle().then(() => 'idle'), new Promise((r) => setTimeout(() => r('still in flight'), 5_000))]);
    expect(idle).toBe('idle');
    const failures = proxy.logs.filter((l) => l.msg === 'request monitor failed: observation of this request is incomplete, its stream goes on');
    expect(failures.length).toBe(2);
    expect(failures[0]).toMatchObject({ level: 40, step: 'trace', path: '/v1/chat/completions' });
  });

  it('does not let a throwing recorder turn a client cancellation into an uncaught exception', async () => {
    const upstream = await startReplayUpstream((request) => ({
      chunks: sse(chatChunk({ content: 'a' }), chatChunk({ content: 'b' }), '[DONE]'),
      gapMs: 20,
      ending: request.body.toString() === '{"hang":true}' ? 'hang' : 'clean',
    }));
    closers.push(() => upstream.close());
    const proxy = await proxyWithBrokenObservation(upstream.url);
    const post = (body: string, abortAfterMs?: number) =>
      exchange(`${proxy.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body, ...(abortAfterMs === undefined ? {} : { abortAfterMs }) });

    const cancelled = await post('{"hang":true}', 300);
    expect(cancelled.ended).toBe('error');
    const idle = await Promise.race([proxy.drain.whenIdle().then(() => 'idle'), new Promise((r) => setTimeout(() => r('still in flight'), 5_000))]);
    expect(idle).toBe('idle');
    // The proxy still serves after the failures.
    const next = await post('{}');
    expect(next.ended).toBe('clean');
    expect(next.body.toString()).toContain('[DONE]');
  });
});

describe("a bug in the relay's own code", () => {
  const post = (url: string) => exchange(`${url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"model":"m","stream":true}' });

  it('thrown while reading the upstream: that request fails with a 502 naming it, the next is served', async () => {
    const chunks = sse(chatChunk({ content: 'a' }), '[DONE]');
    const upstream = await startReplayUpstream(() => ({ chunks }));
    closers.push(() => upstream.close());
    const proxy = await proxyWithBrokenObservation(upstream.url);
    vi.spyOn(Exchange.prototype, 'upstreamData').mockImplementationOnce(() => {
      throw new Error('relay bug');
    });
    const failed = await post(proxy.url);
    expect(failed.status).toBe(502);
    expect(JSON.parse(failed.body.toString()).error.message).toMatch(/connection failed \(relay bug\)$/);
    const next = await post(proxy.url);
    expect(next.body.equals(Buffer.concat(chunks))).toBe(true);
  });

  it('thrown while reading a request: that connection closes, the sidecar logs it and serves the next', async () => {
    const chunks = sse(chatChunk({ content: 'a' }), '[DONE]');
    const upstream = await startReplayUpstream(() => ({ chunks }));
    closers.push(() => upstream.close());
    const proxy = await proxyWithBrokenObservation(upstream.url);
    vi.spyOn(Exchange.prototype, 'start').mockImplementationOnce(() => {
      throw new Error('relay bug');
    });
    await expect(post(proxy.url)).rejects.toThrow(/socket hang up/);
    expect(proxy.logs.find((l) => l.msg === 'proxy failed on a client connection; the connection is closed')).toMatchObject({ level: 50, err: { message: 'relay bug' } });
    const next = await post(proxy.url);
    expect(next.body.equals(Buffer.concat(chunks))).toBe(true);
  });
});
