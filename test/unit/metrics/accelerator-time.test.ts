import { Writable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../../src/clock/clock.js';
import { loadSettings } from '../../../src/config/load.js';
import { createLogger } from '../../../src/log/logger.js';
import { RequestLineWriter } from '../../../src/log/request-line.js';
import { ModelLabels } from '../../../src/metrics/model-labels.js';
import { createPodTime } from '../../../src/metrics/pod-time.js';
import { ProcessorSharing } from '../../../src/metrics/processor-sharing.js';
import { Recorder } from '../../../src/metrics/recorder.js';
import { Telemetry } from '../../../src/metrics/telemetry.js';
import { RequestMonitor } from '../../../src/proxy/request-monitor.js';
import { WorkloadMatcher } from '../../../src/slo/workload-matcher.js';
import { histogram, parsePrometheusText, sumValues } from '../../helpers/prometheus-text.js';
import { chatChunk, sse } from '../../helpers/tap-harness.js';

/**
 * The script of DESIGN.md section 12's known-answer test: three overlapping requests on a fake
 * clock, every interval a multiple of the count in flight so each share is a whole millisecond.
 *
 *   t (ms)   event              in flight   virtual clock (ms)
 *   0        A starts           1           0
 *   100      B starts           2           100
 *   200      A first token      2           150
 *   260      C starts           3           180
 *   320      B first token      3           200
 *   380      A ends             2           220
 *   480      C first token      2           270
 *   580      B ends             1           320
 *   680      C ends             0           420
 *   1000     (scrape)           0           idle since 680
 *
 * A: prefill 150, decode 70; B: prefill 100, decode 120; C: prefill 90, decode 150 (ms of the pod).
 * They add up to 680 ms, the busy time; busy 680 + idle 320 = the 1000 ms of wall time.
 */
const SCRIPT = {
  A: { startMs: 0, firstTokenMs: 200, endMs: 380, prefillMs: 150, decodeMs: 70 },
  B: { startMs: 100, firstTokenMs: 320, endMs: 580, prefillMs: 100, decodeMs: 120 },
  C: { startMs: 260, firstTokenMs: 480, endMs: 680, prefillMs: 90, decodeMs: 150 },
} as const;
type Name = keyof typeof SCRIPT;

/** The script's events in time order. */
function events(): Array<{ atMs: number; name: Name; kind: 'start' | 'first' | 'end' }> {
  const list = (Object.keys(SCRIPT) as Name[]).flatMap((name) => [
    { atMs: SCRIPT[name].startMs, name, kind: 'start' as const },
    { atMs: SCRIPT[name].firstTokenMs, name, kind: 'first' as const },
    { atMs: SCRIPT[name].endMs, name, kind: 'end' as const },
  ]);
  return list.sort((a, b) => a.atMs - b.atMs);
}

describe('processor sharing of the pod time', () => {
  it('gives each overlapping request its exact share, split at its first token, adding up to the busy time', () => {
    const sharing = new ProcessorSharing(0);
    const readings = new Map<string, number>();
    for (const { atMs, name, kind } of events()) {
      const value = kind === 'start' ? sharing.started(atMs) : kind === 'first' ? sharing.read(atMs) : sharing.finished(atMs);
      readings.set(`${name}.${kind}`, value);
    }
    let total = 0;
    for (const name of Object.keys(SCRIPT) as Name[]) {
      const prefill = (readings.get(`${name}.first`) as number) - (readings.get(`${name}.start`) as number);
      const decode = (readings.get(`${name}.end`) as number) - (readings.get(`${name}.first`) as number);
      expect({ name, prefill, decode }).toEqual({ name, prefill: SCRIPT[name].prefillMs, decode: SCRIPT[name].decodeMs });
      total += prefill + decode;
    }
    expect(sharing.busyUntil(1000)).toBe(680);
    expect(total).toBe(sharing.busyUntil(1000));
    expect(sharing.idleUntil(1000)).toBe(320);
    expect(sharing.busyUntil(1000) + sharing.idleUntil(1000)).toBe(1000);
  });

  it('keeps busy and idle current between events, as a scrape reads them', () => {
    const sharing = new ProcessorSharing(0);
    expect(sharing.idleUntil(50)).toBe(50);
    sharing.started(50);
    expect([sharing.busyUntil(80), sharing.idleUntil(80)]).toEqual([30, 50]);
    sharing.finished(100);
    expect([sharing.busyUntil(130), sharing.idleUntil(130)]).toEqual([50, 80]);
  });

  it('never lowers busy or idle time when read for a time before the last event', () => {
    const sharing = new ProcessorSharing(0);
    sharing.started(100);
    expect([sharing.busyUntil(50), sharing.idleUntil(50)]).toEqual([0, 100]);
    sharing.finished(300);
    expect([sharing.busyUntil(250), sharing.idleUntil(250)]).toEqual([200, 100]);
  });

  it('never moves the virtual clock back for a time before the last event', () => {
    const sharing = new ProcessorSharing(0);
    sharing.started(0);
    sharing.started(100);
    // A first token stamped at 90, read after the start at 100: read as at 100, not earlier.
    expect(sharing.read(90)).toBe(100);
    expect(sharing.busyUntil(100)).toBe(100);
  });

  it('shares a hundred thousand random starts and ends to within rounding of the busy time', () => {
    let seed = 12345;
    const random = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
    const sharing = new ProcessorSharing(0);
    const open: number[] = [];
    let nowMs = 0;
    let shared = 0;
    for (let i = 0; i < 100_000; i++) {
      nowMs += random() * 10;
      if (open.length === 0 || (open.length < 64 && random() < 0.5)) open.push(sharing.started(nowMs));
      else shared += sharing.finished(nowMs) - (open.splice(Math.floor(random() * open.length), 1)[0] as number);
    }
    for (const start of open.splice(0)) shared += sharing.finished(nowMs) - start;
    expect(Math.abs(shared - sharing.busyUntil(nowMs)) / sharing.busyUntil(nowMs)).toBeLessThan(1e-9);
  });
});

const telemetries: Telemetry[] = [];
afterEach(async () => {
  await Promise.all(telemetries.splice(0).map((t) => t.shutdown()));
});

const CONFIG = `
cost: { accelerator_price_per_hour: 3.6, accelerators: 2, currency: EUR }
workloads:
  - name: chat
    match: { header: { x-workload: chat } }
  - name: batch
`;

function sidecarParts(config: string) {
  const clock = new ManualClock(0);
  const telemetry = new Telemetry();
  telemetries.push(telemetry);
  const settings = loadSettings({ flags: { config: 't.yaml' }, env: {}, readFile: () => config });
  const logs: Array<Record<string, unknown>> = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      for (const line of chunk.toString('utf8').split('\n')) if (line) logs.push(JSON.parse(line) as Record<string, unknown>);
      callback();
    },
  });
  const logger = createLogger('info', sink);
  const podTime = createPodTime(telemetry.meter, clock, settings.cost, undefined);
  const deps = { clock, recorder: new Recorder(telemetry.meter, settings.buckets), models: new ModelLabels(8), logger, requestLines: new RequestLineWriter(logger), workloads: new WorkloadMatcher(settings.workloads), podTime };
  return { clock, telemetry, deps, logs };
}

