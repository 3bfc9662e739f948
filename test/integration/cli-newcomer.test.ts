import { spawnSync } from 'node:child_process';
import { createServer, type Server } from 'node:net';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { main } from '../../src/cli/main.js';
import { writeAllOrNone, NODE_WRITE_OPS, type WriteOps } from '../../src/cli/write-all-or-none.js';
import { loadSettings } from '../../src/config/load.js';
import { TokentapError } from '../../src/errors.js';
import { startSimulator } from '../../src/simulator/index.js';
import { VERSION } from '../../src/version.js';
import { scrape } from '../helpers/prometheus-text.js';
import { eventually } from '../helpers/sidecar.js';

/** What a newcomer meets first: version, help, and the messages for the mistakes everyone makes once. */

function memoryStream() {
  let text = '';
  return { stream: new Writable({ write(c: Buffer, _e, cb) { text += c.toString(); cb(); } }), text: () => text };
}

async function run(argv: string[], env: Record<string, string> = {}) {
  const out = memoryStream();
  const err = memoryStream();
  const code = await main(argv, { stdout: out.stream, stderr: err.stream, env, stopped: Promise.resolve() });
  return { code, out: out.text(), err: err.text() };
}

function problemsOf(yaml: string): readonly string[] {
  try {
    loadSettings({ flags: { config: 'tokentap.yaml' }, env: {}, readFile: () => yaml });
  } catch (error) {
    return (error as TokentapError).problems;
  }
  return [];
}

const PACKAGE = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string; license: string };

describe('version and help', () => {
  it.each([['--version'], ['-v'], ['version']])('`tokentap %s` prints package.json\'s version and exits 0', async (flag) => {
    expect(await run([flag])).toEqual({ code: 0, out: `tokentap ${PACKAGE.version}\n`, err: '' });
    expect(VERSION).toBe(PACKAGE.version);
  });

  it('the bin prints the version too (as `npx tokentap --version` would)', () => {
    const result = spawnSync(process.execPath, ['bin/tokentap.js', '--version'], { encoding: 'utf8', timeout: 20_000 });
    expect([result.status, result.stdout]).toEqual([0, `tokentap ${PACKAGE.version}\n`]);
  });

  it.each([
    ['serve', /--upstream URL/],
    ['simulate', /Usage: tokentap simulate/],
    ['demo', /Usage: tokentap demo[\s\S]*--clients N/],
    ['check', /Usage: tokentap check --config FILE/],
    ['render', /Usage: tokentap render --config FILE --out DIR/],
    ['help', /Commands:[\s\S]*version/],
  ])('`tokentap %s --help` shows its usage on stdout and exits 0 without running anything', async (command, usage) => {
    for (const flag of ['--help', '-h']) {
      const result = await run([command, flag]);
      expect(result.err).toBe('');
      expect(result.code).toBe(0);
      expect(result.out).toMatch(usage);
    }
  });

  it('ships the Apache-2.0 licence package.json names', () => {
    expect(PACKAGE.license).toBe('Apache-2.0');
    const license = readFileSync(new URL('../../LICENSE', import.meta.url), 'utf8');
    expect(license).toContain('Apache License\n                           Version 2.0, January 2004');
    expect(license).toContain('END OF TERMS AND CONDITIONS');
  });
});

