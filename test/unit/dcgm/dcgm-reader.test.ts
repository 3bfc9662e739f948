import { afterEach, describe, expect, it } from 'vitest';
import { DcgmReader, type DcgmScrapeErrorReason } from '../../../src/dcgm/dcgm-reader.js';
import { createScrapeErrorCounter, registerGpuGauges } from '../../../src/dcgm/gpu-gauges.js';
import { podIdentityFromEnv } from '../../../src/dcgm/pod-identity.js';
import { Telemetry } from '../../../src/metrics/telemetry.js';
import { dcgmFixture, dcgmFixtureNames, startDcgmExporter, type ExporterBehaviour } from '../../helpers/dcgm-exporter.js';
import { parsePrometheusText, sumValues, type MetricFamily } from '../../helpers/prometheus-text.js';

const MIB = 1024 * 1024;
const H100_UUID = 'GPU-1a2b3c4d-0000-1111-2222-333344445555';
const IDLE_UUID = 'GPU-9f8e7d6c-0000-1111-2222-333344445555';
const H200_UUID = 'GPU-5e6f7a8b-0000-1111-2222-333344445555';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** Exporter, reader, gauges and counter wired as the sidecar wires them, stepped by hand. */
async function setUp(behaviour: ExporterBehaviour, env: Record<string, string>, timeoutMs = 2000) {
  const exporter = await startDcgmExporter(behaviour);
  const telemetry = new Telemetry();
  const errors: Array<[DcgmScrapeErrorReason, string]> = [];
  const count = createScrapeErrorCounter(telemetry.meter);
  const reader = new DcgmReader({
    url: new URL(exporter.url),
    intervalMs: 60_000,
    timeoutMs,
    identity: podIdentityFromEnv(env),
    onError: (reason, detail) => {
      errors.push([reason, detail]);
      count(reason);
    },
  });
  registerGpuGauges(telemetry.meter, () => reader.gpus);
  cleanups.push(async () => {
    await reader.stop();
    await exporter.close();
    await telemetry.shutdown();
  });
  const metrics = async (): Promise<Map<string, MetricFamily>> => parsePrometheusText(await telemetry.scrape());
  return { exporter, reader, errors, metrics };
}

function series(families: Map<string, MetricFamily>, name: string): Array<{ labels: Record<string, string>; value: number }> {
  return (families.get(name)?.metrics ?? []).map((s) => ({ labels: s.labels, value: Number(s.value) }));
}

function gpuSeries(families: Map<string, MetricFamily>) {
  return {
    used: series(families, 'tokentap_gpu_memory_used_bytes'),
    total: series(families, 'tokentap_gpu_memory_total_bytes'),
    util: series(families, 'tokentap_gpu_utilization_ratio'),
  };
}

const CHAT_POD = { POD_NAME: 'vllm-chat-6c9f7d8b5-x2kqp', POD_NAMESPACE: 'llm' };
const MIG_CHAT_POD = { POD_NAME: 'vllm-chat-6c9f7d8b5-m4n2r', POD_NAMESPACE: 'llm' };

