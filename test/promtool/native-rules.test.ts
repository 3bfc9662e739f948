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
 * promtool 2.42: it must parse histogram_fraction and histogram_quantile over native series.
 */
const HERE = fileURLToPath(new URL('.', import.meta.url));

function promtool(args: string[], cwd: string): Promise<{ code: number; output: string }> {
  return new Promise((resolve) => {
    execFile('promtool', args, { cwd, timeout: 60_000 }, (error, stdout, stderr) => {
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

describe('native rules under promtool', () => {
  it('pass promtool check rules', async () => {
    const result = await promtool(['check', 'rules', 'rules.yaml'], dir);
    expect(result.output).toMatch(/SUCCESS: \d+ rules found/);
    expect(result.code).toBe(0);
  });

  it('read native histograms only: histogram_fraction for the SLIs, histogram_quantile without le, no _bucket series', () => {
    expect(rules).toContain('histogram_fraction(0, ');
    expect(rules).toMatch(/histogram_quantile\(0\.99, sum by \(namespace, workload\) \(rate\(gen_ai_server_time_to_first_token_seconds\[5m\]\)\)\)/);
    expect(rules).not.toContain('_bucket');
    expect(rules).not.toContain('tokentap_slo_events_total');
  });
});
