import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { loadSettings } from '../config/load.js';
import { TokentapError } from '../errors.js';
import { createLogger } from '../log/logger.js';
import { LiveSummary } from '../metrics/live-summary.js';
import { systemClock } from '../clock/clock.js';
import { startSidecar } from '../sidecar.js';
import { startSimulator } from '../simulator/index.js';
import { SloAttainment } from '../slo/slo-attainment.js';
import { DEMO_TRAFFIC_NOTICE, startDemoTraffic } from './demo-traffic.js';
import type { CliIO } from './main.js';

const SUMMARY_EVERY_MS = 5000;

/**
 * The example config (deploy/tokentap.yaml in the repository: chat, rag, summarisation, code,
 * default), found relative to this module so `npm start` works from any directory; the same path
 * from src/cli and dist/cli. An install without deploy/ (the container image) runs the demo with
 * the one default workload instead.
 */
const EXAMPLE_CONFIG = fileURLToPath(new URL('../../deploy/tokentap.yaml', import.meta.url));

/**
 * `tokentap demo` (what `npm start` runs): the simulator on 127.0.0.1:8000, the sidecar in front of
 * it on 127.0.0.1:8080 with metrics on 127.0.0.1:9464 and the example workloads, a few streaming
 * clients, the status page on the admin listener (its URL is the first line printed), and live
 * summary lines (traffic, SLO attainment) every few seconds. Ctrl-C stops all of it.
 */
export async function runDemo(argv: readonly string[], io: CliIO, stopped: Promise<void>): Promise<number> {
  try {
    return await runDemoOnPorts(argv, io, stopped);
  } catch (error) {
    throw withPortFlags(error);
  }
}

async function runDemoOnPorts(argv: readonly string[], io: CliIO, stopped: Promise<void>): Promise<number> {
  const flags = parseDemoFlags(argv);
  const simulator = await startSimulator({ host: '127.0.0.1', port: flags.upstreamPort, jitterMs: 4 });
  try {
    // The demo's own flags win over the config's listeners and upstream.
    const settings = loadSettings({
      flags: { upstream: simulator.url, listen: flags.listen, adminListen: flags.adminListen, config: flags.config },
      env: {},
    });
    // Per-request log lines would bury the summary; warnings and errors still show. No model
    // discovery: the simulator lists one model but answers any name, and the demo traffic uses two
    // (the code workload is chosen by its model), which discovery would fold into "other".
    const sidecar = await startSidecar({ ...settings, modelDiscovery: undefined }, createLogger('warn', io.stderr === process.stderr ? 2 : io.stderr), systemClock, undefined, {
      statusNotice: DEMO_TRAFFIC_NOTICE,
    });
    const traffic = startDemoTraffic(sidecar.proxyUrl, flags.clients);
    const summary = new LiveSummary(sidecar.telemetry);
    const attainment = new SloAttainment(sidecar.telemetry, settings.workloads);
    const workloads = settings.workloads.map((w) => w.name).join(', ');
    // The status page first: it is what a newcomer should open (issue 18).
    io.stdout.write(
      `tokentap demo: open ${sidecar.adminUrl}/ in a browser for the live status page\n` +
        `  simulator (upstream)  ${simulator.url}\n` +
        `  proxy                 ${sidecar.proxyUrl}   try: curl -N ${sidecar.proxyUrl}/v1/chat/completions -H 'content-type: application/json' -d '{"model":"sim-model","stream":true,"messages":[{"role":"user","content":"hi"}]}'\n` +
        `  metrics               ${sidecar.adminUrl}/metrics\n` +
        `  workloads             ${workloads}   (${settings.configFile ?? 'no config file: deploy/tokentap.yaml not found'})\n` +
        `  ${flags.clients} demo clients streaming; a summary every ${SUMMARY_EVERY_MS / 1000} s; Ctrl-C stops.\n` +
        `  ${DEMO_TRAFFIC_NOTICE}\n`,
    );
    const timer = setInterval(() => {
      Promise.all([summary.line(), attainment.line()]).then(([line, slo]) => {
        io.stdout.write(`${new Date().toISOString().slice(11, 19)}  ${line}\n${slo === undefined ? '' : `          ${slo}\n`}`);
      }, () => {});
    }, SUMMARY_EVERY_MS);
    await stopped;
    clearInterval(timer);
    await traffic.stop();
    await sidecar.close();
    io.stdout.write('tokentap demo stopped\n');
    return 0;
  } finally {
    await simulator.close();
  }
}

/**
 * The flag that moves each of the demo's three listeners, by the prefix of the listen problem
 * (simulator/server.ts, sidecar.ts). A newcomer whose port 8000 holds a real inference server got
 * "address already in use" and no way out.
 */
const PORT_FLAGS: ReadonlyArray<readonly [prefix: string, flag: string, example: string]> = [
  ['simulator ', '--upstream-port PORT', '--upstream-port 8001'],
  ['listen ', '--listen HOST:PORT', '--listen 127.0.0.1:8081'],
  ['admin_listen ', '--admin-listen HOST:PORT', '--admin-listen 127.0.0.1:9465'],
];

function withPortFlags(error: unknown): unknown {
  if (!(error instanceof TokentapError) || error.code !== 'TOKENTAP_ERR_LISTEN') return error;
  return new TokentapError(
    'TOKENTAP_ERR_LISTEN',
    error.problems.map((problem) => {
      const known = PORT_FLAGS.find(([prefix]) => problem.startsWith(prefix));
      if (known === undefined) return problem;
      const [, flag, example] = known;
      return `${problem}\n    move it with ${flag}: npm start -- ${example} (or tokentap demo ${example}); port 0 picks a free port`;
    }),
  );
}

function parseDemoFlags(argv: readonly string[]): { listen: string; adminListen: string; upstreamPort: number; clients: number; config: string | undefined } {
  try {
    const { values } = parseArgs({
      args: [...argv],
      options: {
        listen: { type: 'string', default: '127.0.0.1:8080' },
        'admin-listen': { type: 'string', default: '127.0.0.1:9464' },
        'upstream-port': { type: 'string', default: '8000' },
        clients: { type: 'string', default: '4' },
        config: { type: 'string' },
      },
      strict: true,
      allowPositionals: false,
    });
    const upstreamPort = Number(values['upstream-port']);
    const clients = Number(values.clients);
    if (!Number.isInteger(upstreamPort) || upstreamPort < 0 || upstreamPort > 65535) {
      throw new Error(`--upstream-port: expected a port from 0 to 65535, got "${values['upstream-port']}"`);
    }
    if (!Number.isInteger(clients) || clients < 1 || clients > 64) {
      throw new Error(`--clients: expected a whole number from 1 to 64, got "${values.clients}"`);
    }
    const config = values.config ?? (existsSync(EXAMPLE_CONFIG) ? EXAMPLE_CONFIG : undefined);
    return { listen: values.listen, adminListen: values['admin-listen'], upstreamPort, clients, config };
  } catch (error) {
    throw new TokentapError('TOKENTAP_ERR_USAGE', [(error as Error).message]);
  }
}
