import { parseArgs } from 'node:util';
import type { SettingOverrides } from '../config/load.js';
import { TokentapError } from '../errors.js';

export interface CliIO {
  readonly stdout: NodeJS.WritableStream;
  readonly stderr: NodeJS.WritableStream;
  readonly env: Readonly<Record<string, string | undefined>>;
  /** Resolves when the process should stop (SIGINT/SIGTERM); tests pass their own. */
  readonly stopped?: Promise<void>;
}

const USAGE = `Usage: tokentap <command> [flags]

Commands:
  serve      run the sidecar: proxy listener in front of the upstream, admin listener with /metrics
  simulate   run the built-in inference-server simulator (OpenAI, Anthropic, TGI, Ollama, llama.cpp, Triton APIs)
  demo       simulator + sidecar + demo traffic, with a live summary (what \`npm start\` runs)
  check      validate a configuration file: \`tokentap check --config FILE\` (exit 0 valid, 1 invalid)
  profile    export a workload's live shape (GuideLLM, AIPerf, Mooncake) or compare a benchmark with it: \`tokentap profile --help\`
  report     print the capacity at SLO and pods needed of a running sidecar: \`tokentap report --admin URL\`
  render     write Prometheus rules, a PrometheusRule, an Alertmanager example and Grafana dashboards: \`tokentap render --config FILE --out DIR\`
  help       show this text (\`tokentap <command> --help\`: that command's flags)
  version    print the version (also --version, -v)

serve flags (each also settable by environment and config file; flags win):
  --upstream URL          upstream inference server       TOKENTAP_UPSTREAM      (default http://127.0.0.1:8000)
  --listen HOST:PORT      proxy listener                  TOKENTAP_LISTEN        (default 0.0.0.0:8080)
  --admin-listen HOST:PORT  admin listener (/metrics)     TOKENTAP_ADMIN_LISTEN  (default 0.0.0.0:9464)
  --config FILE           YAML configuration file         TOKENTAP_CONFIG
  --drain-timeout DURATION  after SIGTERM, how long in-flight requests may finish  TOKENTAP_DRAIN_TIMEOUT  (default 20s)
  --final-scrape-wait DURATION  after the drain, how long /metrics waits for a last scrape  TOKENTAP_FINAL_SCRAPE_WAIT  (default none)

Environment only:
  TOKENTAP_DCGM_URL       the node's DCGM exporter, e.g. http://$(NODE_IP):9400/metrics (overrides dcgm.url)
  TOKENTAP_OBSERVE        on (default) | off: proxy without observing anything (for benchmarking)
  TOKENTAP_MODEL_DISCOVERY  on | off: ask the upstream which models it serves (overrides model_discovery.enabled)

OpenTelemetry export (off by default): set OTEL_EXPORTER_OTLP_ENDPOINT, e.g. http://otel-collector:4318.

Run \`tokentap simulate --help\` for the simulator's flags, \`tokentap render --help\` for render's.
`;

export const CHECK_USAGE = `Usage: tokentap check --config FILE [--serve-only]

Validates FILE exactly as \`serve\` would, then as \`render\` would (alerts.grafana_url and
alerts.runbook_base_url are required there), without starting or writing anything. Flags and
TOKENTAP_* variables are ignored, so the verdict is about the file alone.
  valid:    a summary of the workloads and their SLOs on stdout, exit 0
  invalid:  every problem on stderr as FILE:LINE: path: message, exit 1

Flags:
  --config FILE   the tokentap configuration file
  --serve-only    judge FILE for \`serve\` alone (a file \`render\` never reads)
  --help          show this text
`;

export const DEMO_USAGE = `Usage: tokentap demo [flags]

The simulator, the sidecar in front of it with the example workloads, a few streaming clients and a
live summary every 5 s (what \`npm start\` runs). Ctrl-C stops all of it.

Flags:
  --listen HOST:PORT        proxy listener (default 127.0.0.1:8080)
  --admin-listen HOST:PORT  admin listener, /metrics (default 127.0.0.1:9464)
  --upstream-port PORT      the simulator's port on 127.0.0.1 (default 8000)
  --clients N               demo clients streaming at once, 1 to 64 (default 4)
  --config FILE             workloads (default deploy/tokentap.yaml of the repository, when present)
  --help                    show this text
`;

