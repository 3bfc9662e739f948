import { parseArgs } from 'node:util';
import { loadSettings } from '../config/load.js';
import { TokentapError } from '../errors.js';
import { createLogger } from '../log/logger.js';
import { LiveSummary } from '../metrics/live-summary.js';
import { startSidecar } from '../sidecar.js';
import { startSimulator } from '../simulator/index.js';
import { startDemoTraffic } from './demo-traffic.js';
import type { CliIO } from './main.js';

const SUMMARY_EVERY_MS = 5000;

/**
 * `tokentap demo` (what `npm start` runs): the simulator on 127.0.0.1:8000, the sidecar in front of
 * it on 127.0.0.1:8080 with metrics on 127.0.0.1:9464, a few streaming clients, and a live summary
 * line every few seconds. Ctrl-C stops all of it.
 */
export async function runDemo(argv: readonly string[], io: CliIO, stopped: Promise<void>): Promise<number> {
  const flags = parseDemoFlags(argv);
  const simulator = await startSimulator({ host: '127.0.0.1', port: flags.upstreamPort, jitterMs: 4 });
  try {
    const settings = loadSettings({
      flags: { upstream: simulator.url, listen: flags.listen, adminListen: flags.adminListen },
      env: {},
    });
    // Per-request log lines would bury the summary; warnings and errors still show.
    const sidecar = await startSidecar(settings, createLogger('warn', io.stderr === process.stderr ? 2 : io.stderr));
    const traffic = startDemoTraffic(sidecar.proxyUrl, flags.clients);
    const summary = new LiveSummary(sidecar.telemetry);
    io.stdout.write(
      `tokentap demo\n` +
        `  simulator (upstream)  ${simulator.url}\n` +
        `  proxy                 ${sidecar.proxyUrl}   try: curl -N ${sidecar.proxyUrl}/v1/chat/completions -H 'content-type: application/json' -d '{"model":"sim-model","stream":true,"messages":[{"role":"user","content":"hi"}]}'\n` +
        `  metrics               ${sidecar.adminUrl}/metrics\n` +
        `  ${flags.clients} demo clients streaming; a summary every ${SUMMARY_EVERY_MS / 1000} s; Ctrl-C stops.\n`,
    );
    const timer = setInterval(() => {
      summary.line().then((line) => io.stdout.write(`${new Date().toISOString().slice(11, 19)}  ${line}\n`), () => {});
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

function parseDemoFlags(argv: readonly string[]): { listen: string; adminListen: string; upstreamPort: number; clients: number } {
  try {
    const { values } = parseArgs({
      args: [...argv],
      options: {
        listen: { type: 'string', default: '127.0.0.1:8080' },
        'admin-listen': { type: 'string', default: '127.0.0.1:9464' },
        'upstream-port': { type: 'string', default: '8000' },
        clients: { type: 'string', default: '4' },
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
    return { listen: values.listen, adminListen: values['admin-listen'], upstreamPort, clients };
  } catch (error) {
    throw new TokentapError('TOKENTAP_ERR_USAGE', [(error as Error).message]);
  }
}
