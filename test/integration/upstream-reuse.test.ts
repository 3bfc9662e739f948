import http from 'node:http';
import type net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { scrape, sumValues } from '../helpers/prometheus-text.js';
import { startRawUpstream, type RawRequest } from '../helpers/raw-http.js';
import { startTestSidecar } from '../helpers/sidecar.js';

/**
 * When the upstream pool reuses a connection and when it does not (upstream-pool.ts). Reproduces
 * issue 23 item 7: llama-server writes a non-streamed response's head and body in two send() calls
 * with Nagle's algorithm on; on a reused connection the body waits for tokentap's delayed ACK
 * (40 ms on Linux), so each request took about 40 ms more through tokentap than straight to the
 * server on a fresh connection (800 requests: 23.3 s against 7.0 s).
 */

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
/** Longer than the pool's REUSE_PROBATION_MS (100 ms): the first connection is then handed out again. */
const PAST_PROBATION_MS = 300;

const BODY = JSON.stringify({ id: 'chatcmpl-1', object: 'chat.completion', choices: [{ index: 0, message: { role: 'assistant', content: 'Hello' }, finish_reason: 'stop' }] });

/** As llama-server answers a non-streamed request: Nagle on, the head and the body in two writes. */
function headThenBodyWithNagle(_request: RawRequest, socket: net.Socket): void {
  socket.setNoDelay(false);
  socket.write(`HTTP/1.1 200 OK\r\nKeep-Alive: timeout=5, max=100\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${BODY.length}\r\n\r\n`);
  socket.write(BODY);
}

async function upstreamAndSidecar(respond: (request: RawRequest, socket: net.Socket) => void) {
  const upstream = await startRawUpstream(respond);
  cleanups.push(() => upstream.close());
  const sidecar = await startTestSidecar(upstream.url);
  cleanups.push(() => sidecar.close());
  return { upstream, sidecar };
}

function keepAliveAgent(): http.Agent {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  cleanups.push(async () => agent.destroy());
  return agent;
}

/** One non-streamed POST; resolves with the status and the body. */
function post(url: string, agent: http.Agent, stream = false): Promise<{ status: number; body: string }> {
  const body = JSON.stringify({ model: 'tiny', stream, messages: [{ role: 'user', content: 'Hi' }] });
  return new Promise((resolve, reject) => {
    const req = http.request(`${url}/v1/chat/completions`, { method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': body.length } });
    req.on('error', reject);
    req.on('response', (res) => {
      const parts: Buffer[] = [];
      res.on('data', (d: Buffer) => parts.push(d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(parts).toString('utf8') }));
    });
    req.end(body);
  });
}

describe('an upstream whose responses stall on reused connections (head and body in two writes, Nagle on)', () => {
  it('the stall is real: straight to the upstream, most requests on a kept connection wait for a delayed ACK (30 ms or more)', async () => {
    const upstream = await startRawUpstream(headThenBodyWithNagle);
    cleanups.push(() => upstream.close());
    const agent = keepAliveAgent();
    await post(upstream.url, agent);
    const durations: number[] = [];
    for (let i = 0; i < 5; i++) {
      const started = performance.now();
      expect(await post(upstream.url, agent)).toEqual({ status: 200, body: BODY });
      durations.push(performance.now() - started);
    }
    expect(upstream.connections()).toBe(1);
    // Linux's delayed-ACK minimum is 40 ms. On a loaded machine an ACK can leave early (piggybacked,
    // or quick-ACK mode after a pause: a CI run saw one request of 5 take 1.6 ms), so the median.
    expect(durations.sort((a, b) => a - b)[2]).toBeGreaterThanOrEqual(30);
  });

  it('through tokentap, after 3 stalls in a row the pool gives each request a fresh connection, counted: 100 sequential requests do not each wait 40 ms', async () => {
    const { upstream, sidecar } = await upstreamAndSidecar(headThenBodyWithNagle);
    const agent = keepAliveAgent();
    await post(sidecar.proxyUrl, agent);
    await sleep(PAST_PROBATION_MS);
    for (let i = 0; i < 100; i++) expect(await post(sidecar.proxyUrl, agent)).toEqual({ status: 200, body: BODY });
    // Requests sent on a kept connection: 3 stalls in a row teach the pool (DELAYED_REUSES_TO_STOP);
    // a reuse that happens to be quick (an early ACK on a loaded machine, or after an idle spell)
    // starts the count again, so a few more. Before: all 100 reused, each about 45 ms (4.5-4.7 s);
    // the time itself is measured in docs/measurement.md, not asserted here.
    expect(101 - upstream.connections()).toBeLessThanOrEqual(10);
    const metrics = await scrape(sidecar.adminUrl);
    expect(sumValues(metrics, 'tokentap_upstream_connections_not_reused_total', { reason: 'upstream_delays_body_on_reuse' })).toBeGreaterThanOrEqual(90);
  });
});

describe('an upstream that keeps its connections and answers at once keeps being pooled', () => {
  it('one write per response: once the first connection outlived the probation, 100 sequential requests share it', async () => {
    const { upstream, sidecar } = await upstreamAndSidecar((_request, socket) => socket.write(`HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ${BODY.length}\r\n\r\n${BODY}`));
    const agent = keepAliveAgent();
    await post(sidecar.proxyUrl, agent);
    await sleep(PAST_PROBATION_MS);
    for (let i = 0; i < 100; i++) expect(await post(sidecar.proxyUrl, agent)).toEqual({ status: 200, body: BODY });
    expect(upstream.connections()).toBe(1);
    expect(sumValues(await scrape(sidecar.adminUrl), 'tokentap_upstream_connections_not_reused_total')).toBe(0);
  });

  it('a streamed answer whose first event comes 60 ms after its head is not taken for a stall: still pooled', async () => {
    const chunk = (data: string) => `${Buffer.byteLength(data).toString(16)}\r\n${data}\r\n`;
    const { upstream, sidecar } = await upstreamAndSidecar((_request, socket) => {
      socket.setNoDelay(false);
      socket.write('HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n');
      setTimeout(() => socket.write(`${chunk('data: {"choices":[{"delta":{"content":"a"}}]}\n\n')}${chunk('data: [DONE]\n\n')}0\r\n\r\n`), 60);
    });
    const agent = keepAliveAgent();
    await post(sidecar.proxyUrl, agent, true);
    await sleep(PAST_PROBATION_MS);
    for (let i = 0; i < 8; i++) expect((await post(sidecar.proxyUrl, agent, true)).status).toBe(200);
    expect(upstream.connections()).toBe(1);
  });
});