describe('DCGM reader against the exporter fixtures', () => {
  it('has a test for every fixture', () => {
    expect(dcgmFixtureNames()).toEqual(['newer-exporter-mig.prom', 'no-pod-labels.prom', 'pod-mapped.prom']);
  });

  it('pod-mapped.prom: keeps its own pod GPU, in bytes, with total = used + free + reserved, and leaves the idle GPU out', async () => {
    const { reader, errors, metrics } = await setUp({ kind: 'text', body: dcgmFixture('pod-mapped.prom') }, CHAT_POD);
    await reader.scrapeOnce();
    expect(errors).toEqual([]);
    const { used, total, util } = gpuSeries(await metrics());
    expect(used).toEqual([{ labels: { gpu: '0', uuid: H100_UUID }, value: 72870 * MIB }]);
    expect(total).toEqual([{ labels: { gpu: '0', uuid: H100_UUID }, value: (72870 + 8134 + 555) * MIB }]);
    expect(util).toEqual([{ labels: { gpu: '0', uuid: H100_UUID }, value: 0.87 }]);
    expect(JSON.stringify([...used, ...total, ...util])).not.toContain(IDLE_UUID);
    expect(reader.memoryUsedBytes()).toBe(72870 * MIB);
  });

  it('pod-mapped.prom: reads exported_pod / exported_namespace when a relabelling hop renamed the pod labels', async () => {
    const renamed = dcgmFixture('pod-mapped.prom').replaceAll('namespace="', 'exported_namespace="').replaceAll(',pod="', ',exported_pod="');
    expect(renamed).toContain('exported_pod="vllm-chat-6c9f7d8b5-x2kqp"');
    const { reader, errors, metrics } = await setUp({ kind: 'text', body: renamed }, CHAT_POD);
    await reader.scrapeOnce();
    expect(errors).toEqual([]);
    expect(gpuSeries(await metrics()).used).toEqual([{ labels: { gpu: '0', uuid: H100_UUID }, value: 72870 * MIB }]);
  });

  it('pod-mapped.prom: a pod of the same name in another namespace is not ours', async () => {
    const { reader, errors, metrics } = await setUp({ kind: 'text', body: dcgmFixture('pod-mapped.prom') }, { ...CHAT_POD, POD_NAMESPACE: 'other' });
    await reader.scrapeOnce();
    expect(errors.map(([reason]) => reason)).toEqual(['no_match']);
    const families = await metrics();
    expect(gpuSeries(families)).toEqual({ used: [], total: [], util: [] });
    expect(sumValues(families, 'tokentap_dcgm_scrape_errors_total', { reason: 'no_match' })).toBe(1);
  });

  it('newer-exporter-mig.prom: keeps only its own MIG instance (lower-case hostname), with utilisation on the physical GPU', async () => {
    const { reader, errors, metrics } = await setUp({ kind: 'text', body: dcgmFixture('newer-exporter-mig.prom') }, MIG_CHAT_POD);
    await reader.scrapeOnce();
    // The blank value sits on DCGM_FI_DEV_MEMORY_TEMP, a field tokentap does not read.
    expect(errors).toEqual([]);
    const { used, total, util } = gpuSeries(await metrics());
    const instance = { gpu: '0', uuid: H200_UUID, gpu_instance: '2', gpu_profile: '3g.71gb' };
    expect(used).toEqual([{ labels: instance, value: 65300 * MIB }]);
    expect(total).toEqual([{ labels: instance, value: (65300 + 5120 + 600) * MIB }]);
    expect(util).toEqual([{ labels: { gpu: '0', uuid: H200_UUID }, value: 0.92 }]);
  });

  it('newer-exporter-mig.prom: the other pod on the same GPU sees its own instance, not ours', async () => {
    const { reader, metrics } = await setUp({ kind: 'text', body: dcgmFixture('newer-exporter-mig.prom') }, { POD_NAME: 'vllm-rag-5f7d9c6b4-q8wzt', POD_NAMESPACE: 'llm' });
    await reader.scrapeOnce();
    expect(gpuSeries(await metrics()).used).toEqual([{ labels: { gpu: '0', uuid: H200_UUID, gpu_instance: '1', gpu_profile: '3g.71gb' }, value: 50200 * MIB }]);
  });

  it('newer-exporter-mig.prom: a blank value on a field it reads makes that gauge absent and counts a sentinel error', async () => {
    const body = dcgmFixture('newer-exporter-mig.prom').replace(/(DCGM_FI_DEV_FB_USED\{[^}]*pod="vllm-chat-6c9f7d8b5-m4n2r"\}) 65300/, '$1 9223372036854775794');
    expect(body).toContain('9223372036854775794\n# HELP DCGM_FI_DEV_FB_RESERVED');
    const { reader, errors, metrics } = await setUp({ kind: 'text', body }, MIG_CHAT_POD);
    await reader.scrapeOnce();
    expect(errors.map(([reason]) => reason)).toEqual(['sentinel']);
    const families = await metrics();
    const { used, total, util } = gpuSeries(families);
    expect(used).toEqual([]);
    expect(total).toEqual([]);
    expect(util).toEqual([{ labels: { gpu: '0', uuid: H200_UUID }, value: 0.92 }]);
    expect(sumValues(families, 'tokentap_dcgm_scrape_errors_total', { reason: 'sentinel' })).toBe(1);
  });

  it('newer-exporter-mig.prom: the 32-bit blank value (2147483632) is unknown too', async () => {
    const body = dcgmFixture('newer-exporter-mig.prom').replace(/(DCGM_FI_DEV_GPU_UTIL\{[^}]*\}) 92/, '$1 2147483632');
    const { reader, errors, metrics } = await setUp({ kind: 'text', body }, MIG_CHAT_POD);
    await reader.scrapeOnce();
    expect(errors.map(([reason]) => reason)).toEqual(['sentinel']);
    const { used, util } = gpuSeries(await metrics());
    expect(util).toEqual([]);
    expect(used).toHaveLength(1);
  });

  it('no-pod-labels.prom: falls back to its GPU by UUID from NVIDIA_VISIBLE_DEVICES, and a real zero stays zero', async () => {
    const { reader, errors, metrics } = await setUp({ kind: 'text', body: dcgmFixture('no-pod-labels.prom') }, { ...CHAT_POD, NVIDIA_VISIBLE_DEVICES: `${H100_UUID}` });
    await reader.scrapeOnce();
    expect(errors).toEqual([]);
    const { used, total, util } = gpuSeries(await metrics());
    expect(used).toEqual([{ labels: { gpu: '0', uuid: H100_UUID }, value: 0 }]);
    expect(total).toEqual([{ labels: { gpu: '0', uuid: H100_UUID }, value: (0 + 45459 + 608) * MIB }]);
    // The fixture has no utilisation series: absent, not zero.
    expect(util).toEqual([]);
  });

  it('no-pod-labels.prom: a host GPU index in NVIDIA_VISIBLE_DEVICES matches the gpu label', async () => {
    const { reader, metrics } = await setUp({ kind: 'text', body: dcgmFixture('no-pod-labels.prom') }, { NVIDIA_VISIBLE_DEVICES: '0' });
    await reader.scrapeOnce();
    expect(gpuSeries(await metrics()).used).toEqual([{ labels: { gpu: '0', uuid: H100_UUID }, value: 0 }]);
  });

  it('no-pod-labels.prom: NVIDIA_VISIBLE_DEVICES=all claims no GPU (it is a CUDA image default, not an assignment)', async () => {
    const { reader, errors, metrics } = await setUp({ kind: 'text', body: dcgmFixture('no-pod-labels.prom') }, { ...CHAT_POD, NVIDIA_VISIBLE_DEVICES: 'all' });
    await reader.scrapeOnce();
    expect(errors.map(([reason]) => reason)).toEqual(['no_match']);
    expect(gpuSeries(await metrics()).used).toEqual([]);
  });
});

