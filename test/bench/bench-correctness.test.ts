import { describe, expect, it } from 'vitest';
import { CORRECTNESS_PLAN, runBench } from './bench.js';
import { compareBodies, normalisedBody } from './correctness.js';
import type { ClientRequest, StreamResult } from './load.js';

/**
 * The benchmark's correctness checks, shortened for CI (`npm test`; `npm run bench -- --correctness`
 * is the same run from the command line): real simulator, real tokentap processes (observation on
 * and off), nginx when installed. No timing is asserted: the machine is shared.
 */
describe('bench correctness mode', () => {
  it('streams identical bytes through every path and the sidecar counts every token', { timeout: 180_000 }, async () => {
    const lines: string[] = [];
    const result = await runBench({ ...CORRECTNESS_PLAN, log: (line) => lines.push(line) });
    expect(result.correctnessProblems, lines.join('\n')).toEqual([]);
    expect(result.stamps).toBe(true);
    for (const cell of result.streaming) {
      expect(cell.completed, `${cell.system}: ${JSON.stringify(cell.failures)}`).toBe(cell.sent);
      expect(cell.tokensPerS).toBeGreaterThan(0);
    }
    // The HTTP/2 cells ran on every path, each chunk stamped (gRPC through its token ids).
    for (const protocol of ['grpc', 'sse-h2c'] as const) {
      const h2 = result.streaming.filter((c) => c.protocol === protocol);
      expect(h2.map((c) => c.system), `${protocol}; notes: ${result.notes.join('; ')}`).toEqual(expect.arrayContaining(['direct', 'tokentap']));
      for (const cell of h2) expect(cell.delayMs?.p50, `${protocol} ${cell.system}`).toBeGreaterThan(0);
    }
    const tokentap = result.streaming.find((c) => c.system === 'tokentap' && c.protocol === 'http1');
    // The accuracy comparison found log lines to pair with the client's requests. Not all of them:
    // pairing goes by model name and start time, which a loaded machine blurs; that every request
    // was logged once with 64 tokens is checked exactly above (correctnessProblems).
    expect(tokentap?.accuracy?.pairs).toBeGreaterThan(0);
    expect(result.streaming.filter((c) => c.protocol === 'http1').map((c) => c.system)).toEqual(expect.arrayContaining(['direct', 'tokentap', 'tokentap-unobserved']));
    for (const cell of result.unary) expect(cell.completed, cell.system).toBe(cell.sent);
    // The paired cell measured both processes (CPU time is read from /proc, so both must have used some).
    expect(result.pairedObservation).toHaveLength(1);
    expect(result.pairedObservation[0]?.observedCpuMsPer1kTokens).toBeGreaterThan(0);
    expect(result.pairedObservation[0]?.unobservedCpuMsPer1kTokens).toBeGreaterThan(0);
  });
});

describe('bench body comparison', () => {
  const request = (text: string): ClientRequest => ({ model: 'm', startEpochMs: 0, status: 200, ttftMs: 1, e2eMs: 1, tokens: 1, tpotMs: Number.NaN, ok: true, body: Buffer.from(text) });
  const run = (...texts: string[]): StreamResult => ({ requests: texts.map(request) }) as unknown as StreamResult;

  it('ignores only the created timestamp', () => {
    expect(normalisedBody(Buffer.from('{"id":"a","created":1700000000}')).toString()).toBe('{"id":"a","created":0}');
    expect(compareBodies('p', run('{"created":1,"x":"a"}'), run('{"created":2,"x":"a"}'))).toEqual([]);
  });

  it('reports a body that differs in one byte', () => {
    expect(compareBodies('p', run('data: {"x":"a"}\n\n'), run('data: {"x":"b"}\n\n'))).toEqual([
      'p: request 0 body differs from the direct one (17 bytes against 17)',
    ]);
  });
});