describe('configuration mistakes get a message that says what to do', () => {
  it('an upstream without a scheme: add http://', async () => {
    const result = await run(['serve', '--upstream', 'localhost:8000', '--listen', '127.0.0.1:0', '--admin-listen', '127.0.0.1:0']);
    expect(result.code).toBe(1);
    expect(result.err).toContain('--upstream: "localhost:8000" has no scheme: add http://, as in http://localhost:8000');
    expect(problemsOf('upstream: 127.0.0.1:8000\n')).toEqual(['tokentap.yaml:1: upstream: "127.0.0.1:8000" has no scheme: add http://, as in http://127.0.0.1:8000']);
  });

  it('an upstream with a path (http://host:8000/v1) is refused, naming the flag or key and what to write, instead of being ignored', async () => {
    const result = await run(['serve', '--upstream', 'http://127.0.0.1:8000/v1', '--listen', '127.0.0.1:0', '--admin-listen', '127.0.0.1:0']);
    const advice = 'has a path (/v1): requests keep their own path (/v1/chat/completions goes to /v1/chat/completions), so give the server alone, as in http://127.0.0.1:8000, and keep /v1 in the clients\' base URL (http://TOKENTAP_HOST:8080/v1)';
    expect(result.code).toBe(1);
    expect(result.err).toContain(`--upstream: "http://127.0.0.1:8000/v1" ${advice}`);
    expect(problemsOf('upstream: http://127.0.0.1:8000/v1\n')).toEqual([`tokentap.yaml:1: upstream: "http://127.0.0.1:8000/v1" ${advice}`]);
    expect(() => loadSettings({ flags: {}, env: { TOKENTAP_UPSTREAM: 'http://127.0.0.1:8000/v1' } })).toThrow(`TOKENTAP_UPSTREAM: "http://127.0.0.1:8000/v1" ${advice}`);
    // The server's root, with or without its slash, is what an upstream is.
    expect(problemsOf('upstream: http://127.0.0.1:8000/\n')).toEqual([]);
    expect(problemsOf('upstream: http://127.0.0.1:8000\n')).toEqual([]);
  });

  it('a duration without a unit: "a duration like 200ms"', () => {
    expect(problemsOf('workloads:\n  - name: chat\n    slo:\n      objective: 0.99\n      ttft: 200\n')).toEqual([
      'tokentap.yaml:5: workloads[0].slo.ttft: expected a duration like 200ms (a number needs a unit: ms, s, m or h), got 200',
    ]);
    expect(problemsOf('drain_timeout: 30\n')).toEqual(['tokentap.yaml:1: drain_timeout: expected a duration like 200ms (a number needs a unit: ms, s, m or h), got 30']);
  });

  it('an unknown key suggests the nearest known key of the same mapping, and nothing when none is close', () => {
    expect(problemsOf('upstrem: http://127.0.0.1:8000\n')).toEqual(['tokentap.yaml:1: upstrem: unknown setting; did you mean "upstream"?']);
    expect(problemsOf('metrics:\n  max_model: 4\n')).toEqual(['tokentap.yaml:2: metrics.max_model: unknown setting; did you mean "max_models"?']);
    expect(problemsOf('model_discovery:\n  intervall: 1m\n')).toEqual(['tokentap.yaml:2: model_discovery.intervall: unknown setting; did you mean "interval"?']);
    expect(problemsOf('colour: red\n')).toEqual(['tokentap.yaml:1: colour: unknown setting']);
  });

  it('a YAML syntax error names the line it is on, not line 1', () => {
    const yaml = ['upstream: http://127.0.0.1:8000', 'listen: 0.0.0.0:8080', 'workloads:', '  - name: chat', '    match: { path: /v1/chat/completions', '  - name: default', ''].join('\n');
    expect(problemsOf(yaml)).toEqual([expect.stringMatching(/^tokentap\.yaml:6: YAML: /)]);
    expect(problemsOf('a: 1\nb: 2\nb: 3\n')).toEqual([expect.stringMatching(/^tokentap\.yaml:3: YAML: Map keys must be unique/)]);
  });

  it('model_discovery: defaults, and the off switch', () => {
    const on = loadSettings({ flags: {}, env: {} });
    expect(on.modelDiscovery).toEqual({ paths: ['/v1/models', '/api/tags', '/info'], intervalMs: 300_000, retryMs: 15_000, timeoutMs: 2000, adapterIdleAfterMs: 300_000 });
    const off = loadSettings({ flags: { config: 'x.yaml' }, env: {}, readFile: () => 'model_discovery: { enabled: false }\n' });
    expect(off.modelDiscovery).toBeUndefined();
    const offByEnv = loadSettings({ flags: { config: 'x.yaml' }, env: { TOKENTAP_MODEL_DISCOVERY: 'off' }, readFile: () => 'model_discovery: { enabled: true }\n' });
    expect(offByEnv.modelDiscovery).toBeUndefined();
    expect(loadSettings({ flags: { config: 'x.yaml' }, env: { TOKENTAP_MODEL_DISCOVERY: 'on' }, readFile: () => 'model_discovery: { enabled: false }\n' }).modelDiscovery).toBeDefined();
    expect(() => loadSettings({ flags: {}, env: { TOKENTAP_MODEL_DISCOVERY: 'yes' } })).toThrow(/TOKENTAP_MODEL_DISCOVERY: expected on or off, got "yes"/);
    expect(problemsOf('model_discovery: { paths: [] }\n')).toEqual(['tokentap.yaml:1: model_discovery.paths: expected at least one path (or enabled: false)']);
    expect(problemsOf('model_discovery: { paths: [v1/models] }\n')).toEqual(['tokentap.yaml:1: model_discovery.paths[0]: expected a path starting with "/"']);
  });
});

