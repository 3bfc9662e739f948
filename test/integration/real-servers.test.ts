import http from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { histogram, scrape, sumValues } from '../helpers/prometheus-text.js';
import { RawClient, startRawUpstream } from '../helpers/raw-http.js';
import { eventually, startTestSidecar } from '../helpers/sidecar.js';
import { capturedResponses, dechunk, replayResponder, wireCapture } from '../helpers/wire-capture.js';

/**
 * tokentap in front of what real servers do on the wire (test/fixtures/streams/*.wire.jsonl):
 * llama-server closing every connection right after its stream, and uvicorn (vLLM) writing
 * `data: [DONE]` and the chunked terminator apart, to a client that leaves on `[DONE]`.
 */

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function setUp(respond: Parameters<typeof startRawUpstream>[0], configYaml = '') {
  const upstream = await startRawUpstream(respond);
  cleanups.push(() => upstream.close());
  const sidecar = await startTestSidecar(upstream.url, configYaml);
  cleanups.push(() => sidecar.close());
  return { upstream, sidecar };
}

const chunk = (data: string) => `${Buffer.byteLength(data).toString(16)}\r\n${data}\r\n`;

const CHAT = JSON.stringify({ model: 'tiny', stream: true, max_tokens: 8, messages: [{ role: 'user', content: 'Hi' }] });

/** One POST (or `method`) on `agent` (keep-alive, one socket: back to back on one client connection): status and body, or the error. */
function post(url: string, agent: http.Agent, body = CHAT, method = 'POST'): Promise<{ status: number; body: Buffer } | { error: string }> {
  return new Promise((resolve) => {
    const req = http.request(`${url}/v1/chat/completions`, { method, agent, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } });
    req.on('error', (error) => resolve({ error: error.message }));
    req.on('response', (res) => {
      const parts: Buffer[] = [];
      res.on('data', (d: Buffer) => parts.push(d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(parts) }));
      res.on('error', (error) => resolve({ error: error.message }));
    });
    req.end(body);
  });
}

describe('llama-server closes after every stream without Connection: close', () => {
  const llama = capturedResponses(wireCapture('llamacpp', 'chat-close-after-stream.wire.jsonl'));

  it('the capture is what the fixture README says: Keep-Alive announced, closed 0.3 ms after the last chunk', () => {
    expect(llama).toHaveLength(1);
    const response = llama[0]!;
    expect(response.wire.toString('latin1')).toMatch(/^HTTP\/1\.1 200 OK\r\nKeep-Alive: timeout=5, max=100\r\n/);
    expect(response.wire.toString('latin1')).not.toMatch(/connection: close/i);
    expect(response.closeAfterMs).toBeGreaterThan(0.2);
    expect(response.closeAfterMs).toBeLessThan(0.4);
  });

  it('800 back-to-back streamed requests on one client connection: 0 failures, every body byte-identical', async () => {
    const { upstream, sidecar } = await setUp(replayResponder(llama, { timeScale: 0 }));
    const expected = dechunk(llama[0]!.wire);
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    cleanups.push(async () => agent.destroy());
    const failures: string[] = [];
    const deadline = performance.now() + 60_000;
    let sent = 0;
    for (; sent < 800 && performance.now() < deadline; sent++) {
      const result = await post(sidecar.proxyUrl, agent);
      if ('error' in result) failures.push(`#${sent}: ${result.error}`);
      else if (result.status !== 200) failures.push(`#${sent}: status ${result.status} ${result.body.toString('utf8').slice(0, 200)}`);
      else if (!result.body.equals(expected)) failures.push(`#${sent}: body differs`);
    }
    expect(sent).toBe(800);
    expect(failures).toEqual([]);
    const requests = await eventually('800 request log lines', () => sidecar.logs.filter((l) => l.msg === 'request'), (lines) => lines.length === 800);
    expect(requests.filter((l) => l.outcome !== 'completed')).toEqual([]);
    const metrics = await scrape(sidecar.adminUrl);
    const notReused = sumValues(metrics, 'tokentap_upstream_connections_not_reused_total', { reason: 'upstream_closes_after_response' });
    // The pool learnt before reusing a connection: after the first few, connections are closed by
    // tokentap instead of pooled, and no request was sent into the server's close.
    expect(notReused).toBeGreaterThan(700);
    // The server got each request exactly once: none lost, none sent again (a POST never is).
    expect(upstream.seen.length).toBe(800);
    expect(sumValues(metrics, 'tokentap_upstream_retries_total')).toBe(0);
    expect(sumValues(metrics, 'tokentap_upstream_requests_not_retried_total')).toBe(0);
    expect(sumValues(metrics, 'tokentap_requests_total', { outcome: 'completed' })).toBe(800);
  }, 90_000);

  it('8 clients at once, 100 back-to-back requests each (GuideLLM at 8 streams): 0 failures, each request generated once', async () => {
    const { upstream, sidecar } = await setUp(replayResponder(llama, { timeScale: 0 }));
    const expected = dechunk(llama[0]!.wire);
    const failures: string[] = [];
    const deadline = performance.now() + 60_000;
    const stream = async (client: number) => {
      const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
      try {
        for (let i = 0; i < 100 && performance.now() < deadline; i++) {
          const result = await post(sidecar.proxyUrl, agent);
          if ('error' in result) failures.push(`${client}#${i}: ${result.error}`);
          else if (result.status !== 200 || !result.body.equals(expected)) failures.push(`${client}#${i}: status ${result.status}`);
        }
      } finally {
        agent.destroy();
      }
    };
    await Promise.all(Array.from({ length: 8 }, (_, client) => stream(client)));
    expect(failures).toEqual([]);
    const lines = await eventually('800 request lines', () => sidecar.logs.filter((l) => l.msg === 'request'), (l) => l.length === 800);
    expect(lines.filter((l) => l.outcome !== 'completed')).toEqual([]);
    expect(upstream.seen.length).toBe(800);
  }, 90_000);
});

