import type { ExchangeContext } from './exchange.js';
import { RequestMonitor } from './request-monitor.js';

/**
 * Counts and logs a request the relay refused before forwarding it (a parse error, a head
 * request-rules.ts refuses, an upgrade): outcome `client_error`, which burns no SLO, so no client
 * can page on-call by sending garbage. `path` is the target's path only (request-rules.ts
 * targetPath); no header is read, so none reaches a label, a log field or a span.
 */
export function recordRefusal(context: ExchangeContext, method: string, path: string, status: number, reason: string): void {
  if (!context.observe) return;
  try {
    new RequestMonitor(context.monitor, method, path, {}).fail('client_error', status, reason);
  } catch (error) {
    // Observation failed: the refusal itself has been answered and the connection closes either way.
    try {
      context.monitor.logger.warn({ err: error, step: 'refusal' }, 'request monitor failed on a refused request');
    } catch {
      // The log sink itself failed: nothing is left to report to.
    }
  }
}
