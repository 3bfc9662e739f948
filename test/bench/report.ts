import type { BenchResult, StreamCell, StreamProtocol, SystemName, UnaryCell } from './bench.js';
import { quantile } from './stats.js';

/** Turns a BenchResult into the stdout tables and the target verdicts (issue 7's targets, ratios within one run). */

export interface TargetVerdict {
  readonly target: string;
  readonly limit: string;
  readonly measured: string;
  /** null when the run could not measure it (nginx missing, no stamps, skipped cell). */
  readonly met: boolean | null;
}

const f = (value: number | undefined | null, digits = 1): string => (value !== undefined && value !== null && Number.isFinite(value) ? value.toFixed(digits) : '-');

function median(values: number[]): number {
  return quantile(values.filter(Number.isFinite), 0.5);
}

function cells(result: BenchResult, system: SystemName, itlMs: number, concurrency: number, protocol: StreamProtocol = 'http1'): StreamCell[] {
  return result.streaming.filter((c) => c.protocol === protocol && c.system === system && c.itlMs === itlMs && c.concurrency === concurrency);
}

/**
 * The HTTP/2 cleartext cells in the shape of docs/benchmark.md's table: per protocol, gap and
 * streams, each proxy's median CPU per 1k tokens and added delay over the rounds.
 */
export function h2Summary(result: BenchResult): string[][] {
  const rows: string[][] = [];
  const shapes = new Map(result.streaming.filter((c) => c.protocol !== 'http1').map((c) => [`${c.protocol} ${c.itlMs} ${c.concurrency}`, c]));
  for (const { protocol, itlMs, concurrency } of shapes.values()) {
    for (const system of ['tokentap', 'nginx'] as const) {
      const own = cells(result, system, itlMs, concurrency, protocol);
      if (own.length === 0) continue;
      const med = (pick: (c: StreamCell) => number | undefined): number => median(own.map((c) => pick(c) ?? Number.NaN));
      rows.push([
        protocol,
        `${itlMs} ms`,
        String(concurrency),
        system,
        `${f(med((c) => c.cpuMsPer1kTokens))} (${own.map((c) => f(c.cpuMsPer1kTokens)).join(', ')})`,
        f(med((c) => c.addedDelayMs?.p50), 3),
        f(med((c) => c.addedDelayMs?.p99), 2),
        `${f(med((c) => c.ttftP50Ms - (cells(result, 'direct', itlMs, concurrency, protocol).find((d) => d.round === c.round)?.ttftP50Ms ?? Number.NaN)), 2)}`,
      ]);
    }
  }
  return rows;
}

function medianOf(result: BenchResult, system: SystemName, itlMs: number, concurrency: number, pick: (c: StreamCell) => number | undefined): number {
  return median(cells(result, system, itlMs, concurrency).map((c) => pick(c) ?? Number.NaN));
}

function unaryAt(result: BenchResult, system: SystemName, rate: number): UnaryCell | undefined {
  return result.unary.find((c) => c.system === system && c.ratePerS === rate);
}

function verdict(target: string, limit: string, measured: string, value: number, ok: (v: number) => boolean): TargetVerdict {
  return { target, limit, measured, met: Number.isFinite(value) ? ok(value) : null };
}

