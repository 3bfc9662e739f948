import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadSettings } from '../../src/config/load.js';
import { renderArtefacts } from '../../src/render/artefacts.js';
import { requireTools } from '../helpers/required-tools.js';

beforeAll(() => requireTools('promtool'));

/**
 * The native-histogram variant of the rendered rules (`--histograms native`) under the Debian
 * promtool 2.42: it must parse histogram_fraction, histogram_quantile and histogram_count over native series.
 */
const HERE = fileURLToPath(new URL('.', import.meta.url));

/**
 * promtool's time, measured on the shared 2-core machine: one-page.promtool.yaml takes 6 s of CPU
 * (11 s wall at load 8), the other files 1-4 s. With two busy loops beside the suite it gets a
 * fraction of a core, so the default 30 s test timeout failed correct rules. promtool is given 120 s
 * (killed then, its output shown) and each test 150 s, so a hung promtool still fails the test.
 */
const PROMTOOL_TIMEOUT_MS = 120_000;
const PROMTOOL_TEST_TIMEOUT_MS = 150_000;

function promtool(args: string[], cwd: string): Promise<{ code: number; output: string }> {
  return new Promise((resolve) => {
    execFile('promtool', args, { cwd, timeout: PROMTOOL_TIMEOUT_MS }, (error, stdout, stderr) => {
      resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : -1, output: `${stdout}${stderr}` });
    });
  });
}

let dir: string;
let rules: string;

beforeAll(async () => {
  const yaml = await readFile(join(HERE, 'tokentap.yaml'), 'utf8');
  const settings = loadSettings({ flags: { config: 'tokentap.yaml' }, env: {}, readFile: () => yaml });
  dir = await mkdtemp(join(tmpdir(), 'tokentap-native-promtool-'));
  rules = renderArtefacts(settings, { windowScale: 1, histograms: 'native' }).find((a) => a.path === 'prometheus/rules.yaml')?.content ?? '';
  await writeFile(join(dir, 'rules.yaml'), rules);
});

afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('native rules under promtool', { timeout: PROMTOOL_TEST_TIMEOUT_MS }, () => {
  it('pass promtool check rules', async () => {
    const result = await promtool(['check', 'rules', 'rules.yaml'], dir);
    expect(result.output).toMatch(/SUCCESS: \d+ rules found/);
    expect(result.code).toBe(0);
  });

  it('read the request histograms as native series only (no _bucket, _count or _sum), and the SLIs from tokentap_slo_events_total', () => {
    expect(rules).toMatch(/histogram_quantile\(0\.99, sum by \(namespace, workload\) \(rate\(gen_ai_server_time_to_first_token_seconds\[5m\]\)\)\)/);
    expect(rules).toContain('histogram_count(sum by (namespace, workload) (increase(gen_ai_server_time_to_first_token_seconds{');
    expect(rules).not.toMatch(/_seconds_(bucket|count|sum)\b/);
    expect(rules).toContain('rate(tokentap_slo_events_total{result="bad"}');
  });
});
