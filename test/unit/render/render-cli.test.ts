import { mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { main } from '../../../src/cli/main.js';
import { parseRenderFlags } from '../../../src/cli/render.js';
import { TokentapError } from '../../../src/errors.js';

function io() {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  let out = '';
  let err = '';
  stdout.on('data', (c: Buffer) => (out += c.toString()));
  stderr.on('data', (c: Buffer) => (err += c.toString()));
  return { streams: { stdout, stderr, env: {} }, out: () => out, err: () => err };
}

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tokentap-render-cli-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const CONFIG = 'workloads:\n  - name: chat\n    match: { path: /v1/chat/completions }\n    slo: { objective: 0.99, ttft: 200ms }\n  - name: default\nalerts:\n  grafana_url: https://grafana.acme.internal\n  runbook_base_url: https://runbooks.acme.internal/tokentap\n';

describe('tokentap render', () => {
  it('writes the rules, the PrometheusRule, the Alertmanager routes and AlertmanagerConfig and the dashboards where asked', async () => {
    await writeFile(join(dir, 'tokentap.yaml'), CONFIG);
    const console = io();
    const code = await main(['render', '--config', join(dir, 'tokentap.yaml'), '--out', join(dir, 'out'), '--dashboards-out', join(dir, 'dash')], console.streams);
    expect(console.err()).toBe('');
    expect(code).toBe(0);
    expect((await readdir(join(dir, 'out', 'prometheus'))).sort()).toEqual(['prometheusrule.yaml', 'rules.yaml']);
    expect((await readdir(join(dir, 'out', 'alertmanager'))).sort()).toEqual(['alertmanagerconfig.yaml', 'tokentap-routes.yaml']);
    expect((await readdir(join(dir, 'dash'))).every((f) => f.endsWith('.json'))).toBe(true);
    expect(await readFile(join(dir, 'out', 'prometheus', 'rules.yaml'), 'utf8')).toContain('workload="chat"');
    expect(console.out()).toContain(`wrote ${join(dir, 'out', 'prometheus', 'rules.yaml')}\n`);
  });

  it('puts dashboards under OUT/grafana unless told otherwise', () => {
    expect(parseRenderFlags(['--config', 'c.yaml', '--out', 'deploy']).dashboardsOut).toBe(join('deploy', 'grafana'));
  });

  it('refuses a bad config like serve does, naming the place, and writes nothing', async () => {
    await writeFile(join(dir, 'bad.yaml'), 'workloads:\n  - name: chat\n    slo: { objective: 1.5, ttft: 200ms }\n');
    const console = io();
    const code = await main(['render', '--config', join(dir, 'bad.yaml'), '--out', join(dir, 'out')], console.streams);
    expect(code).toBe(1);
    expect(console.err()).toContain(`${join(dir, 'bad.yaml')}:3: workloads[0].slo.objective:`);
    expect(await readdir(dir)).toEqual(['bad.yaml']);
  });

  it('refuses a config without alerts.grafana_url or alerts.runbook_base_url, naming the file and each key, and writes nothing', async () => {
    await writeFile(join(dir, 'no-links.yaml'), CONFIG.replace(/alerts:\n(.*\n)+/, ''));
    const console = io();
    const code = await main(['render', '--config', join(dir, 'no-links.yaml'), '--out', join(dir, 'out')], console.streams);
    expect(code).toBe(1);
    expect(console.err()).toContain(`${join(dir, 'no-links.yaml')}: alerts.grafana_url: required by tokentap render`);
    expect(console.err()).toContain(`${join(dir, 'no-links.yaml')}: alerts.runbook_base_url: required by tokentap render`);
    expect(await readdir(dir)).toEqual(['no-links.yaml']);
  });

  // Reproduction (issue 22 item 3): check said "valid" for a file render then refused for its missing grafana_url.
  it('is refused exactly what check reports: the same lines for a config check calls valid for serve', async () => {
    for (const [name, yaml] of [
      ['no-grafana.yaml', CONFIG.replace(/  grafana_url: .*\n/, '')],
      ['no-runbooks.yaml', CONFIG.replace(/  runbook_base_url: .*\n/, '')],
      ['no-links.yaml', CONFIG.replace(/alerts:\n(.*\n)+/, '')],
    ] as const) {
      const file = join(dir, name);
      await writeFile(file, yaml);
      const rendered = io();
      expect(await main(['render', '--config', file, '--out', join(dir, 'out')], rendered.streams)).toBe(1);
      const checked = io();
      expect(await main(['check', '--config', file], checked.streams)).toBe(1);
      // render lists the problems of its error as "  - PROBLEM"; check prints each as it is.
      const renderLines = rendered.err().trimEnd().split('\n').flatMap((line) => (line.startsWith(`  - ${file}: alerts.`) ? [line.slice(4)] : []));
      expect(renderLines.length, name).toBeGreaterThan(0);
      expect(checked.err().trimEnd().split('\n'), name).toEqual([...renderLines, `${file}: valid for serve, but tokentap render would refuse it; for a file only the sidecar reads: tokentap check --serve-only (${renderLines.length} problem${renderLines.length === 1 ? '' : 's'})`]);
      expect(checked.out()).toBe('');
      const serveOnly = io();
      expect(await main(['check', '--config', file, '--serve-only'], serveOnly.streams), name).toBe(0);
      expect(serveOnly.out()).toContain(`${file}: valid;`);
    }
  });

  // Newcomer report: the README's render of the example config wrote every link to ORG and example.com without a word.
  it.each([
    ['grafana_url', 'https://grafana.example.com', 'https://grafana.acme.internal'],
    ['grafana_url', 'https://example.org', 'https://grafana.acme.internal'],
    ['runbook_base_url', 'https://github.com/ORG/tokentap/blob/main/docs/runbooks', 'https://runbooks.acme.internal/tokentap'],
    ['runbook_base_url', 'https://wiki.example/runbooks', 'https://runbooks.acme.internal/tokentap'],
  ])('warns, in render and in check, that alerts.%s %s is a placeholder every alert would link to, and writes the files', async (key, placeholder, real) => {
    const file = join(dir, 'placeholder.yaml');
    await writeFile(file, CONFIG.replace(real, placeholder));
    const warning = `${file}: warning: alerts.${key}: ${placeholder} is the documentation's placeholder`;
    const rendered = io();
    expect(await main(['render', '--config', file, '--out', join(dir, 'out')], rendered.streams)).toBe(0);
    expect(rendered.err()).toContain(warning);
    expect(await readdir(join(dir, 'out', 'prometheus'))).toHaveLength(2);
    const checked = io();
    expect(await main(['check', '--config', file], checked.streams)).toBe(0);
    expect(checked.err()).toContain(warning);
    const serveOnly = io();
    expect(await main(['check', '--config', file, '--serve-only'], serveOnly.streams)).toBe(0);
    expect(serveOnly.err()).toBe('');
  });

  it('does not take a host that merely contains "example" for a placeholder', async () => {
    const file = join(dir, 'real.yaml');
    await writeFile(file, CONFIG.replace('https://grafana.acme.internal', 'https://grafana.myexample.com'));
    const checked = io();
    expect(await main(['check', '--config', file], checked.streams)).toBe(0);
    expect(checked.err()).toBe('');
  });

  it.each([
    [['--out', 'x'], '--config FILE is required'],
    [['--config', 'c.yaml'], '--out DIR is required'],
    [['--config', 'c.yaml', '--out', 'x', '--window-scale', '0'], '--window-scale: expected a number greater than 0 and at most 1, got "0"'],
    [['--config', 'c.yaml', '--out', 'x', '--window-scale', 'fast'], '--window-scale: expected a number greater than 0 and at most 1, got "fast"'],
  ])('refuses %j: %s', (argv, problem) => {
    expect(() => parseRenderFlags(argv)).toThrow(TokentapError);
    try {
      parseRenderFlags(argv);
    } catch (error) {
      expect((error as TokentapError).problems).toContain(problem);
    }
  });

  it('prints its usage with --help and exits 0', async () => {
    const console = io();
    expect(await main(['render', '--help'], console.streams)).toBe(0);
    expect(console.out()).toContain('--window-scale X');
    expect(console.out()).toContain('--dashboards-out DIR2');
  });
});