describe('accelerator time through the request monitor and /metrics', () => {
  it('exports the scripted requests exact accelerator-seconds by workload and phase, and busy plus idle as the wall time', async () => {
    const { clock, telemetry, deps } = sidecarParts(CONFIG);
    const workloadOf: Record<Name, string> = { A: 'chat', B: 'chat', C: 'batch' };
    const [first, last, done] = sse(chatChunk({ content: 'a' }), chatChunk({ content: 'b' }, {}, 'stop'), '[DONE]');
    const monitors = new Map<Name, RequestMonitor>();
    for (const { atMs, name, kind } of events()) {
      clock.advance(atMs - clock.nowMs());
      if (kind === 'start') {
        const monitor = new RequestMonitor(deps, 'POST', '/v1/chat/completions', { 'x-workload': workloadOf[name] });
        monitor.requestBody('m');
        monitor.response(200, 'text/event-stream');
        monitors.set(name, monitor);
      } else if (kind === 'first') {
        monitors.get(name)?.body(first as Buffer);
      } else {
        const monitor = monitors.get(name) as RequestMonitor;
        monitor.body(last as Buffer);
        monitor.body(done as Buffer);
        monitor.bodyEnd();
        monitor.delivered();
      }
    }
    clock.advance(1000 - clock.nowMs());

    const m = parsePrometheusText(await telemetry.scrape());
    const seconds = (workload: string, phase: string) => sumValues(m, 'tokentap_accelerator_seconds_total', { workload, phase });
    // Two accelerators: every share of the pod's time counts twice.
    expect(seconds('chat', 'prefill')).toBeCloseTo(((150 + 100) / 1000) * 2, 12);
    expect(seconds('chat', 'decode')).toBeCloseTo(((70 + 120) / 1000) * 2, 12);
    expect(seconds('batch', 'prefill')).toBeCloseTo((90 / 1000) * 2, 12);
    expect(seconds('batch', 'decode')).toBeCloseTo((150 / 1000) * 2, 12);
    const busy = sumValues(m, 'tokentap_pod_busy_seconds_total');
    const idle = sumValues(m, 'tokentap_pod_idle_seconds_total');
    expect([busy, idle]).toEqual([0.68, 0.32]);
    expect(sumValues(m, 'tokentap_accelerator_seconds_total') / 2).toBeCloseTo(busy, 12);
    expect(m.get('tokentap_pod_busy_seconds_total')?.type).toBe('COUNTER');

    const chat = histogram(m, 'tokentap_request_accelerator_seconds', { workload: 'chat' });
    expect(chat.count).toBe(2);
    expect(chat.sum).toBeCloseTo(((220 + 220) / 1000) * 2, 12);
    // Each request of 0.44 accelerator-seconds is in the bucket (0.25, 0.5].
    expect(chat.buckets.get(0.5)! - chat.buckets.get(0.25)!).toBe(2);
    expect(histogram(m, 'tokentap_request_accelerator_seconds', { workload: 'batch' })).toMatchObject({ count: 1 });

    expect(sumValues(m, 'tokentap_accelerators')).toBe(2);
    expect(m.get('tokentap_accelerator_price_per_hour')?.metrics).toEqual([expect.objectContaining({ labels: { currency: 'EUR' }, value: '3.6' })]);
  });

  it('counts a request with no first token (a JSON answer) as prefill only, and logs its accelerator-seconds and cached input', async () => {
    const { clock, telemetry, deps, logs } = sidecarParts(CONFIG);
    const monitor = new RequestMonitor(deps, 'POST', '/v1/chat/completions', {});
    monitor.requestBody('m');
    monitor.response(200, 'application/json');
    clock.advance(250);
    monitor.body(Buffer.from(JSON.stringify({ choices: [{ message: { content: 'hi' } }], usage: { prompt_tokens: 3, completion_tokens: 1, prompt_tokens_details: { cached_tokens: 2 } } })));
    monitor.bodyEnd();
    monitor.delivered();
    const m = parsePrometheusText(await telemetry.scrape());
    expect(sumValues(m, 'tokentap_accelerator_seconds_total', { workload: 'batch', phase: 'prefill' })).toBe(0.5);
    expect(sumValues(m, 'tokentap_accelerator_seconds_total', { workload: 'batch', phase: 'decode' })).toBe(0);
    expect(logs.find((l) => l.msg === 'request')).toMatchObject({ accelerator_seconds: 0.5, cached_input_tokens: 2 });
  });

  it('exports busy and idle time but no accelerator-seconds, count or price without cost:', async () => {
    const { clock, telemetry, deps, logs } = sidecarParts('workloads: [{ name: chat }]\n');
    const monitor = new RequestMonitor(deps, 'POST', '/v1/chat/completions', {});
    monitor.requestBody('m');
    monitor.response(200, 'text/event-stream');
    clock.advance(40);
    monitor.body(sse(chatChunk({ content: 'a' }, {}, 'stop'))[0] as Buffer);
    monitor.body(sse('[DONE]')[0] as Buffer);
    monitor.bodyEnd();
    monitor.delivered();
    clock.advance(60);
    const m = parsePrometheusText(await telemetry.scrape());
    expect([sumValues(m, 'tokentap_pod_busy_seconds_total'), sumValues(m, 'tokentap_pod_idle_seconds_total')]).toEqual([0.04, 0.06]);
    for (const name of ['tokentap_accelerator_seconds_total', 'tokentap_request_accelerator_seconds', 'tokentap_accelerators', 'tokentap_accelerator_price_per_hour']) {
      expect(m.get(name)?.metrics ?? [], name).toEqual([]);
    }
    expect(logs.find((l) => l.msg === 'request')).not.toHaveProperty('accelerator_seconds');
  });
});