/** `n` GPUs of the chat pod, one FB_USED line each (1000 MiB), with `labels(i)` for the i-th. */
function podGpus(n: number, labels: (i: number) => string): string {
  const lines = ['# TYPE DCGM_FI_DEV_FB_USED gauge'];
  for (let i = 0; i < n; i++) lines.push(`DCGM_FI_DEV_FB_USED{${labels(i)},namespace="llm",pod="${CHAT_POD.POD_NAME}"} 1000`);
  return `${lines.join('\n')}\n`;
}

describe('DCGM reader against a hostile exporter', () => {
  it('refuses a scrape naming more GPUs for this pod than a node holds (bad_text), and the gauges keep their labels on the next good scrape', async () => {
    const { exporter, reader, errors, metrics } = await setUp({ kind: 'text', body: podGpus(2_100, (i) => `gpu="${i}",UUID="GPU-flood-${i}"`) }, CHAT_POD);
    await reader.scrapeOnce();
    expect(errors.map(([reason]) => reason)).toEqual(['bad_text']);
    expect(errors[0]?.[1]).toContain('2100 GPU series for this pod, more than the 256');
    expect(gpuSeries(await metrics()).used).toEqual([]);
    // Had they been observed, the SDK's 2,000 label sets per instrument would be spent for good.
    exporter.serve({ kind: 'text', body: podGpus(2, (i) => `gpu="${i}",UUID="GPU-real-${i}"`) });
    await reader.scrapeOnce();
    const used = gpuSeries(await metrics()).used;
    expect(used.map((s) => s.labels.uuid)).toEqual(['GPU-real-0', 'GPU-real-1']);
    expect(used.map((s) => s.value)).toEqual([1000 * MIB, 1000 * MIB]);
  });

  it('skips a GPU series whose labels hold a control character or run past 128 characters (bad_text), and reads the others', async () => {
    const labels = (i: number): string =>
      i === 0 ? 'gpu="0",UUID="GPU-good"' : i === 1 ? 'gpu="1",UUID="GPU-x",GPU_I_ID="1",GPU_I_PROFILE="p\u001b[31mRED"' : `gpu="2",UUID="GPU-${'u'.repeat(10_000)}"`;
    const { reader, errors, metrics } = await setUp({ kind: 'text', body: podGpus(3, labels) }, CHAT_POD);
    await reader.scrapeOnce();
    expect(errors.map(([reason]) => reason)).toEqual(['bad_text']);
    expect(errors[0]?.[1]).toContain('2 GPU series of this pod skipped');
    const used = gpuSeries(await metrics()).used;
    expect(used.map((s) => s.labels.uuid)).toEqual(['GPU-good']);
    expect(reader.memoryUsedBytes()).toBe(1000 * MIB);
  });

  it('skips a GPU series whose labels hold a bidirectional control (bad_text): the status page and the gauges would show its figures reversed (review reproduction: GPU_I_PROFILE "\\u202e" and 60 "x")', async () => {
    const labels = (i: number): string => (i === 0 ? 'gpu="0",UUID="GPU-good"' : `gpu="${i}",UUID="GPU-x${i}",GPU_I_ID="1",GPU_I_PROFILE="${['\u202e', '\u2066', '\u200f', '\u061c'][i - 1]}${'x'.repeat(60)}"`);
    const { reader, errors, metrics } = await setUp({ kind: 'text', body: podGpus(5, labels) }, CHAT_POD);
    await reader.scrapeOnce();
    expect(errors.map(([reason]) => reason)).toEqual(['bad_text']);
    expect(errors[0]?.[1]).toContain('4 GPU series of this pod skipped');
    expect(gpuSeries(await metrics()).used.map((s) => s.labels.uuid)).toEqual(['GPU-good']);
  });

  it('gives the gauges at most 1,024 GPU label sets over its life: an exporter renaming its GPUs every scrape never makes an unlabelled overflow series, and the error says to restart', async () => {
    const real = podGpus(2, (i) => `gpu="${i}",UUID="GPU-real-${i}"`);
    const { exporter, reader, errors, metrics } = await setUp({ kind: 'text', body: real }, CHAT_POD);
    await reader.scrapeOnce();
    // 9 scrapes of 250 new names each: 2,250 label sets, past the SDK's 2,000 per gauge.
    for (let round = 0; round < 9; round++) {
      exporter.serve({ kind: 'text', body: podGpus(250, (i) => `gpu="${i}",UUID="GPU-renamed-${round}-${i}"`) });
      await reader.scrapeOnce();
      // Every series keeps its labels: none is the SDK's overflow series, whose value a per-pod sum would add.
      expect(gpuSeries(await metrics()).used.filter((s) => s.labels.uuid === undefined)).toEqual([]);
    }
    // 2 + 4 x 250 fit; the fifth round is cut at 1,024, then every renamed series is refused.
    expect(errors.map(([reason]) => reason)).toEqual(['bad_text', 'bad_text', 'bad_text', 'bad_text', 'bad_text']);
    expect(errors[0]?.[1]).toContain('228 GPU series of this pod skipped: their labels would make more than 1024 distinct GPU label sets since start');
    expect(errors[0]?.[1]).toContain('restart tokentap to read them');
    expect(errors[4]?.[1]).toContain('250 GPU series of this pod skipped');
    expect(gpuSeries(await metrics()).used).toEqual([]);
    exporter.serve({ kind: 'text', body: real });
    await reader.scrapeOnce();
    const text = await metrics();
    const used = gpuSeries(text).used;
    expect(used.map((s) => s.labels)).toEqual([
      { gpu: '0', uuid: 'GPU-real-0' },
      { gpu: '1', uuid: 'GPU-real-1' },
    ]);
    expect(used.map((s) => s.value)).toEqual([1000 * MIB, 1000 * MIB]);
    expect(sumValues(text, 'tokentap_dcgm_scrape_errors_total', { reason: 'bad_text' })).toBe(5);
  });
});

