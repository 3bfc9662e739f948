import type { DrainState } from './drain-state.js';

/**
 * The part of the proxy listener the drain uses. Its close() stops accepting, closes idle
 * keep-alive connections at once and each busy one as soon as its response ends (proxy-server.ts),
 * so no connection waits out its keep-alive timeout to take a client's next request.
 */
export interface DrainableServer {
  close(callback: (error?: Error) => void): unknown;
  closeAllConnections(): void;
  getConnections(callback: (error: Error | null, count: number) => void): unknown;
}

export interface DrainReport {
  /** True when every in-flight request finished before the deadline. */
  readonly drained: boolean;
  /** Connections still open (each with a request in flight) when the deadline cut them. */
  readonly cutConnections: number;
  readonly durationMs: number;
}

/** After the cut, how long the cut requests' monitors may take to record them. */
const CUT_SETTLE_MS = 2_000;

/**
 * Drains the proxy listener: stops accepting connections at once (new connections are refused),
 * closes idle keep-alive connections as they become idle, lets in-flight requests finish until
 * `timeoutMs`, then cuts what remains. The state tells /readyz to fail from the start and the
 * request monitors to count the cut requests as `shutdown`; it resolves once every request has been
 * recorded (so the metrics flushed after it are complete).
 */
export async function drainProxy(server: DrainableServer, state: DrainState, timeoutMs: number, trigger: string): Promise<DrainReport> {
  const startedMs = performance.now();
  state.beginDrain(trigger);
  // The callback runs once the last connection has ended (with an error if the server was already closed).
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  let deadlineTimer: NodeJS.Timeout | undefined;
  let settleTimer: NodeJS.Timeout | undefined;
  const deadline = new Promise<'deadline'>((resolve) => {
    deadlineTimer = setTimeout(() => resolve('deadline'), timeoutMs);
  });
  const finished = Promise.all([closed, state.whenIdle()]).then(() => 'drained' as const);
  try {
    if ((await Promise.race([finished, deadline])) === 'drained') {
      return { drained: true, cutConnections: 0, durationMs: performance.now() - startedMs };
    }
    state.beginCut();
    const cutConnections = await openConnections(server);
    server.closeAllConnections();
    // Each cut request is recorded by its monitor on its own socket events; bounded, in case one never comes.
    await Promise.race([finished, new Promise((resolve) => (settleTimer = setTimeout(resolve, CUT_SETTLE_MS)))]);
    return { drained: false, cutConnections, durationMs: performance.now() - startedMs };
  } finally {
    clearTimeout(deadlineTimer);
    clearTimeout(settleTimer);
  }
}

function openConnections(server: DrainableServer): Promise<number> {
  return new Promise((resolve) => server.getConnections((error, count) => resolve(error ? 0 : count)));
}
