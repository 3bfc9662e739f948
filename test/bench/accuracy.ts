import type { ClientRequest } from './load.js';
import type { SidecarRequestLine } from './processes.js';
import { quantile, type CumulativeBuckets, histogramQuantile } from './stats.js';

/**
 * The sidecar's own measurements against the client's. Per request (TTFT, TPOT) from the sidecar's
 * log line, which carries them to the microsecond; per chunk (ITL) from its histogram, read with
 * the bench's fine buckets, since no per-chunk value leaves the sidecar.
 */

/** The largest gap between a log line's start (time − e2e_ms) and the client's send time still paired. */
const PAIRING_WINDOW_MS = 100;

export interface Pair {
  readonly client: ClientRequest;
  readonly sidecar: SidecarRequestLine;
}

/**
 * Pairs log lines with client requests. The line carries no request id, but it names the model
 * (the load generator cycles through MODEL_CYCLE of them), and its `time` (epoch ms, taken when
 * the last byte left) minus `e2e_ms` is when the proxy took the request, shortly after the client
 * sent it (later under load: the proxy's event loop lags). Among requests for the same model,
 * MODEL_CYCLE arrivals apart, candidates are taken cheapest first (|Δstart| + |Δe2e|), each line
 * and request at most once; a line without a candidate stays unpaired.
 */
export function pairByStart(clients: readonly ClientRequest[], lines: readonly SidecarRequestLine[]): Pair[] {
  const okClients = clients.filter((c) => c.ok);
  const candidates: [cost: number, line: number, client: number][] = [];
  lines.forEach((line, lineIndex) => {
    const start = line.time - line.e2e_ms;
    okClients.forEach((client, clientIndex) => {
      if (client.model !== line.model || Math.abs(client.startEpochMs - start) > PAIRING_WINDOW_MS) return;
      candidates.push([Math.abs(client.startEpochMs - start) + Math.abs(client.e2eMs - line.e2e_ms), lineIndex, clientIndex]);
    });
  });
  candidates.sort((a, b) => a[0] - b[0]);
  const lineTaken = new Uint8Array(lines.length);
  const clientTaken = new Uint8Array(okClients.length);
  const pairs: Pair[] = [];
  for (const [, lineIndex, clientIndex] of candidates) {
    if (lineTaken[lineIndex] === 1 || clientTaken[clientIndex] === 1) continue;
    lineTaken[lineIndex] = 1;
    clientTaken[clientIndex] = 1;
    pairs.push({ client: okClients[clientIndex] as ClientRequest, sidecar: lines[lineIndex] as SidecarRequestLine });
  }
  return pairs;
}

export interface Difference {
  /** Pairs compared. */
  readonly n: number;
  /** Median of sidecar − client, ms. */
  readonly medianMs: number;
  /** 99th percentile of |sidecar − client|, ms. */
  readonly p99AbsMs: number;
}

function difference(values: number[]): Difference {
  return {
    n: values.length,
    medianMs: quantile(values, 0.5),
    p99AbsMs: quantile(values.map(Math.abs), 0.99),
  };
}

export function ttftDifference(pairs: readonly Pair[]): Difference {
  return difference(pairs.filter((p) => p.sidecar.ttft_ms !== null).map((p) => (p.sidecar.ttft_ms as number) - p.client.ttftMs));
}

export function tpotDifference(pairs: readonly Pair[]): Difference {
  return difference(
    pairs.filter((p) => p.sidecar.tpot_ms !== null && !Number.isNaN(p.client.tpotMs)).map((p) => (p.sidecar.tpot_ms as number) - p.client.tpotMs),
  );
}

export interface QuantileComparison {
  readonly sidecarMs: number;
  readonly clientMs: number;
  readonly differenceMs: number;
}

/** The sidecar's per-chunk ITL quantile (from its histogram, PromQL-style) against the client's exact one. */
export function compareItlQuantile(sidecarBuckets: CumulativeBuckets, clientItlMsSorted: Float64Array, q: number): QuantileComparison {
  const sidecarMs = histogramQuantile(sidecarBuckets, q) * 1000;
  const clientMs = quantile(clientItlMsSorted, q);
  return { sidecarMs, clientMs, differenceMs: sidecarMs - clientMs };
}

/**
 * ITL bucket boundaries (seconds) for the bench's sidecars: 0.1 ms steps around the two gaps the
 * bench generates (2 ms and 20 ms), coarse elsewhere, so a histogram quantile is good to ~0.1 ms.
 */
export function fineItlBuckets(): number[] {
  const bounds: number[] = [];
  const step = (from: number, to: number, by: number): void => {
    for (let v = from; v < to - by / 2; v += by) bounds.push(Math.round(v * 1e7) / 1e7);
  };
  step(0.0001, 0.006, 0.0001);
  step(0.006, 0.015, 0.001);
  step(0.015, 0.03, 0.0001);
  bounds.push(0.03, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10);
  return bounds;
}