describe('DCGM reader when the exporter fails', () => {
  it('exporter down: gauges that were present go absent and unreachable is counted', async () => {
    const { exporter, reader, errors, metrics } = await setUp({ kind: 'text', body: dcgmFixture('pod-mapped.prom') }, CHAT_POD);
    await reader.scrapeOnce();
    expect(gpuSeries(await metrics()).used).toHaveLength(1);
    await exporter.close();
    await reader.scrapeOnce();
    const families = await metrics();
    expect(gpuSeries(families)).toEqual({ used: [], total: [], util: [] });
    expect(errors.map(([reason]) => reason)).toEqual(['unreachable']);
    expect(errors[0]?.[1]).toContain(exporter.url);
    expect(sumValues(families, 'tokentap_dcgm_scrape_errors_total', { reason: 'unreachable' })).toBe(1);
    expect(reader.memoryUsedBytes()).toBeUndefined();
  });

  it('bad text: nothing is read from a garbled body, the error names the line, and bad_text is counted', async () => {
    const good = dcgmFixture('pod-mapped.prom');
    const garbled = good.replace('DCGM_FI_DEV_FB_USED{gpu="1"', 'DCGM_FI_DEV_FB_USED{gpu="1');
    const { exporter, reader, errors, metrics } = await setUp({ kind: 'text', body: good }, CHAT_POD);
    await reader.scrapeOnce();
    exporter.serve({ kind: 'text', body: garbled });
    await reader.scrapeOnce();
    expect(errors.map(([reason]) => reason)).toEqual(['bad_text']);
    expect(errors[0]?.[1]).toMatch(/line 8: /);
    const families = await metrics();
    expect(gpuSeries(families)).toEqual({ used: [], total: [], util: [] });
    expect(sumValues(families, 'tokentap_dcgm_scrape_errors_total', { reason: 'bad_text' })).toBe(1);
  });

  it('an HTTP error status counts http_status; the next good scrape brings the gauges back', async () => {
    const { exporter, reader, errors, metrics } = await setUp({ kind: 'status', status: 503 }, CHAT_POD);
    await reader.scrapeOnce();
    expect(errors.map(([reason]) => reason)).toEqual(['http_status']);
    expect(gpuSeries(await metrics()).used).toEqual([]);
    exporter.serve({ kind: 'text', body: dcgmFixture('pod-mapped.prom') });
    await reader.scrapeOnce();
    expect(gpuSeries(await metrics()).used).toHaveLength(1);
  });

  it('a hanging exporter times out, and the timer never has two scrapes open at once', async () => {
    const exporter = await startDcgmExporter({ kind: 'hang' });
    const errors: DcgmScrapeErrorReason[] = [];
    const reader = new DcgmReader({
      url: new URL(exporter.url),
      intervalMs: 20,
      timeoutMs: 150,
      identity: podIdentityFromEnv(CHAT_POD),
      onError: (reason) => errors.push(reason),
    });
    cleanups.push(async () => {
      await reader.stop();
      await exporter.close();
    });
    reader.start();
    const deadline = performance.now() + 10_000;
    while (errors.length < 3 && performance.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    await reader.stop();
    expect(errors.slice(0, 3)).toEqual(['timeout', 'timeout', 'timeout']);
    expect(exporter.requests).toBeGreaterThanOrEqual(3);
    expect(exporter.maxOpen).toBe(1);
  });
});
