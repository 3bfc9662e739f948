import { existsSync, mkdtempSync, readFileSync, symlinkSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator } from '../../src/simulator/index.js';
import { fencedBlocks, readDoc, shellCommands } from '../helpers/docs.js';
import { requireTools } from '../helpers/required-tools.js';
import { eventually } from '../helpers/sidecar.js';
import { runTerminalCommand, startTerminalCommand, takenLoopbackPorts, type TerminalCommand } from '../helpers/terminal-command.js';

/**
 * README.md's quick start run as a newcomer copies it: every command line is taken from the page
 * and run by bash from the checkout, as a terminal would run it, and what the page says the user
 * sees is asserted on what came out.
 *
 * Ports: the README's commands name 127.0.0.1:8000, 8080 and 9464 (and 8001, 8081, 9465 for the
 * override), so they run on those ports, as written, rather than on free ports substituted by the
 * test: a substituted command is one nobody copies, and a wrong port in the page (a curl to 8081,
 * a status page URL on 9465) would pass unnoticed. The ports are checked free first, and a taken one
 * fails every test here with a message naming it; nothing else in the suite listens on them
 * (tests bind port 0, which the kernel picks from the ephemeral range, 32768 and up on Linux).
 *
 * Loopback only: the "real server" block's `serve` names 127.0.0.1 listeners over the example
 * config's 0.0.0.0 (a pod's), and the test checks it bound those before sending anything.
 */

const REPO = fileURLToPath(new URL('../../', import.meta.url));
const README = readDoc('README.md');
const README_PORTS = [8000, 8080, 9464, 8001, 8081, 9465];

const shellBlocks = fencedBlocks(README, 'sh');
const quickStart = shellCommands(shellBlocks.find((block) => /^npm start/m.test(block)) ?? '');
const npmStart = quickStart.find((command) => command.startsWith('npm start')) as string;
const realServer = shellCommands(shellBlocks.find((block) => block.includes(' serve --upstream')) ?? '');
/** "a port already taken? each listener moves with a flag: `npm start -- ...`" */
const portOverride = /`(npm start -- [^`]+)`/.exec(README)?.[1]?.replace(/\s+/g, ' ') as string;
/** Step 1 of "Production traffic as a benchmark": export a workload's shape from the running sidecar. */
const profileExport = /`(node bin\/tokentap\.js profile --admin http:\/\/127\.0\.0\.1:9464 [^`]+)`/.exec(README)?.[1] as string;
/** The summary lines the README says `npm start` prints every 5 s. */
const summarySample = (fencedBlocks(README, '').find((block) => block.includes('req/s')) ?? '').trimEnd().split('\n');

/** `line` as a pattern where each number may be any number (or "-", no sample in the interval). */
function shapeOf(line: string): RegExp {
  const escaped = line.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return new RegExp(`^${escaped.replace(/\d+(?:\\\.\d+)?/g, '(?:\\d+(?:\\.\\d+)?|-)')}`);
}

/** What curl prints for `url`, as a user checking a URL in a terminal would fetch it. */
async function curl(url: string): Promise<string> {
  const result = await runTerminalCommand(`curl -sS --max-time 5 ${url}`, REPO);
  expect(result.stderr, url).toBe('');
  expect(result.code, url).toBe(0);
  return result.stdout;
}

/**
 * Takes `port` as another program would. Whoever connects is cut off at once: a connection left open
 * with bytes unread never ends (no 'end' until they are read), and server.close() waits for every
 * connection, so one stray client (any process on the machine that dials the port) held the cleanup
 * past its time limit.
 */
async function holdPort(port: number): Promise<Server> {
  const server = createServer((socket) => socket.destroy());
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', resolve);
  });
  return server;
}

let running: TerminalCommand[] = [];
let held: Server[] = [];
let cleanups: Array<() => Promise<void>> = [];

