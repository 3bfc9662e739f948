import { Writable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { loadSettings } from '../../../src/config/load.js';
import { TokentapError } from '../../../src/errors.js';
import { createLogger } from '../../../src/log/logger.js';
import { startSidecar } from '../../../src/sidecar.js';
import { startSimulator } from '../../../src/simulator/index.js';
import { dcgmFixture, startDcgmExporter, type ExporterBehaviour } from '../../helpers/dcgm-exporter.js';
import { scrape, sumValues } from '../../helpers/prometheus-text.js';
import { exchange } from '../../helpers/replay-upstream.js';
import { eventually } from '../../helpers/sidecar.js';

const MIB = 1024 * 1024;
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** The simulator, a DCGM exporter and a sidecar configured to read it, as pod llm/vllm-chat-6c9f7d8b5-x2kqp. */
async function setUp(behaviour: ExporterBehaviour, dcgmYaml: (url: string) => string) {
  const simulator = await startSimulator({ port: 0 });
  cleanups.push(() => simulator.close());
  const exporter = await startDcgmExporter(behaviour);
  cleanups.push(() => exporter.close());
  const logs: Array<Record<string, unknown>> = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      for (const line of chunk.toString('utf8').split('\n')) if (line) logs.push(JSON.parse(line) as Record<string, unknown>);
      callback();
    },
  });
  const settings = loadSettings({
    flags: { upstream: simulator.url, listen: '127.0.0.1:0', adminListen: '127.0.0.1:0', config: 'tokentap.yaml' },
    env: { POD_NAME: 'vllm-chat-6c9f7d8b5-x2kqp', POD_NAMESPACE: 'llm' },
    readFile: () => dcgmYaml(exporter.url),
  });
  const sidecar = await startSidecar(settings, createLogger('info', sink));
  cleanups.push(() => sidecar.close());
  return { simulator, exporter, sidecar, logs };
}

