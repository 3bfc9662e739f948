import http from 'node:http';
import type net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { llamacppStream, splitEvents, vllmStream } from '../helpers/fixtures.js';
import { scrape, sumValues } from '../helpers/prometheus-text.js';
import { startRawUpstream, type RawRequest } from '../helpers/raw-http.js';
import { eventually, startTestSidecar } from '../helpers/sidecar.js';
import { capturedResponses, dechunk, replayResponder, wireCapture } from '../helpers/wire-capture.js';

/**
 * Every capture of a real llama.cpp and vLLM server (test/fixtures/streams/, copied from
 * ../shared/fixtures/streams/) replayed through the proxy: byte-identical at the client, with the
 * exact content events and tokens the capture holds, and the right outcome. Body captures are
 * written one SSE event per HTTP chunk (as both servers do: chat-completions-wire.txt) 2 ms apart;
 * wire captures read for read at their captured times.
 */

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function setUp(respond: (request: RawRequest, socket: net.Socket) => void) {
  const upstream = await startRawUpstream(respond);
  cleanups.push(() => upstream.close());
  const sidecar = await startTestSidecar(upstream.url);
  cleanups.push(() => sidecar.close());
  return { upstream, sidecar };
}

/** POSTs on `agent` and reads the whole answer. */
function post(url: string, path: string, agent: http.Agent | false = false): Promise<{ status: number; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const body = JSON.stringify({ model: 'tiny', stream: true, messages: [{ role: 'user', content: 'Hi' }] });
    const req = http.request(`${url}${path}`, { method: 'POST', agent, headers: { 'content-type': 'application/json' } });
    req.on('error', reject);
    req.on('response', (res) => {
      const parts: Buffer[] = [];
      res.on('data', (d: Buffer) => parts.push(d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(parts) }));
      res.on('error', reject);
    });
    req.end(body);
  });
}

const chunk = (data: Buffer) => Buffer.concat([Buffer.from(`${data.length.toString(16)}\r\n`), data, Buffer.from('\r\n')]);

/** Answers with `events`, each its own chunk, `gapMs` apart, as llama-server and uvicorn write them. */
function eventsResponder(events: readonly Buffer[], gapMs: number) {
  return (_request: RawRequest, socket: net.Socket) => {
    socket.write('HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n');
    let i = 0;
    const next = () => {
      if (socket.destroyed) return;
      if (i === events.length) {
        socket.write('0\r\n\r\n');
        return;
      }
      socket.write(chunk(events[i++] as Buffer));
      setTimeout(next, gapMs);
    };
    setTimeout(next, gapMs);
  };
}

interface Expected {
  readonly path: string;
  readonly contentEvents: number;
  readonly countedTokens: number;
  readonly outputTokens: number;
}

/** From the fixture README and the captures themselves (events with non-empty content, the usage the server reported). */
const BODY_CAPTURES: ReadonlyArray<[string, () => Buffer, Expected]> = [
  ['llamacpp/chat-completions.sse', () => llamacppStream('chat-completions.sse'), { path: '/v1/chat/completions', contentEvents: 128, countedTokens: 128, outputTokens: 128 }],
  // A held UTF-8 token: 127 events for 128 tokens, legitimately one apart.
  ['llamacpp/chat-completions-held-utf8-token.sse', () => llamacppStream('chat-completions-held-utf8-token.sse'), { path: '/v1/chat/completions', contentEvents: 127, countedTokens: 127, outputTokens: 128 }],
  ['llamacpp/chat-completions-timings-per-token.sse', () => llamacppStream('chat-completions-timings-per-token.sse'), { path: '/v1/chat/completions', contentEvents: 3, countedTokens: 3, outputTokens: 3 }],
  ['llamacpp/completions.sse', () => llamacppStream('completions.sse'), { path: '/v1/completions', contentEvents: 128, countedTokens: 128, outputTokens: 128 }],
  ['llamacpp/completion-native.sse', () => llamacppStream('completion-native.sse'), { path: '/completion', contentEvents: 128, countedTokens: 128, outputTokens: 128 }],
  // Two empty deltas: 22 content events; no usage asked for, so the output is the counted 22.
  ['vllm/chat.sse', () => vllmStream('chat.sse'), { path: '/v1/chat/completions', contentEvents: 22, countedTokens: 22, outputTokens: 22 }],
  ['vllm/chat-continuous-usage.sse', () => vllmStream('chat-continuous-usage.sse'), { path: '/v1/chat/completions', contentEvents: 24, countedTokens: 24, outputTokens: 24 }],
  ['vllm/completions.sse', () => vllmStream('completions.sse'), { path: '/v1/completions', contentEvents: 16, countedTokens: 16, outputTokens: 16 }],
];

