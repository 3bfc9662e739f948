import { ManualClock } from '../../src/clock/clock.js';
import { loadSettings } from '../../src/config/load.js';
import { createLogger } from '../../src/log/logger.js';
import { RequestLineWriter } from '../../src/log/request-line.js';
import type { StatusReport } from '../../src/admin/status-report.js';
import { StatusSource } from '../../src/admin/status-source.js';
import { ModelLabels } from '../../src/metrics/model-labels.js';
import { createPodTime } from '../../src/metrics/pod-time.js';
import { Recorder } from '../../src/metrics/recorder.js';
import { Telemetry } from '../../src/metrics/telemetry.js';
import { RequestMonitor } from '../../src/proxy/request-monitor.js';
import { WorkloadMatcher } from '../../src/slo/workload-matcher.js';
import { chatChunk, sse } from './tap-harness.js';

/**
 * Cost on /status.json with a known answer (issue 25 item 5): the three overlapping requests of
 * docs/capacity-and-cost.md's table (test/unit/metrics/accelerator-time.test.ts) on a fake clock,
 * through the request monitor, read back by the status page's own source.
 *
 *   A (chat):  0 .. first token 200 .. end 380    prefill 150 ms, decode  70 ms of the pod
 *   B (chat):  100 .. 320 .. 580                  prefill 100 ms, decode 120 ms
 *   C (batch): 260 .. 480 .. 680                  prefill  90 ms, decode 150 ms
 *   report at 1000 ms: busy 680 ms, idle 320 ms
 *
 * Two accelerators at 3.6 EUR an hour: 0.001 EUR per accelerator-second. Each request reports 100
 * input and 4 output tokens; A 50 of its input cached, B none, C all 100.
 */
const SCRIPT = {
  A: { workload: 'chat', startMs: 0, firstTokenMs: 200, endMs: 380, cached: 50 },
  B: { workload: 'chat', startMs: 100, firstTokenMs: 320, endMs: 580, cached: 0 },
  C: { workload: 'batch', startMs: 260, firstTokenMs: 480, endMs: 680, cached: 100 },
} as const;
export type Name = keyof typeof SCRIPT;

export const WORKLOADS = `
workloads:
  - name: chat
    match: { header: { x-workload: chat } }
    slo: { objective: 0.99, ttft: 1s }
  - name: batch
`;
export const WITH_COST = `cost: { accelerator_price_per_hour: 3.6, accelerators: 2, currency: EUR }\n${WORKLOADS}`;

const stops: Array<() => Promise<void>> = [];
/** Stops what scriptedReport started; for afterEach. */
export async function stopScripted(): Promise<void> {
  await Promise.all(stops.splice(0).map((stop) => stop()));
}

/**
 * Runs the script through a request monitor and answers what /status.json would at 1000 ms.
 * `withoutUsage`: requests that end without a usage report (a stream without
 * `stream_options.include_usage`): their input tokens are unknown, their output tokens counted.
 */
export async function scriptedReport(config: string, withoutUsage: readonly Name[] = []): Promise<StatusReport> {
  const clock = new ManualClock(0);
  const telemetry = new Telemetry();
  const settings = loadSettings({ flags: { config: 't.yaml' }, env: {}, readFile: () => config });
  const podTime = createPodTime(telemetry.meter, clock, settings.cost, undefined);
  const logger = createLogger('error');
  const deps = { clock, recorder: new Recorder(telemetry.meter, settings.buckets), models: new ModelLabels(8), logger, requestLines: new RequestLineWriter(logger), workloads: new WorkloadMatcher(settings.workloads), podTime };
  const source = new StatusSource({ telemetry, settings, clock, version: 't', probe: () => Promise.resolve({ ready: true, detail: 'ok' }) });
  stops.push(async () => {
    source.stop();
    await telemetry.shutdown();
  });
  const events = (Object.keys(SCRIPT) as Name[])
    .flatMap((name) => (['startMs', 'firstTokenMs', 'endMs'] as const).map((kind) => ({ atMs: SCRIPT[name][kind], name, kind })))
    .sort((a, b) => a.atMs - b.atMs);
  const monitors = new Map<Name, RequestMonitor>();
  for (const { atMs, name, kind } of events) {
    clock.advance(atMs - clock.nowMs());
    if (kind === 'startMs') {
      const monitor = new RequestMonitor(deps, 'POST', '/v1/chat/completions', { 'x-workload': SCRIPT[name].workload });
      monitor.requestBody('m');
      monitor.response(200, 'text/event-stream');
      monitors.set(name, monitor);
    } else if (kind === 'firstTokenMs') {
      monitors.get(name)?.body(sse(chatChunk({ content: 'a' }))[0] as Buffer);
    } else {
      const monitor = monitors.get(name) as RequestMonitor;
      const usage = { prompt_tokens: 100, completion_tokens: 4, total_tokens: 104, prompt_tokens_details: { cached_tokens: SCRIPT[name].cached } };
      const frames = withoutUsage.includes(name) ? sse(chatChunk({ content: 'b' }, {}, 'stop'), '[DONE]') : sse(chatChunk({ content: 'b' }, {}, 'stop'), chatChunk({}, { choices: [], usage }), '[DONE]');
      for (const frame of frames) monitor.body(frame as Buffer);
      monitor.bodyEnd();
      monitor.delivered();
    }
  }
  clock.advance(1000 - clock.nowMs());
  // What the admin listener serves: the report as JSON.
  return JSON.parse(JSON.stringify(await source.report())) as StatusReport;
}

