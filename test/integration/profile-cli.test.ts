import { createServer } from 'node:net';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../src/cli/main.js';
import { loadSettings } from '../../src/config/load.js';
import { createLogger } from '../../src/log/logger.js';
import { startSidecar, type RunningSidecar } from '../../src/sidecar.js';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { fencedBlocks, readDoc } from '../helpers/docs.js';
import { eventually } from '../helpers/sidecar.js';

/**
 * `tokentap profile` and the admin listener's /profile against a live sidecar with the simulator
 * upstream, configured with the YAML docs/workload-profiles.md shows, running the commands that
 * page and docs/cli.md show, as written (the documented admin address swapped for the test's).
 */
const PAGE = readDoc('docs/workload-profiles.md');
const DOCUMENTED_ADMIN = 'http://127.0.0.1:9464';

let simulator: RunningSimulator;
let sidecar: RunningSidecar;

beforeAll(async () => {
  simulator = await startSimulator({ port: 0, ttftMs: 2, itlMs: 1, outputTokens: 6 });
  const config = fencedBlocks(PAGE, 'yaml')[0] as string;
  const settings = loadSettings({ flags: { upstream: simulator.url, listen: '127.0.0.1:0', adminListen: '127.0.0.1:0', config: 'tokentap.yaml' }, env: {}, readFile: () => config });
  sidecar = await startSidecar({ ...settings, modelDiscovery: undefined }, createLogger('silent', new Writable({ write: (_c, _e, cb) => cb() })));
  const system = 'You answer questions about invoices. '.repeat(120);
  for (let i = 0; i < 8; i++) {
    const response = await fetch(`${sidecar.proxyUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-workload': i < 6 ? 'chat' : 'private' },
      body: JSON.stringify({ model: 'm', max_tokens: 6, messages: [{ role: 'system', content: system }, { role: 'user', content: `Invoice ${i}? ${'detail '.repeat(100 * (i + 1))}` }] }),
    });
    await response.text();
  }
  await eventually('the chat requests recorded', async () => (await (await fetch(`${sidecar.adminUrl}/profile/chat`)).json()) as { requests: number }, (p) => p.requests === 6);
});

afterAll(async () => {
  await sidecar?.close();
  await simulator?.close();
});

async function run(argv: readonly string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const sink = (append: (text: string) => void) => new Writable({ write: (chunk: Buffer, _e, cb) => (append(chunk.toString('utf8')), cb()) });
  const code = await main(argv, { stdout: sink((t) => (stdout += t)), stderr: sink((t) => (stderr += t)), env: {} });
  return { code, stdout, stderr };
}

/** How the pages start a command: from the checkout, as README.md does (no `tokentap` on the PATH after `npm ci`). */
const LAUNCHER = 'node bin/tokentap.js';

/** A documented command line as argv: the launcher dropped, the admin address swapped for the test's, a `> FILE` redirect dropped. */
function argvOf(line: string): string[] {
  const words = line.replace(/\s*>\s*\S+$/, '').slice(LAUNCHER.length).trim().split(/\s+/);
  expect(words[0]).toBe('profile');
  return words.map((word) => (word === DOCUMENTED_ADMIN ? sidecar.adminUrl : word));
}

describe('tokentap profile, as docs/workload-profiles.md and docs/cli.md show it', () => {
  const documented = [...fencedBlocks(PAGE, 'sh'), ...fencedBlocks(readDoc('docs/cli.md'), 'sh')]
    .flatMap((block) => block.split('\n'))
    .filter((line) => line.startsWith(`${LAUNCHER} profile `));

  it('shows the four formats and the whole set', () => {
    expect(documented.length).toBeGreaterThanOrEqual(5);
    for (const format of ['mooncake', 'guidellm', 'aiperf', 'json']) expect(documented.some((line) => line.includes(`--format ${format}`))).toBe(true);
  });

  it('prints each documented export of the live sidecar, exit 0', async () => {
    for (const line of documented) {
      const { code, stdout, stderr } = await run(argvOf(line));
      expect(stderr, line).toBe('');
      expect(code, line).toBe(0);
      if (line.includes('--format mooncake')) {
        const rows = stdout.trimEnd().split('\n').map((row) => JSON.parse(row) as { hash_ids: number[] });
        expect(rows).toHaveLength(6);
        // The shared system prompt (about 1,100 tokens): the same first two ids in every row.
        for (const row of rows) expect(row.hash_ids.slice(0, 2)).toEqual([0, 1]);
      } else if (line.includes('--format guidellm')) {
        expect(JSON.parse(stdout)).toMatchObject({ spec: { profile: { kind: 'poisson' }, data: [{ kind: 'synthetic_text' }] } });
      } else if (line.includes('--format aiperf')) {
        expect(stdout).toMatch(/^--isl \d+ --isl-stddev [\d.]+ --osl 6 --osl-stddev 0 --request-rate [\d.]+ --arrival-pattern gamma --arrival-smoothness [\d.]+\n$/);
      } else {
        const set = JSON.parse(stdout) as { mix: Record<string, number>; workloads: Array<{ workload: string }> };
        expect(set.workloads.map((w) => w.workload)).toEqual(['chat', 'default']);
        expect(set.mix).toEqual({ chat: 1, default: 0 });
      }
    }
  });
});

describe('tokentap profile refuses with the messages docs/cli.md gives', () => {
  it('needs --admin (exit 2)', async () => {
    expect(await run(['profile', '--format', 'json'])).toEqual({ code: 2, stdout: '', stderr: "tokentap: TOKENTAP_ERR_USAGE: command line is invalid\n  - profile needs --admin URL, the sidecar's admin listener (e.g. http://127.0.0.1:9464)\n" });
  });

  it('names the formats for an unknown one (exit 2)', async () => {
    expect((await run(['profile', '--admin', sidecar.adminUrl, '--format', 'csv'])).stderr).toBe('tokentap: TOKENTAP_ERR_USAGE: command line is invalid\n  - --format csv: expected one of json, guidellm, aiperf, mooncake\n');
  });

  it('refuses a --workload that is no workload name, naming the grammar (exit 2): ".." printed the status page\'s HTML as the profile, exit 0', async () => {
    for (const workload of ['..', '.', '', 'Chat']) {
      const result = await run(['profile', '--admin', sidecar.adminUrl, '--workload', workload]);
      expect(result).toEqual({
        code: 2,
        stdout: '',
        stderr: `tokentap: TOKENTAP_ERR_USAGE: command line is invalid\n  - --workload ${JSON.stringify(workload)}: expected a workload name as configured: lower-case letters, digits, "_" or "-", starting with a letter\n`,
      });
    }
    expect(readDoc('docs/cli.md')).toContain('`  - --workload "Chat": expected a workload name as configured: lower-case letters, digits, "_" or "-", starting with a letter`, exit 2');
  });

  it('says where it could not connect (exit 1)', async () => {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as { port: number }).port;
    await new Promise((resolve) => server.close(resolve));
    const result = await run(['profile', '--admin', `http://127.0.0.1:${port}`]);
    expect(result.code).toBe(1);
    expect(result.stderr).toBe(`tokentap profile: cannot reach the admin listener at http://127.0.0.1:${port} (ECONNREFUSED); is the sidecar running, and is --admin its admin_listen address?\n`);
  });

  it('passes on the sidecar\'s reason for a window longer than a day (exit 1), as docs/cli.md shows it', async () => {
    expect(await run(['profile', '--admin', sidecar.adminUrl, '--workload', 'chat', '--window', '25h'])).toEqual({
      code: 1,
      stdout: '',
      stderr: 'tokentap profile: /profile/chat: HTTP 400: window="25h": expected a duration above 0 and at most 24h, such as 10m, 90s or 2h\n',
    });
    expect(readDoc('docs/cli.md')).toContain('`tokentap profile: /profile/chat: HTTP 400: window="25h": expected a duration above 0 and at most 24h, such as 10m, 90s or 2h`, exit 1');
  });

  it('passes on the sidecar\'s reason for a workload with profile: false, and for a one-workload format asked of all (exit 1)', async () => {
    const privateOne = await run(['profile', '--admin', sidecar.adminUrl, '--workload', 'private']);
    expect(privateOne).toEqual({ code: 1, stdout: '', stderr: 'tokentap profile: /profile/private: HTTP 404: no workload-shape record for workload "private"; recorded workloads: chat, default (a workload with profile: false keeps none)\n' });
    const all = await run(['profile', '--admin', sidecar.adminUrl, '--format', 'guidellm']);
    expect(all.stderr).toBe('tokentap profile: /profile: HTTP 400: format=guidellm exports one workload: ask /profile/<workload>?format=guidellm (workloads: chat, default)\n');
  });
});

