import { Writable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../../src/clock/clock.js';
import { loadSettings } from '../../../src/config/load.js';
import { createLogger } from '../../../src/log/logger.js';
import { RequestLineWriter } from '../../../src/log/request-line.js';
import { ModelLabels } from '../../../src/metrics/model-labels.js';
import { Recorder } from '../../../src/metrics/recorder.js';
import { Telemetry } from '../../../src/metrics/telemetry.js';
import { ProfileStore } from '../../../src/profile/profile-store.js';
import { RequestMonitor } from '../../../src/proxy/request-monitor.js';
import { WorkloadMatcher } from '../../../src/slo/workload-matcher.js';
import { chatChunk, sse } from '../../helpers/tap-harness.js';

const telemetries: Telemetry[] = [];
afterEach(async () => {
  await Promise.all(telemetries.splice(0).map((t) => t.shutdown()));
});

const CONFIG = ['workloads:', '  - name: off', '    match: { header: { x-workload: off } }', '    profile: false', '  - name: chat', ''].join('\n');

/** A monitor wired to a profile store as the sidecar wires it (src/sidecar.ts), on a manual clock. */
function setup() {
  const clock = new ManualClock(1000);
  const telemetry = new Telemetry();
  telemetries.push(telemetry);
  const settings = loadSettings({ flags: { config: 'test.yaml' }, env: {}, readFile: () => CONFIG });
  const profiles = new ProfileStore(settings.profiles!, clock, { nowUnixMs: 1_800_000_000_000 });
  const logs: string[] = [];
  const logger = createLogger('info', new Writable({ write: (chunk: Buffer, _e, cb) => (logs.push(chunk.toString('utf8')), cb()) }));
  const deps = {
    clock,
    recorder: new Recorder(telemetry.meter, settings.buckets),
    models: new ModelLabels(8),
    logger,
    requestLines: new RequestLineWriter(logger),
    workloads: new WorkloadMatcher(settings.workloads),
    profiles,
  };
  return { clock, deps, profiles, logs };
}

/** One streamed chat completion: body parsed at its end, 4 events ([DONE] the last) 10 ms apart, delivered. */
function request(setupResult: ReturnType<typeof setup>, headers: Record<string, string>, body: unknown, cachedTokens?: number) {
  const { clock, deps } = setupResult;
  const monitor = new RequestMonitor(deps, 'POST', '/v1/chat/completions', headers);
  monitor.requestBody('m', body);
  monitor.response(200, 'text/event-stream');
  for (const event of sse(chatChunk({ content: 'a' }), chatChunk({ content: 'b' }), chatChunk({}, { usage: { prompt_tokens: 1200, completion_tokens: 2, total_tokens: 1202 } }, 'stop'), '[DONE]')) {
    clock.advance(10);
    monitor.body(event);
  }
  // The cost helper's taps set this field from the usage report; here it is set directly.
  if (cachedTokens !== undefined) monitor.timeline.reportedCachedInputTokens = cachedTokens;
  monitor.bodyEnd();
  monitor.delivered();
}

describe('the request monitor feeds the workload-shape record', () => {
  const body = { model: 'm', messages: [{ role: 'system', content: 'x'.repeat(4800) }] };

  it('records each finished generation once: start, duration, reported tokens, cached tokens, outcome and prompt blocks', () => {
    const s = setup();
    request(s, {}, body, 300);
    request(s, {}, body, 0);
    request(s, {}, body);
    s.clock.advance(1000);
    const held = s.profiles.shapes('chat', 60_000)?.shapes ?? [];
    expect(held).toHaveLength(3);
    expect(held[0]).toMatchObject({ startUnixMs: 1_800_000_000_000, durationMs: 40, inputTokens: 1200, outputTokens: 2, cachedInputTokens: 300, outcome: 'completed' });
    expect(held.map((shape) => shape.cachedInputTokens)).toEqual([300, 0, Number.NaN]);
    // 4,800+ bytes at 4 bytes a token in blocks of 512 tokens: two complete blocks, the same in all three.
    expect(held[0]?.blockHashes).toHaveLength(2);
    expect(held[1]?.blockHashes).toEqual(held[0]?.blockHashes);
    expect(s.profiles.profile('chat', 60_000)?.cachedInputShare).toBe(0.5);
  });

  it('takes no fingerprint and records nothing for a workload with profile: false', () => {
    const s = setup();
    request(s, { 'x-workload': 'off' }, body);
    expect(s.profiles.enabled('off')).toBe(false);
    expect(s.profiles.shapes('off', 60_000)).toBeUndefined();
    expect(s.profiles.shapes('chat', 60_000)?.shapes).toEqual([]);
  });

  it('records a request whose body nests 20,000 levels deep (JSON.parse takes it; a recursive serialiser would overflow the stack), without prompt blocks and without a monitor failure', () => {
    const s = setup();
    let nested: unknown = 'deep';
    for (let i = 0; i < 20_000; i++) nested = [nested];
    request(s, {}, { model: 'm', messages: nested });
    const held = s.profiles.shapes('chat', 60_000)?.shapes ?? [];
    expect(held).toHaveLength(1);
    expect(held[0]).toMatchObject({ inputTokens: 1200, outputTokens: 2, blockHashes: [] });
    expect(s.logs.join('')).not.toContain('request monitor failed');
  });
});