describe('retrying a request whose reused connection closed before answering', () => {
  /** Answers the first request on each connection with a short stream and keeps the connection; then `onSecond`. */
  function keepThenClose(onSecond: 'close' | 'head-then-close') {
    const perConnection = new Map<number, number>();
    return (request: { connection: number }, socket: import('node:net').Socket) => {
      const n = (perConnection.get(request.connection) ?? 0) + 1;
      perConnection.set(request.connection, n);
      if (n === 1) {
        socket.write('HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n');
        socket.write(chunk('data: {"choices":[{"delta":{"content":"a"}}]}\n\n'));
        socket.write(`${chunk('data: [DONE]\n\n')}0\r\n\r\n`);
      } else if (onSecond === 'close') {
        socket.destroy();
      } else {
        socket.write('HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n');
        setTimeout(() => socket.destroy(), 20);
      }
    };
  }

  /** A first request, then a pause past the pool's REUSE_PROBATION_MS (100 ms): the next request reuses connection 1. */
  async function firstThenPause(url: string, agent: http.Agent) {
    expect(await post(url, agent)).toMatchObject({ status: 200 });
    await new Promise((resolve) => setTimeout(resolve, 300));
  }

  it('sends an idempotent request (GET) again on a fresh connection once, and says so in the log line', async () => {
    const { upstream, sidecar } = await setUp(keepThenClose('close'));
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    cleanups.push(async () => agent.destroy());
    await firstThenPause(sidecar.proxyUrl, agent);
    const second = await post(sidecar.proxyUrl, agent, CHAT, 'GET');
    expect(second).toMatchObject({ status: 200 });
    expect(upstream.seen.map((r) => [r.method, r.connection])).toEqual([
      ['POST', 1],
      ['GET', 1],
      ['GET', 2],
    ]);
    expect(upstream.seen[2]!.body.toString()).toBe(CHAT);
    const lines = await eventually('two request lines', () => sidecar.logs.filter((l) => l.msg === 'request'), (l) => l.length === 2);
    expect(lines.map((l) => [l.outcome, l.retried])).toEqual([
      ['completed', undefined],
      ['completed', true],
    ]);
    expect(sumValues(await scrape(sidecar.adminUrl), 'tokentap_upstream_retries_total')).toBe(1);
  });

  it('never sends a POST the upstream had whole again: 502, counted request_sent', async () => {
    const { upstream, sidecar } = await setUp(keepThenClose('close'));
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    cleanups.push(async () => agent.destroy());
    await firstThenPause(sidecar.proxyUrl, agent);
    expect(await post(sidecar.proxyUrl, agent)).toMatchObject({ status: 502 });
    expect(upstream.seen.map((r) => r.connection)).toEqual([1, 1]);
    expect(sumValues(await scrape(sidecar.adminUrl), 'tokentap_upstream_requests_not_retried_total', { reason: 'request_sent' })).toBe(1);
  });

  it('never retries once a response byte has arrived: the client sees the broken stream', async () => {
    const { upstream, sidecar } = await setUp(keepThenClose('head-then-close'));
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    cleanups.push(async () => agent.destroy());
    await firstThenPause(sidecar.proxyUrl, agent);
    const second = await post(sidecar.proxyUrl, agent, CHAT, 'GET');
    expect(second).toHaveProperty('error');
    expect(upstream.seen).toHaveLength(2);
    const lines = await eventually('two request lines', () => sidecar.logs.filter((l) => l.msg === 'request'), (l) => l.length === 2);
    expect(lines[1]).toMatchObject({ outcome: 'upstream_error' });
    expect(lines[1]!.retried).toBeUndefined();
  });

  it('does not retry a request whose body is larger than upstream_retry_body_limit: 502, counted retry_body_limit', async () => {
    const { upstream, sidecar } = await setUp(keepThenClose('close'), 'upstream_retry_body_limit: 100\n');
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    cleanups.push(async () => agent.destroy());
    await firstThenPause(sidecar.proxyUrl, agent);
    const big = JSON.stringify({ model: 'tiny', stream: true, messages: [{ role: 'user', content: 'x'.repeat(200) }] });
    const second = await post(sidecar.proxyUrl, agent, big, 'GET');
    expect(second).toMatchObject({ status: 502 });
    expect(upstream.seen).toHaveLength(2);
    expect(sumValues(await scrape(sidecar.adminUrl), 'tokentap_upstream_requests_not_retried_total', { reason: 'retry_body_limit' })).toBe(1);
  });
});