const wantsHelp = (args: readonly string[]): boolean => args.includes('--help') || args.includes('-h');

/**
 * The CLI as a function of (arguments, streams) that returns an exit code, so it is testable
 * without spawning processes (STYLE.md habit 7).
 */
export async function main(argv: readonly string[], io: CliIO): Promise<number> {
  const [command, ...rest] = argv;
  // Lazy: \`serve\` handles its own signals (drain on the first, exit 1 on a second).
  const stopped = (): Promise<void> => io.stopped ?? untilSignal();
  // Each command's module is imported when it runs: `check` need not load the proxy, OTel and the
  // Grafana SDK, and `serve` need not load the renderers (start-up time is felt in every pod restart).
  try {
    switch (command) {
      case 'serve':
        if (wantsHelp(rest)) {
          io.stdout.write(USAGE);
          return 0;
        }
        return await (await import('./serve.js')).runServe(parseServeFlags(rest), io);
      case 'simulate':
        return await (await import('./simulate.js')).runSimulate(rest, io, stopped());
      case 'demo':
        if (wantsHelp(rest)) {
          io.stdout.write(DEMO_USAGE);
          return 0;
        }
        return await (await import('./demo.js')).runDemo(rest, io, stopped());
      case 'check':
        if (wantsHelp(rest)) {
          io.stdout.write(CHECK_USAGE);
          return 0;
        }
        return (await import('./check.js')).runCheck(rest, io);
      case 'render':
        return await (await import('./render.js')).runRender(rest, io);
      case 'profile': {
        if (rest[0] === 'compare') return await (await import('./profile-compare.js')).runProfileCompare(rest.slice(1), io);
        const profile = await import('./profile.js');
        if (wantsHelp(rest)) {
          io.stdout.write(profile.PROFILE_USAGE);
          return 0;
        }
        return await profile.runProfile(rest, io);
      }
      case 'report': {
        const report = await import('./report.js');
        if (wantsHelp(rest)) {
          io.stdout.write(report.REPORT_USAGE);
          return 0;
        }
        return await report.runReport(rest, io);
      }
      case 'version':
      case '--version':
      case '-v':
        io.stdout.write(`tokentap ${(await import('../version.js')).VERSION}\n`);
        return 0;
      case undefined:
      case 'help':
      case '--help':
      case '-h':
        io.stdout.write(USAGE);
        return command === undefined ? 2 : 0;
      default:
        throw new TokentapError('TOKENTAP_ERR_USAGE', [`unknown command "${command}"; commands: serve, simulate, demo, check, render, profile, report, help, version`]);
    }
  } catch (error) {
    io.stderr.write(`tokentap: ${error instanceof Error ? error.message : String(error)}\n`);
    return error instanceof TokentapError && error.code === 'TOKENTAP_ERR_USAGE' ? 2 : 1;
  }
}

export function parseServeFlags(argv: readonly string[]): SettingOverrides {
  try {
    const { values } = parseArgs({
      args: [...argv],
      options: {
        upstream: { type: 'string' },
        listen: { type: 'string' },
        'admin-listen': { type: 'string' },
        'drain-timeout': { type: 'string' },
        'final-scrape-wait': { type: 'string' },
        config: { type: 'string' },
      },
      strict: true,
      allowPositionals: false,
    });
    return { upstream: values.upstream, listen: values.listen, adminListen: values['admin-listen'], drainTimeout: values['drain-timeout'], finalScrapeWait: values['final-scrape-wait'], config: values.config };
  } catch (error) {
    throw new TokentapError('TOKENTAP_ERR_USAGE', [(error as Error).message]);
  }
}

function untilSignal(): Promise<void> {
  return new Promise((resolve) => {
    const stop = (): void => {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      resolve();
    };
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
  });
}
