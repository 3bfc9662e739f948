import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { scrape, sumValues } from '../helpers/prometheus-text.js';
import { RawClient, startRawUpstream, type RawRequest } from '../helpers/raw-http.js';
import { eventually, startTestSidecar } from '../helpers/sidecar.js';

/**
 * A request lost on a reused upstream connection is sent again only when that cannot run it twice
 * (exchange.ts retryable(), RFC 9110 section 9.2.2). Reproduces issue 23 item 2: an upstream that
 * read a POST whole on a reused connection, worked on it for 1.5 s and closed without answering had
 * it sent again and generated twice (4 of 4; 20 of 20 when it closed right after reading).
 */

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** Longer than the pool's REUSE_PROBATION_MS (100 ms): the first connection is then handed out again. */
const PAST_PROBATION_MS = 300;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const OK = 'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 11\r\n\r\n{"ok":true}';

async function setUp(respond: (request: RawRequest, socket: net.Socket, onConnection: number) => void) {
  const perConnection = new Map<number, number>();
  const upstream = await startRawUpstream((request, socket) => {
    const n = (perConnection.get(request.connection) ?? 0) + 1;
    perConnection.set(request.connection, n);
    respond(request, socket, n);
  });
  cleanups.push(() => upstream.close());
  const sidecar = await startTestSidecar(upstream.url);
  cleanups.push(() => sidecar.close());
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  cleanups.push(async () => agent.destroy());
  return { upstream, sidecar, agent };
}