describe('uvicorn writes [DONE] and the chunked terminator apart', () => {
  const vllm = capturedResponses(wireCapture('vllm', 'chat-two-streams-one-connection.wire.jsonl'));

  it('the capture is what the fixture README says: two responses on one connection, the first terminator a write of its own', () => {
    expect(vllm).toHaveLength(2);
    expect(vllm[0]!.reads.at(-2)!.bytes.toString('latin1')).toBe('e\r\ndata: [DONE]\n\n\r\n');
    expect(vllm[0]!.reads.at(-1)!.bytes.toString('latin1')).toBe('0\r\n\r\n');
    expect(vllm[0]!.closeAfterMs).toBeUndefined();
  });

  async function leaveOn(marker: string, timeScale: number) {
    const { upstream, sidecar } = await setUp(replayResponder(vllm, { timeScale, holdTerminatorMs: 300 }));
    const client = await RawClient.connect(sidecar.proxyUrl);
    const body = '{"model":"tiny","stream":true,"max_tokens":24,"stream_options":{"include_usage":true,"continuous_usage_stats":true},"messages":[{"role":"user","content":"Tell me a story"}]}';
    client.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`);
    await client.read((text) => text.includes(marker));
    client.close();
    const line = await eventually('the request line', () => sidecar.logs.find((l) => l.msg === 'request'), (l) => l !== undefined);
    // Nothing more is recorded afterwards (the terminator arrives 300 ms later).
    await new Promise((r) => setTimeout(r, 500));
    return { line, sidecar, upstream };
  }

  it('a client that leaves on [DONE], before the terminator, is completed, recorded once; the upstream connection is not reused', async () => {
    const { line, sidecar, upstream } = await leaveOn('data: [DONE]\n\n', 0.2);
    expect(line).toMatchObject({ outcome: 'completed', status: 200, output_tokens: 24, content_events: 24, counted_tokens: 24 });
    const metrics = await scrape(sidecar.adminUrl);
    expect(sumValues(metrics, 'tokentap_requests_total')).toBe(1);
    expect(sumValues(metrics, 'tokentap_requests_total', { outcome: 'completed' })).toBe(1);
    expect(histogram(metrics, 'gen_ai_server_time_to_first_token_seconds').count).toBe(1);
    expect(histogram(metrics, 'gen_ai_server_request_duration_seconds', { outcome: 'completed' }).count).toBe(1);
    expect(histogram(metrics, 'gen_ai_server_request_duration_seconds').count).toBe(1);
    expect(histogram(metrics, 'tokentap_inter_token_latency_seconds').count).toBe(23);
    expect(sumValues(metrics, 'tokentap_token_count_mismatches_total')).toBe(0);
    expect(sidecar.logs.filter((l) => l.msg === 'request')).toHaveLength(1);
    expect(upstream.openSockets()).toHaveLength(0);
  });

  it('a client that leaves before [DONE] is still client_cancelled', async () => {
    // 10 times slower than captured: 12 tokens in, [DONE] is still about 100 ms away.
    const { line, sidecar } = await leaveOn('"completion_tokens":12}', 10);
    expect(line).toMatchObject({ outcome: 'client_cancelled' });
    expect(sumValues(await scrape(sidecar.adminUrl), 'tokentap_requests_total', { outcome: 'client_cancelled' })).toBe(1);
  });
});

describe('the simulator imitating llama-server (--close-after-stream) behind tokentap', () => {
  it('200 back-to-back streamed requests: 0 failures', async () => {
    const { startSimulator } = await import('../../src/simulator/index.js');
    const sim = await startSimulator({ port: 0, ttftMs: 1, itlMs: 0, outputTokens: 4, closeAfterStream: true });
    cleanups.push(() => sim.close());
    const sidecar = await startTestSidecar(sim.url);
    cleanups.push(() => sidecar.close());
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    cleanups.push(async () => agent.destroy());
    const failures: string[] = [];
    const deadline = performance.now() + 30_000;
    let sent = 0;
    for (; sent < 200 && performance.now() < deadline; sent++) {
      const result = await post(sidecar.proxyUrl, agent);
      if ('error' in result) failures.push(`#${sent}: ${result.error}`);
      else if (result.status !== 200 || !result.body.toString('utf8').endsWith('data: [DONE]\n\n')) failures.push(`#${sent}: status ${result.status}`);
    }
    expect(sent).toBe(200);
    expect(failures).toEqual([]);
  }, 60_000);
});
