import { afterEach, describe, expect, it } from 'vitest';
import { loadSettings } from '../../../src/config/load.js';
import { Recorder } from '../../../src/metrics/recorder.js';
import { Telemetry } from '../../../src/metrics/telemetry.js';
import { SloAttainment } from '../../../src/slo/slo-attainment.js';

const telemetries: Telemetry[] = [];
afterEach(async () => {
  await Promise.all(telemetries.splice(0).map((t) => t.shutdown()));
});

const CONFIG = `
workloads:
  - name: chat
    match: { path: /chat }
    slo: { objective: 0.99, ttft: 200ms, itl: 50ms }
  - name: rag
    match: { path: /rag }
    slo: { objective: 0.9, e2e: 3s }
  - name: default
`;

describe('SLO attainment line (demo)', () => {
  it('shows each workload\'s worst SLO over the interval, marked when below its objective, and says so of a workload without events', async () => {
    const settings = loadSettings({ flags: { config: 'c.yaml' }, env: {}, readFile: () => CONFIG });
    const telemetry = new Telemetry();
    telemetries.push(telemetry);
    const recorder = new Recorder(telemetry.meter, settings.buckets);
    const attainment = new SloAttainment(telemetry, settings.workloads);
    const chat = recorder.requestAttributes('chat', 'm');
    const rag = recorder.requestAttributes('rag', 'm');

    expect(await attainment.line()).toBe('SLO good (worst per workload): chat no events | rag no events');
    recorder.sloEvents(chat, 'ttft', 96, 4);
    recorder.sloEvents(chat, 'itl', 1000, 0);
    recorder.sloEvents(rag, 'e2e', 10, 0);
    expect(await attainment.line()).toBe('SLO good (worst per workload): chat ttft 96.0% < 99.0% | rag e2e 100%');
    // The next line covers only what happened since.
    recorder.sloEvents(chat, 'itl', 90, 10);
    expect(await attainment.line()).toBe('SLO good (worst per workload): chat itl 90.0% < 99.0% | rag no events');
  });

  it('rounds a share below the objective down, so it never prints as the objective (the demo printed "chat itl 99.0% < 99.0%")', async () => {
    const settings = loadSettings({ flags: { config: 'c.yaml' }, env: {}, readFile: () => CONFIG.replace('objective: 0.9,', 'objective: 0.9995,') });
    const telemetry = new Telemetry();
    telemetries.push(telemetry);
    const recorder = new Recorder(telemetry.meter, settings.buckets);
    const attainment = new SloAttainment(telemetry, settings.workloads);
    recorder.sloEvents(recorder.requestAttributes('chat', 'm'), 'itl', 9896, 104);
    recorder.sloEvents(recorder.requestAttributes('rag', 'm'), 'e2e', 19998, 12);
    expect(await attainment.line()).toBe('SLO good (worst per workload): chat itl 98.9% < 99.0% | rag e2e 99.94% < 99.95%');
    recorder.sloEvents(recorder.requestAttributes('chat', 'm'), 'ttft', 9999, 1);
    recorder.sloEvents(recorder.requestAttributes('rag', 'm'), 'e2e', 71, 29);
    expect(await attainment.line()).toBe('SLO good (worst per workload): chat ttft 99.9% | rag e2e 71.00% < 99.95%');
  });

  it('has no line when no workload has an SLO', async () => {
    const telemetry = new Telemetry();
    telemetries.push(telemetry);
    expect(await new SloAttainment(telemetry, loadSettings({ flags: {}, env: {} }).workloads).line()).toBeUndefined();
  });
});