function send(url: string, agent: http.Agent, method: string, body: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${url}/v1/chat/completions`, { method, agent, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } });
    req.on('error', reject);
    req.on('response', (res) => {
      const parts: Buffer[] = [];
      res.on('data', (d: Buffer) => parts.push(d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(parts).toString('utf8') }));
    });
    req.end(body);
  });
}

const generation = (id: string) => JSON.stringify({ model: 'tiny', messages: [{ role: 'user', content: id }] });
const timesSeen = (seen: readonly RawRequest[], body: string) => seen.filter((r) => r.body.toString('utf8') === body).length;

/** The first request on a connection is answered; the second is read whole, then `onSecond` (the upstream's doing). */
async function secondRequestLost(method: string, onSecond: (socket: net.Socket) => void) {
  const { upstream, sidecar, agent } = await setUp((_request, socket, n) => {
    if (n === 1) socket.write(OK);
    else onSecond(socket);
  });
  expect((await send(sidecar.proxyUrl, agent, 'POST', generation('warm-up'))).status).toBe(200);
  await sleep(PAST_PROBATION_MS);
  const body = generation('write a poem');
  const answer = await send(sidecar.proxyUrl, agent, method, body);
  // The request went on the reused connection (1), and nowhere else unless it was retried.
  expect(upstream.seen[1]!.connection).toBe(1);
  return { upstream, sidecar, answer, body };
}

describe('a POST lost on a reused upstream connection is never generated twice', () => {
  it('a POST the upstream read whole, worked on and closed without answering gets a 502 and reaches the upstream once (issue 23: 4 of 4 generated twice)', async () => {
    const { upstream, sidecar, answer, body } = await secondRequestLost('POST', (socket) => setTimeout(() => socket.destroy(), 300));
    expect(answer.status).toBe(502);
    expect(JSON.parse(answer.body).error.message).toMatch(/closed the connection before answering; the request was not sent again: the upstream had all of it and may have processed it$/);
    await sleep(100);
    expect(timesSeen(upstream.seen, body)).toBe(1);
    expect(upstream.connections()).toBe(1);
    const metrics = await scrape(sidecar.adminUrl);
    expect(sumValues(metrics, 'tokentap_upstream_requests_not_retried_total', { reason: 'request_sent' })).toBe(1);
    expect(sumValues(metrics, 'tokentap_upstream_retries_total')).toBe(0);
    const lines = await eventually('two request lines', () => sidecar.logs.filter((l) => l.msg === 'request'), (l) => l.length === 2);
    expect(lines[1]).toMatchObject({ outcome: 'upstream_error', status: 502 });
    expect(lines[1]!.retried).toBeUndefined();
  });

  it('a POST the upstream closed on right after reading it whole gets a 502 and reaches the upstream once (issue 23: 20 of 20 generated twice)', async () => {
    const { upstream, sidecar, answer, body } = await secondRequestLost('POST', (socket) => socket.destroy());
    expect(answer.status).toBe(502);
    await sleep(100);
    expect(timesSeen(upstream.seen, body)).toBe(1);
    expect(sumValues(await scrape(sidecar.adminUrl), 'tokentap_upstream_requests_not_retried_total', { reason: 'request_sent' })).toBe(1);
  });

  it('a POST the upstream reset (RST) after reading it whole gets a 502 and reaches the upstream once: a reset proves nothing either', async () => {
    const { upstream, answer, body } = await secondRequestLost('POST', (socket) => setTimeout(() => socket.resetAndDestroy(), 20));
    expect(answer.status).toBe(502);
    await sleep(100);
    expect(timesSeen(upstream.seen, body)).toBe(1);
  });

  it('an idempotent GET lost the same way is sent again once on a fresh connection (RFC 9110 section 9.2.2 allows it)', async () => {
    const { upstream, sidecar, answer, body } = await secondRequestLost('GET', (socket) => socket.destroy());
    expect(answer).toEqual({ status: 200, body: '{"ok":true}' });
    expect(upstream.seen.map((r) => [r.method, r.connection])).toEqual([
      ['POST', 1],
      ['GET', 1],
      ['GET', 2],
    ]);
    expect(timesSeen(upstream.seen, body)).toBe(2);
    expect(sumValues(await scrape(sidecar.adminUrl), 'tokentap_upstream_retries_total')).toBe(1);
    const lines = await eventually('two request lines', () => sidecar.logs.filter((l) => l.msg === 'request'), (l) => l.length === 2);
    expect(lines[1]).toMatchObject({ outcome: 'completed', retried: true });
  });

  it('a POST whose body was still arriving when its reused connection closed is sent again, whole, on a fresh connection: the upstream never had it', async () => {
    // Connection 1 answers one request, then closes as soon as the next one's first bytes arrive.
    const bodies: Array<{ connection: number; wire: string }> = [];
    let connections = 0;
    let firstClosed = false;
    const server = net.createServer((socket) => {
      const connection = ++connections;
      socket.on('error', () => {});
      let received = '';
      let answered = false;
      socket.on('data', (data: Buffer) => {
        received += data.toString('latin1');
        if (connection === 1 && answered) {
          firstClosed = true;
          socket.destroy();
          return;
        }
        const headEnd = received.indexOf('\r\n\r\n');
        const length = Number(/content-length: (\d+)/i.exec(received)?.[1] ?? -1);
        if (headEnd === -1 || received.length < headEnd + 4 + length) return;
        bodies.push({ connection, wire: received.slice(headEnd + 4) });
        received = '';
        answered = true;
        socket.write(OK);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => new Promise((resolve) => server.close(() => resolve())));
    const sidecar = await startTestSidecar(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    cleanups.push(() => sidecar.close());
    const client = await RawClient.connect(sidecar.proxyUrl);
    cleanups.push(async () => client.close());
    const head = (length: number) => `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\ncontent-length: ${length}\r\n\r\n`;
    const warmUp = generation('warm-up');
    client.write(head(warmUp.length) + warmUp);
    await client.read((text) => text.includes('{"ok":true}'));
    await sleep(PAST_PROBATION_MS);
    const body = generation('write a poem');
    client.write(head(body.length) + body.slice(0, 10));
    await eventually('connection 1 closed by the upstream', () => firstClosed, (closed) => closed);
    await sleep(50);
    client.write(body.slice(10));
    const text = await client.read((t) => t.split('{"ok":true}').length === 3);
    expect(text.match(/HTTP\/1\.1 200 OK/g)).toHaveLength(2);
    expect(bodies).toEqual([
      { connection: 1, wire: warmUp },
      { connection: 2, wire: body },
    ]);
    expect(sumValues(await scrape(sidecar.adminUrl), 'tokentap_upstream_retries_total')).toBe(1);
  });
});

describe('a server that closes some connections right after their answer (llama-server after a stream)', () => {
  it('300 back-to-back POSTs, one in three streamed and its connection closed 1 ms after the stream: 0 errors, each request read by the upstream once', async () => {
    const chunk = (data: string) => `${Buffer.byteLength(data).toString(16)}\r\n${data}\r\n`;
    // What arrives on a connection the server is closing is read but never answered (llama-server is past its loop).
    const closing = new Set<number>();
    const { upstream, sidecar, agent } = await setUp((request, socket) => {
      if (closing.has(request.connection)) return;
      if (JSON.parse(request.body.toString('utf8')).stream === true) {
        socket.write(`HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n${chunk('data: {"choices":[{"delta":{"content":"a"}}]}\n\n')}${chunk('data: [DONE]\n\n')}0\r\n\r\n`);
        closing.add(request.connection);
        setTimeout(() => socket.destroy(), 1);
      } else {
        socket.write(OK);
      }
    });
    const failures: string[] = [];
    const deadline = performance.now() + 60_000;
    let sent = 0;
    for (; sent < 300 && performance.now() < deadline; sent++) {
      const body = JSON.stringify({ model: 'tiny', stream: sent % 3 === 0, messages: [{ role: 'user', content: `request ${sent}` }] });
      const answer = await send(sidecar.proxyUrl, agent, 'POST', body);
      if (answer.status !== 200) failures.push(`#${sent}: ${answer.status} ${answer.body.slice(0, 200)}`);
    }
    expect(sent).toBe(300);
    expect(failures).toEqual([]);
    const readTwice = [...new Set(upstream.seen.map((r) => r.body.toString('utf8')))].filter((body) => timesSeen(upstream.seen, body) > 1);
    expect(readTwice).toEqual([]);
    expect(upstream.seen).toHaveLength(300);
  }, 90_000);
});
