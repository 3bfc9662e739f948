import closeWithGrace from 'close-with-grace';
import type { Logger } from 'pino';

/**
 * Runs `shutdown` once on the first SIGTERM or SIGINT (and the other termination signals
 * close-with-grace listens to: SIGHUP, SIGQUIT, SIGUSR2...), or on an uncaught exception or
 * unhandled rejection, then exits: 0 after a clean shutdown, 1 after an error. `uninstall` removes
 * the handlers (when start-up fails and the CLI reports the error itself).
 *
 * close-with-grace (fastify's helper) rather than process.on: it also gives the guarantees a
 * sidecar needs when the shutdown itself goes wrong, without hand-written process plumbing: a
 * second signal exits 1 at once (an operator pressing Ctrl-C twice, or kubelet's escalation), a
 * shutdown that outlives `graceMs` exits 1, and a crash still drains before exiting 1.
 */
export function exitAfterShutdown(logger: Logger, graceMs: number, shutdown: (trigger: string) => Promise<void>, cutNow: () => number = () => 0): { uninstall(): void } {
  return closeWithGrace(
    {
      delay: graceMs,
      logger: false,
      // Synchronous, before close-with-grace's process.exit(1): the cut requests are logged (pino
      // writes what is buffered on exit) rather than lost with the process.
      onSecondSignal: (signal) => logger.error({ signal, cut_requests: cutNow() }, 'second signal during shutdown: cut the requests in flight (outcome "shutdown") and exiting at once'),
      onSecondError: (error) => logger.error({ err: error }, 'error during shutdown: exiting at once'),
      onTimeout: (delay) => logger.error({ grace_ms: delay }, 'shutdown did not finish in time: exiting'),
    },
    async ({ signal, err }) => {
      if (err !== undefined) logger.error({ err }, 'uncaught error: draining before exit');
      try {
        await shutdown(signal ?? (err !== undefined ? 'uncaught error' : 'event loop empty'));
      } catch (error) {
        logger.error({ err: error }, 'shutdown failed');
        throw error;
      }
    },
  );
}