describe('GET /profile on the admin listener', () => {
  it('refuses a window that is not a duration, or longer than a day, naming what it expects (400)', async () => {
    for (const window of ['10', '0s', '25h', 'soon']) {
      const response = await fetch(`${sidecar.adminUrl}/profile/chat?window=${window}`);
      expect(response.status).toBe(400);
      expect(await response.json()).toEqual({ error: `window="${window}": expected a duration above 0 and at most 24h, such as 10m, 90s or 2h` });
    }
  });

  it('refuses a repeated or unknown format (400), and a trace of an empty window (404)', async () => {
    expect((await fetch(`${sidecar.adminUrl}/profile/chat?format=json&format=aiperf`)).status).toBe(400);
    expect((await fetch(`${sidecar.adminUrl}/profile/chat?format=yaml`)).status).toBe(400);
    const empty = await fetch(`${sidecar.adminUrl}/profile/default?format=mooncake`);
    expect(empty.status).toBe(404);
    expect(((await empty.json()) as { error: string }).error).toMatch(/^no request of workload "default" in the window reported both its input and output tokens/);
  });

  it('refuses a query parameter it does not take, naming it, rather than answering the default window (was: ?windw=1h answered 10 minutes, 200)', async () => {
    for (const [query, name] of [['windw=1h', 'windw'], ['window[]=1h', 'window[]'], ['format=json&workload=chat', 'workload']] as const) {
      for (const path of ['/profile', '/profile/chat']) {
        const response = await fetch(`${sidecar.adminUrl}${path}?${query}`);
        expect(response.status, `${path}?${query}`).toBe(400);
        expect(await response.json()).toEqual({ error: `unknown query parameter ${JSON.stringify(name)}: ${path === '/profile' ? '/profile' : '/profile/<workload>'} takes format and window (docs/workload-profiles.md)` });
      }
    }
  });

  it('counts nothing evicted while the record has room', async () => {
    const metrics = await (await fetch(`${sidecar.adminUrl}/metrics`)).text();
    expect(metrics).not.toContain('tokentap_profile_requests_evicted_total{');
  });
});
