import { execFile } from 'node:child_process';
import { copyFile, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadSettings, type Settings } from '../../src/config/load.js';
import { renderArtefacts } from '../../src/render/artefacts.js';

/**
 * The rendered rules under the real tools: `promtool check rules`, `amtool check-config`, and the
 * `promtool test rules` unit tests beside this file (*.promtool.yaml), run against rules rendered
 * from ./tokentap.yaml. Each test file names `rules.yaml`; it is run from a temporary directory
 * holding a copy of it and the freshly rendered rules.
 */
const HERE = fileURLToPath(new URL('.', import.meta.url));

interface Run {
  code: number;
  output: string;
}

function run(command: string, args: string[], cwd: string): Promise<Run> {
  return new Promise((resolve) => {
    execFile(command, args, { cwd, timeout: 60_000 }, (error, stdout, stderr) => {
      const code = error === null ? 0 : typeof error.code === 'number' ? error.code : -1;
      resolve({ code, output: `${stdout}${stderr}` });
    });
  });
}

const settingsFrom = (yaml: string): Settings => loadSettings({ flags: { config: 'tokentap.yaml' }, env: {}, readFile: () => yaml });

/** A temporary directory with the rendered artefacts flat in it and copies of the promtool test files. */
async function renderInto(settings: Settings): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'tokentap-promtool-'));
  for (const artefact of renderArtefacts(settings, { windowScale: 1 })) {
    if (artefact.root === 'out') await writeFile(join(dir, artefact.path.split('/').pop() as string), artefact.content);
  }
  for (const file of await readdir(HERE)) if (file.endsWith('.promtool.yaml')) await copyFile(join(HERE, file), join(dir, file));
  return dir;
}

let dir: string;
let configYaml: string;

beforeAll(async () => {
  const { readFile } = await import('node:fs/promises');
  configYaml = await readFile(join(HERE, 'tokentap.yaml'), 'utf8');
  dir = await renderInto(settingsFrom(configYaml));
});

afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('rendered rules under promtool and amtool', () => {
  it('pass promtool check rules', async () => {
    const result = await run('promtool', ['check', 'rules', 'rules.yaml'], dir);
    expect(result.output).toMatch(/SUCCESS: \d+ rules found/);
    expect(result.code, result.output).toBe(0);
  });

  it('come with an Alertmanager example that passes amtool check-config', async () => {
    const result = await run('amtool', ['check-config', 'alertmanager.yaml'], dir);
    expect(result.output).toContain('SUCCESS');
    expect(result.output).toContain('1 inhibit rules');
    expect(result.code, result.output).toBe(0);
  });

  it.each(['burn-rate.promtool.yaml', 'p99-ttft.promtool.yaml', 'traffic-guard.promtool.yaml', 'namespaces.promtool.yaml'])('pass the promtool unit tests in %s', async (file) => {
    const result = await run('promtool', ['test', 'rules', file], dir);
    expect(result.code, result.output).toBe(0);
    expect(result.output).toContain('SUCCESS');
  });

  it('fail those unit tests when the rules change (an objective of 70 % cannot page at 20 % bad)', async () => {
    const loose = await renderInto(settingsFrom(configYaml.replace('slo: { objective: 0.99, ttft: 200ms, itl: 50ms }', 'slo: { objective: 0.7, ttft: 200ms, itl: 50ms }')));
    try {
      const result = await run('promtool', ['test', 'rules', 'burn-rate.promtool.yaml'], loose);
      expect(result.code).not.toBe(0);
      expect(result.output).toContain('20 % of chat requests slower than 200ms for an hour pages');
    } finally {
      await rm(loose, { recursive: true, force: true });
    }
  });

  /** Runs namespaces.promtool.yaml against the rendered rules.yaml after `edit`. */
  async function namespaceTestsWith(edit: (rules: string) => string): Promise<Run> {
    const edited = await renderInto(settingsFrom(configYaml));
    try {
      const { readFile } = await import('node:fs/promises');
      const rules = await readFile(join(edited, 'rules.yaml'), 'utf8');
      const changed = edit(rules);
      expect(changed).not.toBe(rules);
      await writeFile(join(edited, 'rules.yaml'), changed);
      return await run('promtool', ['test', 'rules', 'namespaces.promtool.yaml'], edited);
    } finally {
      await rm(edited, { recursive: true, force: true });
    }
  }

  it('fail the namespace tests when the rules aggregate by workload alone, as they once did', async () => {
    const result = await namespaceTestsWith((rules) => rules.replace(/\b(by|on) \(namespace, /g, '$1 ('));
    expect(result.code).not.toBe(0);
    expect(result.output).toContain('a slow prod chat pages for namespace prod only');
    expect(result.output).toContain('got: {slo="ttft", workload="chat"} 2E+02');
  });

  it('fail the namespace tests when only the traffic guard ignores the namespace', async () => {
    const result = await namespaceTestsWith((rules) => rules.replace(/and on \(namespace, workload\)\n(\s*)sum by \(namespace, workload\)/g, 'and on (workload)\n$1sum by (workload)'));
    expect(result.code).not.toBe(0);
    expect(result.output).not.toContain('a slow prod chat pages for namespace prod only');
    expect(result.output).toContain('busy healthy prod does not lift quiet slow staging over the traffic guard');
  });
});
