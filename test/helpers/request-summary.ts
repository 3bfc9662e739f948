import type { RequestSummary } from '../../src/metrics/recorder.js';

/** A completed streamed request's summary (150 ms TTFT, 64 output tokens 20 ms apart), with `over` changed. */
export function requestSummary(over: Partial<RequestSummary> = {}): RequestSummary {
  return {
    outcome: 'completed',
    statusClass: '2xx',
    ttfbMs: 12,
    ttftMs: 150,
    tpotMs: 20,
    e2eMs: 1400,
    inputTokens: 30,
    outputTokens: 64,
    tokenSource: 'usage',
    tokenCountMismatch: false,
    ...over,
  };
}
