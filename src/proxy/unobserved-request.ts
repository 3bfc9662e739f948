import type { RequestMonitor } from './request-monitor.js';

/** The part of RequestMonitor the proxy calls; the unobserved stand-in must answer all of it. */
type ProxiedRequest = Pick<RequestMonitor, 'trace' | 'requestBody' | 'requestComplete' | 'response' | 'arrived' | 'body' | 'bodyEnd' | 'delivered' | 'fail' | 'finished' | 'terminalSeen' | 'retried' | 'upstreamNotReused' | 'trailers'>;

/**
 * Stands in for a RequestMonitor when observation is switched off (`TOKENTAP_OBSERVE=off`): no tap,
 * no timeline, no metrics, no log line; only the `finished` flag the proxy's error paths rely on.
 * It exists so the benchmark can tell the cost of proxying from the cost of monitoring.
 */
export class UnobservedRequest implements ProxiedRequest {
  private done = false;

  get finished(): boolean {
    return this.done;
  }

  /** Without a tap no terminal event is seen: a client that leaves early is cancelled. */
  get terminalSeen(): boolean {
    return false;
  }

  trace(): void {}
  retried(): void {}
  upstreamNotReused(): void {}
  requestBody(): void {}
  requestComplete(): void {}
  response(): void {}
  arrived(): void {}
  body(): void {}
  bodyEnd(): void {}
  trailers(): void {}

  delivered(): void {
    this.done = true;
  }

  fail(): void {
    this.done = true;
  }
}
