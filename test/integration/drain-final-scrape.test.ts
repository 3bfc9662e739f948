import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { parsePrometheusText, sumValues } from '../helpers/prometheus-text.js';
import { startServeProcess } from '../helpers/serve-process.js';
import { eventually } from '../helpers/sidecar.js';

/**
 * The last scrape of a draining pod. Prometheus scrapes every 15 s (deploy/kubernetes/base/
 * podmonitor.yaml); a stream that ends during the drain is recorded after the last scrape before
 * it, and when the admin listener closes as soon as the drain ends, no scrape ever reads it: every
 * rolling update loses from Prometheus the requests its drain finished (the longest ones). With
 * `final_scrape_wait`, /metrics keeps answering after the drain until one scrape has read the final
 * counts (then the process exits at once), or until the wait is over. The built CLI, real signals.
 */

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

let simulator: RunningSimulator;
beforeAll(async () => {
  simulator = await startSimulator({ port: 0, ttftMs: 20 });
  return () => simulator.close();
});

function configFile(text: string): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'tokentap-final-scrape-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'tokentap.yaml');
  writeFileSync(file, text);
  return file;
}

const drained = (logs: Array<Record<string, unknown>>) => logs.some((l) => l.msg === 'tokentap drained');

async function streamToTheEnd(proxy: string): Promise<string> {
  const response = await fetch(`${proxy}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-sim-itl-ms': '50', 'x-sim-output-tokens': '20' },
    body: JSON.stringify({ model: 'sim-model', stream: true, messages: [{ role: 'user', content: 'last scrape' }] }),
  });
  return response.text();
}

describe('the final scrape after the drain', () => {
  it('reads a stream that ended during the drain, and the process exits right after it', async () => {
    const serve = await startServeProcess(simulator.url, ['--drain-timeout', '20s', '--config', configFile('final_scrape_wait: 60s\n')]);
    cleanups.push(serve.kill);
    const body = streamToTheEnd(serve.proxy);
    await eventually('the stream to be in flight', () => fetch(`${serve.admin}/metrics`).then((r) => r.text()), (text) => /tokentap_requests_in_flight\S* 1\b/.test(text));
    serve.child.kill('SIGTERM');
    expect(await body).toContain('data: [DONE]');
    await eventually('the drain to end', () => drained(serve.logs()), (x) => x);

    // Later than the drain's end, as a scrape every 15 s would be.
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const scrapedAt = performance.now();
    const scrape = await fetch(`${serve.admin}/metrics`);
    expect(scrape.status).toBe(200);
    const families = parsePrometheusText(await scrape.text());
    expect(sumValues(families, 'tokentap_requests_total', { outcome: 'completed' })).toBe(1);

    const exit = await serve.exit;
    expect(exit.code).toBe(0);
    // Right after that scrape, not at the end of the 60 s wait.
    expect(exit.atMs - scrapedAt).toBeLessThan(20_000);
    expect(serve.logs().find((l) => l.msg === 'final scrape served: exiting')).toBeDefined();
  }, 60_000);

  it('waits no longer than final_scrape_wait when no scrape comes, and exits 0', async () => {
    const serve = await startServeProcess(simulator.url, ['--drain-timeout', '20s', '--config', configFile('final_scrape_wait: 2s\n')]);
    cleanups.push(serve.kill);
    const signalledAt = performance.now();
    serve.child.kill('SIGTERM');
    const exit = await serve.exit;
    expect(exit.code).toBe(0);
    // The wait is served in full (nothing scraped), and bounded.
    expect(exit.atMs - signalledAt).toBeGreaterThanOrEqual(2_000);
    expect(exit.atMs - signalledAt).toBeLessThan(15_000);
    expect(serve.logs().find((l) => l.msg === 'no scrape within final_scrape_wait: the counts recorded since the last scrape reach Prometheus only through OTLP')).toMatchObject({ final_scrape_wait_ms: 2_000 });
  }, 60_000);

  it('takes the wait from --final-scrape-wait over the file, as a pod spec sets it', async () => {
    const serve = await startServeProcess(simulator.url, ['--drain-timeout', '20s', '--config', configFile('final_scrape_wait: 60s\n'), '--final-scrape-wait', '2s']);
    cleanups.push(serve.kill);
    serve.child.kill('SIGTERM');
    const exit = await serve.exit;
    expect(exit.code).toBe(0);
    expect(serve.logs().find((l) => l.msg === 'no scrape within final_scrape_wait: the counts recorded since the last scrape reach Prometheus only through OTLP')).toMatchObject({ final_scrape_wait_ms: 2_000 });
  }, 60_000);

  it('is off by default: the admin listener closes as soon as the drain ends', async () => {
    const serve = await startServeProcess(simulator.url, ['--drain-timeout', '20s']);
    cleanups.push(serve.kill);
    const signalledAt = performance.now();
    serve.child.kill('SIGTERM');
    const exit = await serve.exit;
    expect(exit.code).toBe(0);
    expect(exit.atMs - signalledAt).toBeLessThan(10_000);
    expect(serve.logs().some((l) => typeof l.msg === 'string' && /scrape/.test(l.msg))).toBe(false);
  }, 60_000);
});