describe('render writes all files or none', () => {
  const CONFIG = 'alerts: { grafana_url: https://grafana.example.com, runbook_base_url: https://runbooks.example.com/tokentap }\nworkloads:\n  - name: chat\n    slo: { objective: 0.99, ttft: 200ms }\n';

  it('leaves every earlier file as it was when one target cannot be written, and says so in plain words', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tokentap-render-all-'));
    writeFileSync(join(dir, 'tokentap.yaml'), CONFIG);
    expect((await run(['render', '--config', join(dir, 'tokentap.yaml'), '--out', join(dir, 'out')])).code).toBe(0);
    const before = readFileSync(join(dir, 'out/prometheus/rules.yaml'), 'utf8');
    writeFileSync(join(dir, 'tokentap.yaml'), CONFIG.replace('200ms', '300ms'));
    // The dashboards' directory is a file: the last files cannot be written.
    writeFileSync(join(dir, 'dash'), 'in the way');
    const result = await run(['render', '--config', join(dir, 'tokentap.yaml'), '--out', join(dir, 'out'), '--dashboards-out', join(dir, 'dash')]);
    expect(result.code).toBe(1);
    expect(result.out).toBe('');
    expect(result.err).toMatch(/TOKENTAP_ERR_WRITE[\s\S]*cannot create the directory .*dash: (a part of the path is a file, not a directory \(ENOTDIR\)|a file is in the way of the directory \(EEXIST\)); nothing was written/);
    expect(readFileSync(join(dir, 'out/prometheus/rules.yaml'), 'utf8')).toBe(before);
    expect(readdirSync(join(dir, 'out/prometheus')).sort()).toEqual(['prometheusrule.yaml', 'rules.yaml']);
  });

  it('reports a permission problem as one, and removes the files it had already written', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tokentap-render-perm-'));
    let writes = 0;
    // Tests run as root, for whom chmod stops nothing: the third write fails as EACCES would.
    const ops: WriteOps = {
      ...NODE_WRITE_OPS,
      writeFile: async (path, content) => {
        if (++writes === 3) throw Object.assign(new Error(`EACCES: permission denied, open '${path}'`), { code: 'EACCES' });
        await NODE_WRITE_OPS.writeFile(path, content);
      },
    };
    const files = ['a/one.yaml', 'a/two.yaml', 'b/three.json', 'b/four.json'].map((p) => ({ path: join(dir, p), content: p }));
    await expect(writeAllOrNone(files, ops)).rejects.toThrow(/cannot write .*three\.json: permission denied: this user may not write there \(check the directory's owner and mode, or choose another --out\) \(EACCES\); nothing was written/);
    expect([...readdirSync(join(dir, 'a')), ...readdirSync(join(dir, 'b'))]).toEqual([]);
  });
});

describe('the start-up log', () => {
  it('prints the addresses the listeners really bound (port 0 becomes the real port), and the version', async () => {
    const simulator = await startSimulator({ port: 0 });
    const out = memoryStream();
    let stop!: () => void;
    const stopped = new Promise<void>((resolve) => (stop = resolve));
    const serving = main(['serve', '--upstream', simulator.url, '--listen', '127.0.0.1:0', '--admin-listen', '127.0.0.1:0'], { stdout: out.stream, stderr: memoryStream().stream, env: { TOKENTAP_COMMIT: 'abc1234' }, stopped });
    try {
      const line = await eventually('serving line', () => out.text().split('\n').find((l) => l.includes('tokentap serving')), (l) => l !== undefined, 15_000);
      const started = JSON.parse(line as string) as { listen: string; admin_listen: string; proxy: string; admin: string; version: string };
      expect(started.listen).toMatch(/^127\.0\.0\.1:\d+$/);
      expect(started.listen).not.toBe('127.0.0.1:0');
      expect(started.admin_listen).not.toBe('127.0.0.1:0');
      expect(started.proxy).toBe(`http://${started.listen}`);
      expect(started.version).toBe(PACKAGE.version);
      const m = await scrape(started.admin);
      expect(m.get('tokentap_build_info')?.metrics).toEqual([{ labels: { version: PACKAGE.version, node_version: process.versions.node, commit: 'abc1234' }, value: '1' }]);
    } finally {
      stop();
      await serving;
      await simulator.close();
    }
  });
});

