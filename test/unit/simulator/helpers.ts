import { request, type IncomingHttpHeaders } from 'node:http';
import { connect } from 'node:net';
import { afterEach } from 'vitest';
import { startSimulator, type RunningSimulator, type SimulatorOptions } from '../../../src/simulator/index.js';
import { createRandom, pickTokens } from '../../../src/simulator/vocabulary.js';

/** Small delays keep the suite fast; tests that measure time set their own. */
export const FAST: SimulatorOptions = { port: 0, ttftMs: 5, itlMs: 1 };

const running: RunningSimulator[] = [];

/** A simulator on an ephemeral loopback port, closed after the test. */
export async function simulator(options: SimulatorOptions = {}): Promise<RunningSimulator> {
  const sim = await startSimulator({ ...FAST, ...options });
  running.push(sim);
  return sim;
}

afterEach(async () => {
  await Promise.all(running.splice(0).map((sim) => sim.close()));
});

export interface RawResponse {
  readonly status: number;
  /** The status line and headers exactly as received. */
  readonly head: string;
  readonly headers: Readonly<Record<string, string>>;
  /** Payloads of the HTTP/1.1 chunks, in order (chunked responses only). */
  readonly chunks: readonly Buffer[];
  /** The decoded body. */
  readonly body: Buffer;
  /** True when a chunked body ended with its zero-length chunk, or a fixed body was complete. */
  readonly complete: boolean;
  /** The socket error, if the connection failed rather than closing. */
  readonly error: (Error & { code?: string }) | undefined;
}

/**
 * One request over a raw socket, so the test sees the bytes on the wire: header text, HTTP chunk
 * boundaries, and exactly how the connection ended.
 */
export function rawRequest(
  port: number,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<RawResponse> {
  const payload = body === undefined ? '' : typeof body === 'string' ? body : JSON.stringify(body);
  const lines = [
    `${method} ${path} HTTP/1.1`,
    'host: 127.0.0.1',
    'connection: close',
    ...(payload === '' ? [] : ['content-type: application/json', `content-length: ${Buffer.byteLength(payload)}`]),
    ...Object.entries(headers).map(([name, value]) => `${name}: ${value}`),
  ];
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    const received: Buffer[] = [];
    let error: Error | undefined;
    socket.on('data', (data: Buffer) => received.push(data));
    socket.on('error', (err) => (error = err));
    socket.on('close', () => resolve(parseRaw(Buffer.concat(received), error)));
    socket.write(`${lines.join('\r\n')}\r\n\r\n${payload}`);
  });
}

function parseRaw(bytes: Buffer, error: Error | undefined): RawResponse {
  const headEnd = bytes.indexOf('\r\n\r\n');
  const head = bytes.subarray(0, headEnd).toString('latin1');
  const [statusLine = '', ...headerLines] = head.split('\r\n');
  const headers: Record<string, string> = {};
  for (const line of headerLines) {
    const colon = line.indexOf(':');
    headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim();
  }
  const rest = bytes.subarray(headEnd + 4);
  const chunks: Buffer[] = [];
  let complete = false;
  if (headers['transfer-encoding'] === 'chunked') {
    let offset = 0;
    while (offset < rest.length) {
      const lineEnd = rest.indexOf('\r\n', offset);
      if (lineEnd < 0) break;
      const size = Number.parseInt(rest.subarray(offset, lineEnd).toString('latin1'), 16);
      if (size === 0) {
        complete = true;
        break;
      }
      if (lineEnd + 2 + size + 2 > rest.length) break;
      chunks.push(rest.subarray(lineEnd + 2, lineEnd + 2 + size));
      offset = lineEnd + 2 + size + 2;
    }
  }
  const body = headers['transfer-encoding'] === 'chunked' ? Buffer.concat(chunks) : rest;
  if (headers['content-length'] !== undefined) complete = body.length === Number(headers['content-length']);
  return {
    status: Number(statusLine.split(' ')[1]),
    head,
    headers,
    chunks,
    body,
    complete,
    error: headEnd < 0 && error === undefined ? new Error('no response head') : error,
  };
}

/** The `data:` payloads of an SSE body, in order. */
export function sseData(body: Buffer | string): string[] {
  const text = typeof body === 'string' ? body : body.toString('utf8');
  return text
    .split('\n\n')
    .filter((event) => event !== '')
    .map((event) => {
      if (!event.startsWith('data: ')) throw new Error(`not an SSE data event: ${JSON.stringify(event)}`);
      return event.slice('data: '.length);
    });
}

export interface TimedEvent {
  readonly data: string;
  /** performance.now() when the event was complete at the client. */
  readonly atMs: number;
}

export interface StreamResult {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  readonly events: readonly TimedEvent[];
  /** performance.now() when the request was sent and when the response head arrived. */
  readonly sentMs: number;
  readonly headMs: number;
  readonly error: (Error & { code?: string }) | undefined;
}

