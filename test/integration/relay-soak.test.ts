import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { scrape, sumValues } from '../helpers/prometheus-text.js';
import { eventually, startTestSidecar } from '../helpers/sidecar.js';

/**
 * Many requests of every kind at once through one sidecar on shared keep-alive connections:
 * streams, plain answers, every upstream fault and clients that leave mid-stream. Whatever the mix,
 * each request must be counted once with its own outcome, every stream that completes must arrive
 * whole, and nothing may be left open behind them (in-flight gauge, the upstream's requests).
 * Bounded: 192 requests, 24 at a time.
 */
type Kind = 'stream' | 'plain' | 'status' | 'reset' | 'truncate' | 'stall' | 'error' | 'abort';
const KINDS: Kind[] = ['stream', 'plain', 'status', 'reset', 'truncate', 'stall', 'error', 'abort'];
const FAULT: Partial<Record<Kind, string>> = { status: 'status:503', reset: 'reset:3', truncate: 'truncate:3', stall: 'stall:2', error: 'error:2' };

let simulator: RunningSimulator;
let sidecar: Awaited<ReturnType<typeof startTestSidecar>>;

beforeAll(async () => {
  simulator = await startSimulator({ port: 0, ttftMs: 5, itlMs: 2, outputTokens: 16 });
  // Long enough that a plain answer (37 ms of generation) is never taken for a stall on a loaded
  // machine (at 300 ms, a CI run under load answered one with the timeout's 504), short enough
  // that the stalled streams end quickly.
  sidecar = await startTestSidecar(simulator.url, 'upstream_idle_timeout: 2s\n');
});

afterAll(async () => {
  await sidecar?.close();
  await simulator?.close();
});

interface Result {
  kind: Kind;
  status: number;
  body: string;
  ended: 'clean' | 'error' | 'aborted';
}

function send(agent: http.Agent, kind: Kind, seed: number): Promise<Result> {
  const body = JSON.stringify({ model: 'soak', stream: kind !== 'plain', messages: [{ role: 'user', content: `hi ${seed}` }] });
  const headers: Record<string, string> = { 'content-type': 'application/json', 'x-sim-seed': String(seed) };
  const fault = FAULT[kind];
  if (fault !== undefined) headers['x-sim-fault'] = fault;
  // Slow enough (16 tokens over 800 ms) that the client surely leaves before the stream ends, even on a loaded machine.
  if (kind === 'abort') headers['x-sim-itl-ms'] = '50';
  return new Promise((resolve) => {
    const req = http.request(`${sidecar.proxyUrl}/v1/chat/completions`, { method: 'POST', agent, headers });
    const result: Result = { kind, status: 0, body: '', ended: 'error' };
    req.on('error', () => resolve(result));
    req.on('response', (res) => {
      result.status = res.statusCode ?? 0;
      res.setEncoding('utf8');
      res.on('data', (text: string) => {
        result.body += text;
        // Leaves after the first few tokens, long before the 16 tokens end.
        if (kind === 'abort' && result.body.split('data: ').length > 3) {
          result.ended = 'aborted';
          req.destroy();
        }
      });
      res.on('end', () => {
        result.ended = 'clean';
        resolve(result);
      });
      res.on('close', () => resolve(result));
    });
    req.end(body);
  });
}

describe('the relay under a mixed load', () => {
  it('counts every request once with its outcome, delivers whole streams, and leaves nothing open', async () => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 24 });
    const total = 192;
    const kinds = Array.from({ length: total }, (_, i) => KINDS[i % KINDS.length] as Kind);
    const results = await Promise.all(kinds.map((kind, i) => send(agent, kind, i)));
    agent.destroy();

    const of = (kind: Kind) => results.filter((r) => r.kind === kind);
    for (const r of of('stream')) {
      expect(r.ended).toBe('clean');
      expect(r.body.endsWith('data: [DONE]\n\n')).toBe(true);
    }
    for (const r of of('plain')) expect(JSON.parse(r.body).usage.completion_tokens).toBe(16);
    for (const r of of('status')) expect(r.status).toBe(503);
    for (const r of of('reset')) expect(r.ended).toBe('error');
    for (const r of of('stall')) expect(r.ended).toBe('error');
    for (const r of of('abort')) expect(r.ended).toBe('aborted');

    const per = total / KINDS.length;
    const m = await eventually(
      'every request recorded',
      () => scrape(sidecar.adminUrl),
      (x) => sumValues(x, 'tokentap_requests_total', { gen_ai_request_model: 'soak' }) === total,
    );
    const outcome = (name: string) => sumValues(m, 'tokentap_requests_total', { gen_ai_request_model: 'soak', outcome: name });
    expect(outcome('completed')).toBe(2 * per);
    expect(outcome('client_cancelled')).toBe(per);
    expect(outcome('upstream_error')).toBe(3 * per);
    expect(outcome('truncated')).toBe(per);
    expect(outcome('timeout')).toBe(per);
    expect(sumValues(m, 'tokentap_requests_in_flight', {})).toBe(0);
    await eventually('the upstream has nothing open', () => simulator.stats().inFlight, (n) => n === 0);
  });
});