describe('npm start with a port taken', () => {
  async function holdPort(): Promise<{ server: Server; port: number }> {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return { server, port: (server.address() as { port: number }).port };
  }

  it.each([
    ['the simulator', (port: number) => ['--upstream-port', String(port)], 'simulator', 'move it with --upstream-port PORT: npm start -- --upstream-port 8001'],
    ['the proxy', (port: number) => ['--upstream-port', '0', '--listen', `127.0.0.1:${port}`], 'listen', 'move it with --listen HOST:PORT: npm start -- --listen 127.0.0.1:8081'],
    ['the admin listener', (port: number) => ['--upstream-port', '0', '--listen', '127.0.0.1:0', '--admin-listen', `127.0.0.1:${port}`], 'admin_listen', 'move it with --admin-listen HOST:PORT: npm start -- --admin-listen 127.0.0.1:9465'],
  ])('names the flag that moves %s (it said "address already in use" and no way out)', async (_what, flags, setting, hint) => {
    const held = await holdPort();
    try {
      const result = await run(['demo', ...flags(held.port)]);
      expect(result.code).toBe(1);
      expect(result.err).toContain(`${setting} 127.0.0.1:${held.port}: listen EADDRINUSE`);
      expect(result.err).toContain(hint);
    } finally {
      await new Promise((resolve) => held.server.close(resolve));
    }
  });
});

describe('npm start runs the built CLI without rebuilding it', () => {
  const PACKAGE_SCRIPTS = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { scripts: Record<string, string> }).scripts;

  /**
   * A checkout in a temporary directory: the real bin/, package.json (its engines, or `engines`) and
   * node_modules/ (linked), a stand-in dist/cli/main.js, and optionally a src/ file.
   */
  function checkout(layout: { dist: boolean; sourceAgeS?: number; engines?: string }): string {
    const root = mkdtempSync(join(tmpdir(), 'tokentap-bin-'));
    cpSync(new URL('../../bin', import.meta.url), join(root, 'bin'), { recursive: true });
    const manifest = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { engines: { node: string } };
    if (layout.engines !== undefined) manifest.engines.node = layout.engines;
    writeFileSync(join(root, 'package.json'), JSON.stringify(manifest));
    symlinkSync(fileURLToPath(new URL('../../node_modules', import.meta.url)), join(root, 'node_modules'));
    if (layout.dist) {
      mkdirSync(join(root, 'dist', 'cli'), { recursive: true });
      writeFileSync(join(root, 'dist', 'cli', 'main.js'), "export async function main(argv, io) { io.stdout.write('ran ' + argv.join(' ') + '\\n'); return 0; }\n");
      utimesSync(join(root, 'dist', 'cli', 'main.js'), new Date(Date.now() - 60_000), new Date(Date.now() - 60_000));
    }
    if (layout.sourceAgeS !== undefined) {
      mkdirSync(join(root, 'src', 'proxy'), { recursive: true });
      writeFileSync(join(root, 'src', 'proxy', 'relay.ts'), '');
      const at = new Date(Date.now() - layout.sourceAgeS * 1000);
      utimesSync(join(root, 'src', 'proxy', 'relay.ts'), at, at);
    }
    return root;
  }

  const launch = (root: string) => spawnSync(process.execPath, [join(root, 'bin', 'tokentap.js'), 'demo'], { encoding: 'utf8', timeout: 20_000 });

  it('npm start does not run the TypeScript build (it took 37 s to the banner on every run)', () => {
    expect(PACKAGE_SCRIPTS['start']).toBe('node bin/tokentap.js demo');
    expect(PACKAGE_SCRIPTS['prepare']).toBe('npm run build --silent');
  });

  it('without dist/, says to run npm run build instead of a module-not-found stack', () => {
    const result = launch(checkout({ dist: false }));
    expect([result.status, result.stdout, result.stderr]).toEqual([1, '', 'tokentap: dist/ is not built: run `npm run build` (`npm ci` runs it too), then start again\n']);
  });

  it('with a source file changed after the last build, says which and to run npm run build instead of running old code', () => {
    const result = launch(checkout({ dist: true, sourceAgeS: 0 }));
    expect([result.status, result.stdout, result.stderr]).toEqual([1, '', `tokentap: dist/ is older than src/ (${join('src', 'proxy', 'relay.ts')} changed after the last build): run \`npm run build\`, then start again\n`]);
  });

  it('on a Node the engines of package.json refuse, says which Node it needs instead of starting (on Node 18 the demo ran and every request logged a TypeError stack)', () => {
    const result = launch(checkout({ dist: true, engines: '>=99.0.0' }));
    expect([result.status, result.stdout, result.stderr]).toEqual([
      1,
      '',
      `tokentap: Node.js ${process.versions.node} cannot run tokentap: it needs >=99.0.0 (package.json "engines", the README's prerequisites). Install a supported Node.js (the current LTS, 24, is what CI and the container image run), then start again\n`,
    ]);
  });

  it('runs dist/ when it is newer than every source file, and when there is no src/ (the container image)', () => {
    for (const root of [checkout({ dist: true, sourceAgeS: 3600 }), checkout({ dist: true })]) {
      const result = launch(root);
      expect([result.status, result.stdout, result.stderr]).toEqual([0, 'ran demo\n', '']);
    }
  });
});