function streamChat(proxyUrl: string) {
  return exchange(`${proxyUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-sim-ttft-ms': '20', 'x-sim-itl-ms': '5', 'x-sim-output-tokens': '8', 'x-sim-seed': '7' },
    body: JSON.stringify({ model: 'm', stream: true, messages: [{ role: 'user', content: 'hi' }] }),
  });
}

describe('the sidecar reading DCGM', () => {
  it('exports its pod GPU gauges and logs the GPU memory in use with each request', async () => {
    const { sidecar, logs } = await setUp({ kind: 'text', body: dcgmFixture('pod-mapped.prom') }, (url) => `dcgm:\n  url: ${url}\n  interval: 1s\n`);
    const metrics = await eventually('GPU gauges', () => scrape(sidecar.adminUrl), (m) => m.has('tokentap_gpu_memory_used_bytes'));
    expect(sumValues(metrics, 'tokentap_gpu_memory_used_bytes', { uuid: 'GPU-1a2b3c4d-0000-1111-2222-333344445555' })).toBe(72870 * MIB);
    expect(sumValues(metrics, 'tokentap_gpu_memory_total_bytes')).toBe((72870 + 8134 + 555) * MIB);
    expect(sumValues(metrics, 'tokentap_gpu_utilization_ratio')).toBe(0.87);
    expect((await streamChat(sidecar.proxyUrl)).status).toBe(200);
    const line = await eventually('request log line', () => logs.find((l) => l.msg === 'request'), (l) => l !== undefined);
    expect(line?.gpu_memory_used_bytes).toBe(72870 * MIB);
  });

  it('keeps proxying, unchanged, while the exporter hangs; the gauges stay absent and timeouts are counted', async () => {
    const { sidecar, exporter, simulator } = await setUp({ kind: 'hang' }, (url) => `dcgm:\n  url: ${url}\n  interval: 1s\n  timeout: 300ms\n`);
    await eventually('a scrape in progress', () => exporter.requests, (n) => n >= 1);
    const direct = await streamChat(simulator.url);
    const proxied = await streamChat(sidecar.proxyUrl);
    expect(proxied.status).toBe(200);
    expect(proxied.ended).toBe('clean');
    // The simulator is deterministic for the same seed: the proxied body is the direct one, byte for byte.
    expect(proxied.body.toString('utf8').replace(/"(id|created)":[^,]+,/g, '')).toBe(direct.body.toString('utf8').replace(/"(id|created)":[^,]+,/g, ''));
    const metrics = await eventually('a timeout counted', () => scrape(sidecar.adminUrl), (m) => sumValues(m, 'tokentap_dcgm_scrape_errors_total', { reason: 'timeout' }) >= 1, 15_000);
    expect(metrics.has('tokentap_gpu_memory_used_bytes')).toBe(false);
    expect(metrics.has('tokentap_gpu_utilization_ratio')).toBe(false);
    expect(exporter.maxOpen).toBe(1);
  });
});

describe('dcgm configuration', () => {
  const load = (yaml: string) => loadSettings({ flags: { config: 'tokentap.yaml' }, env: { POD_NAME: 'p', NVIDIA_VISIBLE_DEVICES: 'GPU-a,0' }, readFile: () => yaml });
  const problems = (yaml: string): string[] => {
    try {
      load(yaml);
    } catch (error) {
      if (error instanceof TokentapError) return error.message.split('\n');
      throw error;
    }
    throw new Error('expected a configuration error');
  };

  it('defaults to a 15 s interval and a 5 s timeout, and reads the pod identity from the environment', () => {
    const settings = load('dcgm:\n  url: http://10.0.0.7:9400/metrics\n');
    expect(settings.dcgm?.url.href).toBe('http://10.0.0.7:9400/metrics');
    expect(settings.dcgm?.intervalMs).toBe(15_000);
    expect(settings.dcgm?.timeoutMs).toBe(5_000);
    expect(settings.dcgm?.identity.podName).toBe('p');
    expect([...(settings.dcgm?.identity.deviceUuids ?? [])]).toEqual(['GPU-a']);
    expect([...(settings.dcgm?.identity.deviceIndexes ?? [])]).toEqual(['0']);
    expect(loadSettings({ flags: {}, env: {} }).dcgm).toBeUndefined();
  });

  it('takes the URL from TOKENTAP_DCGM_URL (the pod spec knows the node IP), keeping the file interval', () => {
    const env = { TOKENTAP_DCGM_URL: 'http://10.1.2.3:9400/metrics' };
    const fromEnv = loadSettings({ flags: { config: 'tokentap.yaml' }, env, readFile: () => 'dcgm:\n  url: http://ignored:9400/metrics\n  interval: 30s\n' });
    expect(fromEnv.dcgm?.url.href).toBe('http://10.1.2.3:9400/metrics');
    expect(fromEnv.dcgm?.intervalMs).toBe(30_000);
    expect(loadSettings({ flags: {}, env }).dcgm?.intervalMs).toBe(15_000);
    expect(() => loadSettings({ flags: {}, env: { TOKENTAP_DCGM_URL: 'node:9400' } })).toThrow(/TOKENTAP_DCGM_URL: expected an http:\/\/ or https:\/\/ URL/);
  });

  it('caps the default timeout at a shorter interval', () => {
    expect(load('dcgm:\n  url: http://10.0.0.7:9400/metrics\n  interval: 2s\n').dcgm?.timeoutMs).toBe(2_000);
  });

  it('names the file, line and key of each problem', () => {
    const found = problems('log_level: info\ndcgm:\n  url: ftp://x\n  interval: soon\n  timeout: 20s\n  port: 9400\n');
    expect(found).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/tokentap\.yaml:3: dcgm\.url: expected an http:\/\/ or https:\/\/ URL/),
        expect.stringMatching(/tokentap\.yaml:4: dcgm\.interval: expected a positive duration/),
        expect.stringMatching(/tokentap\.yaml:6: dcgm\.port: unknown setting/),
      ]),
    );
    expect(problems('dcgm:\n  url: http://x:9400/metrics\n  interval: 10s\n  timeout: 20s\n')).toEqual([
      'TOKENTAP_ERR_CONFIG_INVALID: configuration is invalid',
      '  - tokentap.yaml:4: dcgm.timeout: must not exceed the interval (10s)',
    ]);
  });
});