/** Every target of the benchmark at 20 ms between tokens (medians over the rounds of a cell). */
export function targetVerdicts(result: BenchResult, unaryReferenceRate: number): TargetVerdict[] {
  const verdicts: TargetVerdict[] = [];
  for (const streams of [64, 256]) {
    const tt = medianOf(result, 'tokentap', 20, streams, (c) => c.cpuMsPer1kTokens);
    const ng = medianOf(result, 'nginx', 20, streams, (c) => c.cpuMsPer1kTokens);
    verdicts.push(verdict(`CPU per 1k tokens, tokentap / nginx, ${streams} streams`, '≤ 1.5×', `${f(tt)} / ${f(ng)} ms = ${f(tt / ng, 2)}×`, tt / ng, (v) => v <= 1.5));
    const off = medianOf(result, 'tokentap-unobserved', 20, streams, (c) => c.cpuMsPer1kTokens);
    verdicts.push(verdict(`observation on / off CPU, ${streams} streams`, '≤ 1.10×', `${f(tt)} / ${f(off)} ms = ${f(tt / off, 2)}×`, tt / off, (v) => v <= 1.1));
    // The floor of any proxy on Node's sockets: what tokentap costs beyond it is framing and observation.
    const relay = medianOf(result, 'node-tcp-relay', 20, streams, (c) => c.cpuMsPer1kTokens);
    verdicts.push(verdict(`CPU per 1k tokens, tokentap / Node TCP relay, ${streams} streams`, '≤ 1.15×', `${f(tt)} / ${f(relay)} ms = ${f(tt / relay, 2)}×`, tt / relay, (v) => v <= 1.15));
    for (const [q, limit] of [['p50', 0.1], ['p99', 1]] as const) {
      const ttd = medianOf(result, 'tokentap', 20, streams, (c) => c.addedDelayMs?.[q]);
      const ngd = medianOf(result, 'nginx', 20, streams, (c) => c.addedDelayMs?.[q]);
      verdicts.push(verdict(`added delay ${q} − nginx's, ${streams} streams`, `≤ ${limit} ms`, `${f(ttd, 3)} − ${f(ngd, 3)} = ${f(ttd - ngd, 3)} ms`, ttd - ngd, (v) => v <= limit));
    }
    const rss = medianOf(result, 'tokentap', 20, streams, (c) => c.rssPerStreamKiB);
    verdicts.push(verdict(`RSS per open stream, ${streams} streams`, '≤ 32 KiB', `${f(rss)} KiB (nginx ${f(medianOf(result, 'nginx', 20, streams, (c) => c.rssPerStreamKiB))})`, rss, (v) => v <= 32));
  }
  const pairedRatio = median(result.pairedObservation.map((r) => r.ratio));
  verdicts.push(
    verdict(
      `observation on / off CPU, paired (both at once, ${result.pairedObservation.length} rounds)`,
      '≤ 1.10×',
      `${f(median(result.pairedObservation.map((r) => r.observedCpuMsPer1kTokens)))} / ${f(median(result.pairedObservation.map((r) => r.unobservedCpuMsPer1kTokens)))} ms = ${f(pairedRatio, 2)}× (rounds ${result.pairedObservation.map((r) => f(r.ratio, 2)).join(', ')})`,
      pairedRatio,
      (v) => v <= 1.1,
    ),
  );
  const ttUnary = unaryAt(result, 'tokentap', unaryReferenceRate)?.cpuUsPerRequest ?? Number.NaN;
  const ngUnary = unaryAt(result, 'nginx', unaryReferenceRate)?.cpuUsPerRequest ?? Number.NaN;
  verdicts.push(verdict(`non-streaming CPU per request at ${unaryReferenceRate}/s, tokentap / nginx`, '≤ 3×', `${f(ttUnary, 0)} / ${f(ngUnary, 0)} µs = ${f(ttUnary / ngUnary, 2)}×`, ttUnary / ngUnary, (v) => v <= 3));
  const offUnary = unaryAt(result, 'tokentap-unobserved', unaryReferenceRate)?.cpuUsPerRequest ?? Number.NaN;
  verdicts.push(verdict(`non-streaming observation on / off CPU per request at ${unaryReferenceRate}/s`, '≤ 1.3×', `${f(ttUnary, 0)} / ${f(offUnary, 0)} µs = ${f(ttUnary / offUnary, 2)}×`, ttUnary / offUnary, (v) => v <= 1.3));
  const accuracyCells = result.streaming.filter((c) => c.accuracy !== null && c.accuracy.pairs > 0 && !c.saturated);
  const worst = (pick: (c: StreamCell) => number): number => Math.max(...accuracyCells.map(pick).filter(Number.isFinite));
  const ttftP99 = accuracyCells.length === 0 ? Number.NaN : worst((c) => c.accuracy!.ttft.p99AbsMs);
  verdicts.push(verdict('sidecar TTFT vs client, p99 |difference| (worst unsaturated cell)', '≤ 1 ms', `${f(ttftP99, 3)} ms`, ttftP99, (v) => v <= 1));
  const itlP99 = accuracyCells.length === 0 ? Number.NaN : worst((c) => Math.abs(c.accuracy!.itlChunkP99.differenceMs));
  verdicts.push(verdict('sidecar per-chunk ITL p99 vs client p99 (worst unsaturated cell)', '≤ 0.5 ms', `${f(itlP99, 3)} ms`, itlP99, (v) => v <= 0.5));
  return verdicts;
}

