import type { Logger } from 'pino';
import { loadSettings, type SettingOverrides } from '../config/load.js';
import { exitAfterShutdown } from '../lifecycle/shutdown-signals.js';
import { settleWithin } from '../lifecycle/settle-within.js';
import { createLogger } from '../log/logger.js';
import { startSidecar, type RunningSidecar } from '../sidecar.js';
import { loadOtlpSettings } from '../tracing/otlp-settings.js';
import { VERSION } from '../version.js';
import type { CliIO } from './main.js';
import { redactUrl } from '../log/redact-url.js';

/**
 * Time allowed after the drain (which ends by drain_timeout plus 2 s for cut requests to be recorded)
 * for closing the listeners, the final OTLP export (at most 5 s, sidecar.ts) and the last log lines
 * (at most LOG_FLUSH_BUDGET_MS), before a stuck shutdown is abandoned with exit code 1.
 */
export const SHUTDOWN_FLUSH_ALLOWANCE_MS = 10_000;

/** How long the shutdown waits for the last log lines to be written (a stdout nobody reads never drains). */
const LOG_FLUSH_BUDGET_MS = 1000;

/**
 * `tokentap serve`: validate settings (refusing to start on any problem), run until stopped, then
 * drain (lifecycle/drain-proxy.ts) and stop. Stopped by `io.stopped` when the caller provides it
 * (tests), otherwise by a signal: SIGTERM or SIGINT start the drain, a second signal or a shutdown
 * that outlives drain_timeout plus final_scrape_wait plus SHUTDOWN_FLUSH_ALLOWANCE_MS exits 1 at once.
 */
export async function runServe(flags: SettingOverrides, io: CliIO): Promise<number> {
  const settings = loadSettings({ flags, env: io.env });
  const otlp = loadOtlpSettings(io.env);
  const logger = createLogger(settings.logLevel, io.stdout === process.stdout ? 1 : io.stdout, settings.limits.logBufferBytes);
  const starting = startSidecar(settings, logger, undefined, otlp);
  const stop = async (trigger: string): Promise<void> => drainAndStop(await starting, settings.drainTimeoutMs, logger, trigger);
  let started: RunningSidecar | undefined;
  void starting.then((sidecar) => (started = sidecar), () => undefined);
  // A second signal exits at once: the requests still in flight are cut and logged (outcome "shutdown") first.
  const cutNow = (): number => started?.cutNow() ?? 0;
  // Signals are handled from before the listeners open, so a SIGTERM during start-up drains too.
  const signals = io.stopped === undefined ? exitAfterShutdown(logger, settings.drainTimeoutMs + settings.finalScrapeWaitMs + SHUTDOWN_FLUSH_ALLOWANCE_MS, stop, cutNow) : undefined;
  let sidecar: RunningSidecar;
  try {
    sidecar = await starting;
  } catch (error) {
    signals?.uninstall();
    throw error;
  }
  logger.info(
    {
      version: VERSION,
      upstream: redactUrl(settings.upstream),
      // What the listeners really bound: with port 0 the kernel picks the port, and this says which.
      listen: sidecar.proxyAddress,
      admin_listen: sidecar.adminAddress,
      proxy: sidecar.proxyUrl,
      admin: sidecar.adminUrl,
      config: settings.configFile ?? null,
      drain_timeout_ms: settings.drainTimeoutMs,
      otlp_metrics: otlp?.metrics === undefined ? null : redactUrl(otlp.metrics.url),
      otlp_traces: otlp?.traces === undefined ? null : redactUrl(otlp.traces.url),
    },
    'tokentap serving',
  );
  if (io.stopped === undefined) {
    // exitAfterShutdown ends the process itself (exit 0 once `stop` resolves); this promise never settles.
    return new Promise<number>(() => undefined);
  }
  await io.stopped;
  await stop('stop requested');
  return 0;
}

async function drainAndStop(sidecar: RunningSidecar, drainTimeoutMs: number, logger: Logger, trigger: string): Promise<void> {
  logger.info({ trigger, drain_timeout_ms: drainTimeoutMs }, 'tokentap draining: readiness fails, new connections are refused');
  const report = await sidecar.drain(drainTimeoutMs, trigger);
  logger.info(
    { drained: report.drained, cut_connections: report.cutConnections, drain_ms: Math.round(report.durationMs) },
    report.drained ? 'tokentap drained' : 'tokentap drain timeout: cut the requests still in flight (outcome "shutdown")',
  );
  await sidecar.close();
  logger.info('tokentap stopped');
  // Every line written before the process exits, the drain's last requests among them: a write
  // still in flight at exit can land after the lines the exit writes, or not at all.
  await settleWithin(new Promise<void>((resolve) => logger.flush(() => resolve())), LOG_FLUSH_BUDGET_MS);
}