function expectLine(line: Record<string, unknown>, expected: Expected): void {
  expect({ outcome: line.outcome, status: line.status, content_events: line.content_events, counted_tokens: line.counted_tokens, output_tokens: line.output_tokens }).toEqual({
    outcome: 'completed',
    status: 200,
    content_events: expected.contentEvents,
    counted_tokens: expected.countedTokens,
    output_tokens: expected.outputTokens,
  });
}

describe('body captures through the proxy', () => {
  it.each(BODY_CAPTURES)('%s: byte-identical, exact counts, completed', async (_name, stream, expected) => {
    const capture = stream();
    const { sidecar } = await setUp(eventsResponder(splitEvents(capture), 2));
    const result = await post(sidecar.proxyUrl, expected.path);
    expect(result.status).toBe(200);
    expect(result.body.equals(capture)).toBe(true);
    const [line] = await eventually('the request line', () => sidecar.logs.filter((l) => l.msg === 'request'), (l) => l.length === 1);
    expectLine(line!, expected);
    expect(sumValues(await scrape(sidecar.adminUrl), 'tokentap_tap_errors_total')).toBe(0);
  });
});

describe('wire captures through the proxy', () => {
  it('llamacpp/chat-completions-wire.txt: the captured HTTP response, chunk for chunk: byte-identical body, 2 events, usage 2', async () => {
    const wire = llamacppStream('chat-completions-wire.txt');
    const headEnd = wire.indexOf('\r\n\r\n') + 4;
    // One write per captured chunk: the head, then each "size CRLF data CRLF", then the terminator.
    const writes: Buffer[] = [wire.subarray(0, headEnd)];
    for (let offset = headEnd; offset < wire.length; ) {
      const lineEnd = wire.indexOf('\r\n', offset);
      const size = parseInt(wire.subarray(offset, lineEnd).toString('latin1'), 16);
      const end = size === 0 ? lineEnd + 4 : lineEnd + 2 + size + 2;
      writes.push(wire.subarray(offset, end));
      offset = end;
    }
    const { sidecar } = await setUp((_request, socket) => {
      writes.forEach((piece, i) => setTimeout(() => socket.write(piece), i * 2));
    });
    const result = await post(sidecar.proxyUrl, '/v1/chat/completions');
    expect(result.body.equals(dechunk(wire))).toBe(true);
    const [line] = await eventually('the request line', () => sidecar.logs.filter((l) => l.msg === 'request'), (l) => l.length === 1);
    expectLine(line!, { path: '', contentEvents: 2, countedTokens: 2, outputTokens: 2 });
  });

  it('llamacpp/chat-close-after-stream.wire.jsonl at its captured timing: byte-identical, 8 tokens, completed, and the next request on the same client connection too', async () => {
    const responses = capturedResponses(wireCapture('llamacpp', 'chat-close-after-stream.wire.jsonl'));
    const { sidecar } = await setUp(replayResponder(responses, { timeScale: 1 }));
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    cleanups.push(async () => agent.destroy());
    for (let i = 0; i < 2; i++) {
      const result = await post(sidecar.proxyUrl, '/v1/chat/completions', agent);
      expect(result.status).toBe(200);
      expect(result.body.equals(dechunk(responses[0]!.wire))).toBe(true);
    }
    const lines = await eventually('two request lines', () => sidecar.logs.filter((l) => l.msg === 'request'), (l) => l.length === 2);
    for (const line of lines) expectLine(line, { path: '', contentEvents: 8, countedTokens: 8, outputTokens: 8 });
  });

  it('vllm/chat-two-streams-one-connection.wire.jsonl at its captured timing: both streams byte-identical on one connection, exact counts, completed', async () => {
    const responses = capturedResponses(wireCapture('vllm', 'chat-two-streams-one-connection.wire.jsonl'));
    const { upstream, sidecar } = await setUp(replayResponder(responses, { timeScale: 1 }));
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    cleanups.push(async () => agent.destroy());
    for (const response of responses) {
      const result = await post(sidecar.proxyUrl, '/v1/chat/completions', agent);
      expect(result.status).toBe(200);
      expect(result.body.equals(dechunk(response.wire))).toBe(true);
      // A fresh pool hands a connection out again once it has outlived REUSE_PROBATION_MS (100 ms).
      await new Promise((resolve) => setTimeout(resolve, 300));
    }
    // uvicorn keeps the connection: both requests went on one upstream connection.
    expect(upstream.seen.map((r) => r.connection)).toEqual([1, 1]);
    const lines = await eventually('two request lines', () => sidecar.logs.filter((l) => l.msg === 'request'), (l) => l.length === 2);
    expectLine(lines[0]!, { path: '', contentEvents: 24, countedTokens: 24, outputTokens: 24 });
    expectLine(lines[1]!, { path: '', contentEvents: 22, countedTokens: 22, outputTokens: 22 });
    expect(sumValues(await scrape(sidecar.adminUrl), 'tokentap_token_count_mismatches_total')).toBe(0);
  });
});