function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cols: string[]): string => `| ${cols.map((c, i) => c.padEnd(widths[i] as number)).join(' | ')} |`;
  return [line(header), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...rows.map(line)].join('\n');
}

export function renderReport(result: BenchResult, unaryReferenceRate: number): string {
  const streamRows = result.streaming.map((c) => [
    c.protocol,
    `${c.itlMs} ms`,
    String(c.concurrency),
    String(c.round + 1),
    c.system,
    f(c.requestsPerS, 1),
    f(c.tokensPerS, 0),
    `${f(c.ttftP50Ms, 2)} / ${f(c.ttftP99Ms, 2)}`,
    c.addedDelayMs === null ? (c.system === 'direct' && c.delayMs !== null ? `(abs ${f(c.delayMs.p50, 3)} / ${f(c.delayMs.p99, 2)} / ${f(c.delayMs.p999, 2)})` : '-') : `${f(c.addedDelayMs.p50, 3)} / ${f(c.addedDelayMs.p99, 2)} / ${f(c.addedDelayMs.p999, 2)}`,
    `${f(c.cpuMsPer1kTokens, 1)} (${f(c.userCpuMsPer1kTokens, 1)})`,
    f(c.rssPerStreamKiB, 1),
    c.accuracy === null ? '-' : `${f(c.accuracy.ttft.medianMs, 3)} / ${f(c.accuracy.ttft.p99AbsMs, 3)} (n=${c.accuracy.pairs})`,
    c.accuracy === null ? '-' : `${f(c.accuracy.itlChunkP50.differenceMs, 3)} / ${f(c.accuracy.itlChunkP99.differenceMs, 3)}`,
    Number.isFinite(c.othersOnProxyCore) ? `${(c.othersOnProxyCore * 100).toFixed(0)} %` : '-',
    c.saturated ? `saturated${c.failed > 0 ? `, ${c.failed} failed` : ''}` : '',
  ]);
  const unaryRows = result.unary.map((c) => [
    String(c.ratePerS),
    c.system,
    f(c.requestsPerS, 0),
    `${f(c.p50Ms, 2)} / ${f(c.p99Ms, 2)}`,
    f(c.cpuUsPerRequest, 0),
    Number.isFinite(c.othersOnProxyCore) ? `${(c.othersOnProxyCore * 100).toFixed(0)} %` : '-',
    c.failed > 0 ? `${c.failed} failed` : '',
  ]);
  const maxRates = Object.entries(result.unaryMaxRateP99Under5Ms).map(([s, r]) => `${s} ${r ?? 'none'}`).join(', ');
  const verdicts = targetVerdicts(result, unaryReferenceRate);
  return [
    'Streaming (64 tokens per request; delays in ms; added delay = this system\'s quantile − direct\'s in the same round)',
    table(
      ['protocol', 'gap', 'streams', 'round', 'system', 'req/s', 'tok/s', 'TTFT p50 / p99', 'added delay p50 / p99 / p99.9', 'CPU ms / 1k tok (user)', 'RSS KiB / stream', 'TTFT acc. median / p99|d|', 'ITL acc. Δp50 / Δp99', 'CPU 0 busy with others', ''],
      streamRows,
    ),
    '',
    'HTTP/2 cleartext (medians over the rounds; rounds in brackets; nginx: grpc_pass for gRPC, HTTP/1.1 proxy_pass behind its http2 listener for SSE)',
    table(['protocol', 'gap', 'streams', 'system', 'CPU ms / 1k tok', 'added delay p50', 'added delay p99', 'added TTFT p50'], h2Summary(result)),
    '',
    'Non-streaming (1 output token, no simulated delay)',
    table(['offered req/s', 'system', 'req/s', 'latency p50 / p99 ms', 'CPU µs / req', 'CPU 0 busy with others', ''], unaryRows),
    `highest offered rate with p99 < 5 ms: ${maxRates}`,
    '',
    'Targets',
    table(['target', 'limit', 'measured', 'met'], verdicts.map((v) => [v.target, v.limit, v.measured, v.met === null ? 'not measured' : v.met ? 'yes' : 'NO'])),
    ...(result.notes.length > 0 ? ['', 'Notes:', ...result.notes.map((n) => `- ${n}`)] : []),
    '',
    result.correctnessProblems.length === 0 ? 'Correctness: passed' : `Correctness: FAILED\n${result.correctnessProblems.map((p) => `- ${p}`).join('\n')}`,
  ].join('\n');
}