export interface StreamRequestOptions {
  readonly headers?: Record<string, string>;
  /** Called as each event completes; `leave()` makes the client go away (destroys the request). */
  readonly onEvent?: (events: readonly TimedEvent[], leave: () => void) => void;
}

/** A request through node:http that timestamps each SSE event as it completes at the client. */
export function streamRequest(
  url: string,
  path: string,
  body: unknown,
  options: StreamRequestOptions = {},
): Promise<StreamResult> {
  return new Promise((resolve) => {
    const events: TimedEvent[] = [];
    const payload = JSON.stringify(body);
    let status = 0;
    let responseHeaders: IncomingHttpHeaders = {};
    let headMs = 0;
    let error: Error | undefined;
    let settled = false;
    const finish = (): void => {
      if (settled) return;
      settled = true;
      resolve({ status, headers: responseHeaders, events, sentMs, headMs, error });
    };
    const req = request(`${url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload), ...options.headers },
      agent: false,
    });
    const leave = (): void => {
      req.destroy();
      finish();
    };
    req.on('response', (res) => {
      headMs = performance.now();
      status = res.statusCode ?? 0;
      responseHeaders = res.headers;
      const decoder = new TextDecoder();
      let pending = '';
      res.on('data', (data: Buffer) => {
        pending += decoder.decode(data, { stream: true });
        for (let boundary = pending.indexOf('\n\n'); boundary >= 0; boundary = pending.indexOf('\n\n')) {
          const event = pending.slice(0, boundary);
          pending = pending.slice(boundary + 2);
          events.push({ data: event.startsWith('data: ') ? event.slice(6) : event, atMs: performance.now() });
          options.onEvent?.(events, leave);
        }
      });
      res.on('error', (err) => (error = err));
      res.on('close', finish);
    });
    req.on('error', (err) => {
      error = err;
      finish();
    });
    const sentMs = performance.now();
    req.end(payload);
  });
}

export interface ChatChunk {
  id: string;
  object: string;
  created: number;
  model: string;
  choices: { index: number; delta?: { role?: string; content?: string }; text?: string; finish_reason: string | null }[];
  usage?: { prompt_tokens: number; total_tokens: number; completion_tokens: number } | null;
}

/** Parses every data payload but [DONE]. */
export function chunksOf(events: readonly (string | TimedEvent)[]): ChatChunk[] {
  return events
    .map((event) => (typeof event === 'string' ? event : event.data))
    .filter((data) => data !== '[DONE]')
    .map((data) => JSON.parse(data) as ChatChunk);
}

/** The text carried by content chunks, in order. */
export function contentOf(chunks: readonly ChatChunk[]): string {
  return chunks.map((chunk) => chunk.choices[0]?.delta?.content ?? chunk.choices[0]?.text ?? '').join('');
}

export const CHAT_BODY = { model: 'test-model', messages: [{ role: 'user', content: 'Hello there, simulator!' }] };

export interface SseBlock {
  /** The `event:` field, if the block has one. */
  readonly event: string | undefined;
  /** The `data:` field (one space after the colon stripped, as the SSE spec says). */
  readonly data: string | undefined;
  /** The text of a comment block (a line starting with `:`). */
  readonly comment: string | undefined;
}

/**
 * Every block of an SSE body as sent: named events, data-only events and comments, so tests see the
 * exact framing each API uses (TGI's `data:` without a space, its `:` keep-alives, Anthropic's
 * `event:` lines).
 */
export function sseBlocks(body: Buffer | string): SseBlock[] {
  const text = typeof body === 'string' ? body : body.toString('utf8');
  if (!text.endsWith('\n\n') && text !== '') throw new Error(`SSE body does not end with a blank line: ${JSON.stringify(text.slice(-40))}`);
  return text
    .split('\n\n')
    .filter((block) => block !== '')
    .map((block) => {
      let event: string | undefined;
      let data: string | undefined;
      let comment: string | undefined;
      for (const line of block.split('\n')) {
        if (line.startsWith(':')) comment = line.slice(1);
        else if (line.startsWith('event:')) event = line.slice(6).replace(/^ /, '');
        else if (line.startsWith('data:')) data = line.slice(5).replace(/^ /, '');
        else throw new Error(`not an SSE line: ${JSON.stringify(line)}`);
      }
      return { event, data, comment };
    });
}

/** The tokens the simulator generates for a seed: content is a pure function of it. */
export function expectedTokens(seed: number, count: number): string[] {
  return pickTokens(count, createRandom(seed));
}

/**
 * The code a client sees when the simulator resets a stream: ECONNRESET, or nothing at all when the
 * RST overtakes data the client has not read yet (Linux then hands over the data and reports a
 * plain end, measured: 200 of 200 such resets on loopback). What always shows is the cut HTTP body:
 * a chunked response without its last chunk (`complete` false).
 */
export const RESET_CODES: readonly (string | undefined)[] = ['ECONNRESET', undefined];