afterEach(async () => {
  for (const command of running) command.kill();
  await Promise.all(running.map((command) => command.closed));
  await Promise.all(held.map((server) => new Promise((resolve) => server.close(resolve))));
  for (const cleanup of cleanups) await cleanup();
  running = [];
  held = [];
  cleanups = [];
});

/**
 * npm's own notice of a newer npm (written to stderr at exit, on a machine that is not CI) is no
 * part of what the page promises; without it, any stderr is tokentap's.
 */
const QUIET_NPM = { npm_config_update_notifier: 'false' };

function start(line: string): TerminalCommand {
  const command = startTerminalCommand(line, REPO, QUIET_NPM);
  running.push(command);
  return command;
}

/** The demo's output from its first line on (npm prints "> tokentap@... start" and the script first). */
function demoLines(command: TerminalCommand): string[] {
  return command.stdout().split('\n').filter((line) => line !== '' && !line.startsWith('> '));
}

describe('README.md quick start, run as written', () => {
  beforeAll(async () => {
    requireTools('curl');
    expect(existsSync(`${REPO}dist/cli/main.js`), 'dist/ is built (npm test builds it first)').toBe(true);
    const taken = await takenLoopbackPorts(README_PORTS);
    if (taken.length > 0) {
      throw new Error(
        `127.0.0.1 port${taken.length === 1 ? '' : 's'} ${taken.join(', ')} already in use: README.md's quick start runs on ${README_PORTS.join(', ')} as written. ` +
          `Stop what listens there (\`ss -ltnp\` names it: an npm start left running?) and run this test again`,
      );
    }
  });

  it('finds the commands it runs in the page: npm start, the port override, the "in front of a real server" block, the profile export', () => {
    expect(npmStart).toMatch(/^npm start\s+#.*http:\/\/\S+\/ for the status page/);
    expect(portOverride).toMatch(/^npm start -- /);
    expect(profileExport).toMatch(/ > \S+\.json$/);
    expect(realServer.map((command) => command.split(' ').slice(0, 3).join(' '))).toEqual([
      'node bin/tokentap.js serve',
      'curl -N localhost:8080/v1/chat/completions',
      'curl -s localhost:9464/metrics',
      'node bin/tokentap.js render',
    ]);
    expect(summarySample).toHaveLength(2);
  });

  it('npm start prints the status page URL first, serves the page there and at the README\'s URL, answers its own suggested curl, prints the README\'s summary lines, exports the chat workload\'s profile as the README shows, and Ctrl-C stops everything without an error', async () => {
    const demo = start(npmStart);
    const banner = await eventually('the demo banner', () => demoLines(demo), (lines) => lines.some((line) => line.includes('Ctrl-C stops')) || demo.stderr() !== '', 20_000);
    expect(demo.stderr()).toBe('');
    // The first line the demo prints is where to look, and the page answers there.
    const printedPage = /^tokentap demo: open (http:\/\/127\.0\.0\.1:9464\/) in a browser for the live status page$/.exec(banner[0] as string)?.[1];
    expect(printedPage, banner[0]).toBeDefined();
    const readmePage = /open (http:\/\/\S+\/) for the status page/.exec(npmStart)?.[1] as string;
    for (const url of [printedPage as string, readmePage]) expect(await curl(url)).toContain('<title>tokentap status</title>');
    const printedMetrics = /^ {2}metrics +(http:\/\/\S+)$/m.exec(banner.join('\n'))?.[1] as string;
    expect(await curl(printedMetrics)).toMatch(/^tokentap_build_info\{/m);
    // The banner's own "try:" line is a command a user copies too.
    const tryLine = /try: (curl .*)$/m.exec(banner.join('\n'))?.[1] as string;
    const tried = await runTerminalCommand(tryLine, REPO);
    expect(tried.code, tryLine).toBe(0);
    expect(tried.stdout.trimEnd().endsWith('data: [DONE]'), tried.stdout.slice(-200)).toBe(true);
    // "then every 5 s the last interval and each workload's worst SLO", in the shape the README shows.
    const summary = await eventually('the first summary lines', () => demoLines(demo), (lines) => lines.some((line) => line.includes('SLO good')), 20_000);
    const at = summary.findIndex((line) => shapeOf(summarySample[0]!.split('outcomes:')[0]!).test(line));
    expect(at, summary.join('\n')).toBeGreaterThan(0);
    expect(summary[at]).toMatch(/ \| outcomes: (none|(\w+=\d+ ?)+)$/);
    const sloPrefix = (summarySample[1] as string).slice(0, (summarySample[1] as string).indexOf(':') + 2);
    expect(summary[at + 1]?.startsWith(sloPrefix), summary[at + 1]).toBe(true);
    for (const workload of ['rag', 'summarisation', 'code', 'chat']) {
      expect(summarySample[1]).toContain(`${workload} `);
      expect(summary[at + 1]).toMatch(new RegExp(`[:|] ${workload} (ttft|itl|e2e|no events)`));
    }
    // "Export the workload's shape from the running sidecar": the demo's chat traffic is a live workload.
    // Run from a scratch directory holding bin/ (a link to the checkout's), so `> chat-scenario.json` lands there.
    const scratch = mkdtempSync(join(tmpdir(), 'tokentap-readme-'));
    cleanups.push(() => rm(scratch, { recursive: true, force: true }));
    symlinkSync(join(REPO, 'bin'), join(scratch, 'bin'));
    const exported = await runTerminalCommand(profileExport, scratch);
    expect([exported.code, exported.stderr]).toEqual([0, '']);
    const written = /> (\S+)$/.exec(profileExport)?.[1] as string;
    expect(JSON.parse(readFileSync(join(scratch, written), 'utf8'))).toMatchObject({ spec: { profile: { kind: 'poisson' }, data: [{ kind: 'synthetic_text' }] } });
    // Ctrl-C: the terminal's SIGINT to npm, its sh and the demo at once.
    demo.interrupt();
    await demo.closed;
    expect(demo.stdout().endsWith('tokentap demo stopped\n'), demo.stdout().slice(-300)).toBe(true);
    expect(demo.stderr()).toBe('');
    // "Ctrl-C stops everything": the simulator, the proxy and the admin listener are gone.
    expect(await takenLoopbackPorts([8000, 8080, 9464])).toEqual([]);
  }, 60_000);

  it('the demo itself exits 0 on Ctrl-C (npm start then reports 130, as npm and sh pass on the SIGINT that stopped them)', async () => {
    // package.json's start script, on ports the kernel picks: this checks the demo's own exit code, which npm hides.
    const demo = start('node bin/tokentap.js demo --upstream-port 0 --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0');
    await eventually('the demo banner', () => demo.stdout() + demo.stderr(), (text) => text.includes('Ctrl-C stops') || text.includes('tokentap:'), 20_000);
    demo.interrupt();
    expect(await demo.closed).toEqual({ code: 0, signal: null });
    expect(demo.stderr()).toBe('');
    expect(demo.stdout().endsWith('tokentap demo stopped\n')).toBe(true);
  }, 40_000);

  it('in front of a real server (the simulator on 127.0.0.1:8000): the curl stream ends in data: [DONE], the metrics grep shows chat\'s TTFT and SLO events, render writes the files', async () => {
    const server = await startSimulator({ host: '127.0.0.1', port: 8000 });
    cleanups.push(() => server.close());
    const [serveLine, chatCurl, metricsGrep, render] = realServer as [string, string, string, string];
    const serve = start(serveLine);
    const serving = await eventually('"tokentap serving"', () => serve.stdout() + serve.stderr(), (text) => text.includes('"tokentap serving"') || text.includes('tokentap:'), 20_000);
    // On this machine only, as the comment in the page says (the example config's 0.0.0.0 is for a pod).
    expect(serving).toContain('"listen":"127.0.0.1:8080","admin_listen":"127.0.0.1:9464","proxy":"http://127.0.0.1:8080","admin":"http://127.0.0.1:9464"');

    const chat = await runTerminalCommand(chatCurl, REPO);
    expect(chat.code, chat.stderr).toBe(0);
    const events = chat.stdout.split('\n\n').filter((event) => event !== '');
    expect(events.length).toBeGreaterThan(2);
    expect(events.every((event) => event.startsWith('data: '))).toBe(true);
    expect(events.at(-1)?.trimEnd()).toBe('data: [DONE]');

    // The request's series appear in the grep once the tap has recorded it (the stream's end).
    const grep = await eventually('the chat request in /metrics', () => runTerminalCommand(metricsGrep, REPO), (result) => /tokentap_slo_events_total\{workload="chat"/.test(result.stdout), 10_000);
    expect(grep.code).toBe(0);
    expect(grep.stdout).toMatch(/^gen_ai_server_time_to_first_token_seconds_count\{workload="chat",[^}]*\} 1$/m);
    expect(grep.stdout).toMatch(/^tokentap_slo_events_total\{workload="chat",[^}]*slo="ttft",result="good"\} 1$/m);

    const rendered = await runTerminalCommand(render, REPO);
    expect(rendered.code, rendered.stderr).toBe(0);
    const out = /--out (\S+)/.exec(render)?.[1] as string;
    // "rules, alerts, dashboards"
    for (const file of ['prometheus/rules.yaml', 'prometheus/prometheusrule.yaml', 'alertmanager/tokentap-routes.yaml', 'grafana/tokentap-slo-overview.json']) {
      expect(rendered.stdout).toContain(`wrote ${out}/${file}`);
      expect(existsSync(`${out}/${file}`)).toBe(true);
    }

    serve.interrupt();
    expect(await serve.closed).toEqual({ code: 0, signal: null });
  }, 60_000);

  it('with port 8080 taken, npm start names it and the README\'s override; with 8000, 8080 and 9464 all taken, the override runs', async () => {
    held.push(await holdPort(8080));
    const refused = await runTerminalCommand(npmStart, REPO, QUIET_NPM);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('listen 127.0.0.1:8080: listen EADDRINUSE: address already in use 127.0.0.1:8080');
    const hint = /move it with --listen HOST:PORT: (npm start -- --listen \S+)/.exec(refused.stderr)?.[1] as string;
    expect(hint, refused.stderr).toBeDefined();
    // The hint's example is the README's.
    expect(portOverride).toContain(hint.slice('npm start -- '.length));
    // The simulator it had started on 8000 is closed again.
    expect(await takenLoopbackPorts([8000])).toEqual([]);

    held.push(await holdPort(8000), await holdPort(9464));
    const moved = start(portOverride);
    const banner = await eventually('the demo banner', () => demoLines(moved), (lines) => lines.some((line) => line.includes('Ctrl-C stops')) || moved.stderr() !== '', 20_000);
    expect(moved.stderr()).toBe('');
    const printedPage = /^tokentap demo: open (http:\/\/\S+\/) in a browser/.exec(banner[0] as string)?.[1] as string;
    expect(printedPage).toBe(`http://${/--admin-listen (\S+)/.exec(portOverride)?.[1]}/`);
    expect(await curl(printedPage)).toContain('<title>tokentap status</title>');
    expect(banner.join('\n')).toContain(`simulator (upstream)  http://127.0.0.1:${/--upstream-port (\d+)/.exec(portOverride)?.[1]}`);
    expect(banner.join('\n')).toContain(`proxy                 http://${/--listen (\S+)/.exec(portOverride)?.[1]}`);
    moved.interrupt();
    await moved.closed;
    expect(moved.stdout().endsWith('tokentap demo stopped\n')).toBe(true);
  }, 60_000);
});
