import { Writable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../../src/clock/clock.js';
import { loadSettings } from '../../../src/config/load.js';
import { acceleratorCount } from '../../../src/dcgm/accelerator-count.js';
import type { GpuReading } from '../../../src/dcgm/gpu-readings.js';
import { createLogger } from '../../../src/log/logger.js';
import { createPodTime } from '../../../src/metrics/pod-time.js';
import { Telemetry } from '../../../src/metrics/telemetry.js';
import { startSidecar } from '../../../src/sidecar.js';
import { startSimulator } from '../../../src/simulator/index.js';
import { dcgmFixture, startDcgmExporter } from '../../helpers/dcgm-exporter.js';
import { parsePrometheusText, scrape, sumValues } from '../../helpers/prometheus-text.js';
import { exchange } from '../../helpers/replay-upstream.js';
import { eventually } from '../../helpers/sidecar.js';

const reading = (uuid: string, instance?: string): GpuReading => ({
  labels: { gpu: '0', uuid, ...(instance === undefined ? {} : { gpu_instance: instance, gpu_profile: '3g.71gb' }) },
  memoryUsedBytes: 1,
  memoryTotalBytes: 2,
  utilizationRatio: undefined,
});

describe('accelerators counted from DCGM', () => {
  it('counts each GPU once and each MIG instance once, not the GPU it is cut from', () => {
    expect(acceleratorCount([])).toBe(0);
    expect(acceleratorCount([reading('GPU-a'), reading('GPU-b')])).toBe(2);
    // A MIG GPU's own reading (its utilisation) beside its instances' is not a further accelerator.
    expect(acceleratorCount([reading('GPU-a'), reading('GPU-a', '1'), reading('GPU-a', '2'), reading('GPU-b')])).toBe(3);
  });

  it('attributes nothing and exports no count while DCGM has reported no GPU of the pod', async () => {
    const telemetry = new Telemetry();
    try {
      const settings = loadSettings({ flags: { config: 't.yaml' }, env: {}, readFile: () => 'cost: { accelerator_price_per_hour: 2, accelerators: dcgm }\ndcgm: { url: http://127.0.0.1:9/metrics }\n' });
      const gpus: { gpus: readonly GpuReading[] } = { gpus: [] };
      const podTime = createPodTime(telemetry.meter, new ManualClock(0), settings.cost, gpus);
      expect(podTime.accelerators()).toBeUndefined();
      expect(parsePrometheusText(await telemetry.scrape()).get('tokentap_accelerators')?.metrics ?? []).toEqual([]);
      gpus.gpus = [reading('GPU-a'), reading('GPU-b')];
      expect(podTime.accelerators()).toBe(2);
      expect(sumValues(parsePrometheusText(await telemetry.scrape()), 'tokentap_accelerators')).toBe(2);
    } finally {
      await telemetry.shutdown();
    }
  });
});

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

describe('a sidecar with accelerators: dcgm', () => {
  it('prices the MIG instance its pod holds on a shared GPU as one accelerator', async () => {
    const simulator = await startSimulator({ port: 0 });
    cleanups.push(() => simulator.close());
    const exporter = await startDcgmExporter({ kind: 'text', body: dcgmFixture('newer-exporter-mig.prom') });
    cleanups.push(() => exporter.close());
    const settings = loadSettings({
      flags: { upstream: simulator.url, listen: '127.0.0.1:0', adminListen: '127.0.0.1:0', config: 'tokentap.yaml' },
      env: { POD_NAME: 'vllm-chat-6c9f7d8b5-m4n2r', POD_NAMESPACE: 'llm' },
      readFile: () => `cost: { accelerator_price_per_hour: 1.5, accelerators: dcgm }\ndcgm:\n  url: ${exporter.url}\n  interval: 1s\n`,
    });
    const sidecar = await startSidecar({ ...settings, modelDiscovery: undefined }, createLogger('silent', new Writable({ write: (_c, _e, cb) => cb() })));
    cleanups.push(() => sidecar.close());
    await eventually('the count from DCGM', () => scrape(sidecar.adminUrl), (m) => sumValues(m, 'tokentap_accelerators') === 1);
    const answer = await exchange(`${sidecar.proxyUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-sim-ttft-ms': '20', 'x-sim-itl-ms': '5', 'x-sim-output-tokens': '4' },
      body: JSON.stringify({ model: 'm', stream: true, messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(answer.status).toBe(200);
    const metrics = await eventually('accelerator-seconds', () => scrape(sidecar.adminUrl), (m) => sumValues(m, 'tokentap_accelerator_seconds_total') > 0);
    // One instance: the request's accelerator-seconds are its share of the pod's time, which is all the busy time.
    expect(sumValues(metrics, 'tokentap_accelerator_seconds_total')).toBeCloseTo(sumValues(metrics, 'tokentap_pod_busy_seconds_total'), 9);
  });
});
