import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { constants, createGzip, gunzipSync, gzipSync } from 'node:zlib';
import Anthropic from '@anthropic-ai/sdk';
import { Ollama } from 'ollama';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { scrape, sumValues } from '../helpers/prometheus-text.js';
import { connectH2, h2Request, startH2cReplayUpstream } from '../helpers/h2c-upstream.js';
import { eventually, startTestSidecar } from '../helpers/sidecar.js';

/**
 * Broken and hostile upstreams behind the non-OpenAI-chat taps, met by the real client libraries
 * (@anthropic-ai/sdk, ollama, openai's Responses and non-streamed calls) through a real tokentap:
 * what the client got (its result or its exception, and the body's bytes, equal to what the
 * upstream sent) against what tokentap recorded for the request (its log line and
 * `tokentap_tap_errors_total`). The upstream answers each request with the script named by the
 * request's `model`, so every case is one request with its own labels.
 */

interface Script {
  readonly status?: number;
  readonly headers: Record<string, string>;
  /** Written one `write()` each, in order; the body ends cleanly after the last. */
  readonly pieces: readonly Buffer[];
  /** After the last piece, the body is held open until tokentap closes it (its client left), or 3 s. */
  readonly holdOpen?: boolean;
}

const scripts = new Map<string, Script>();
let upstream: http.Server;
let upstreamUrl: string;
let sidecar: Awaited<ReturnType<typeof startTestSidecar>>;

beforeAll(async () => {
  upstream = http.createServer((request, response) => {
    const parts: Buffer[] = [];
    request.on('data', (part: Buffer) => parts.push(part));
    request.on('end', () => {
      const script = scripts.get((JSON.parse(Buffer.concat(parts).toString('utf8')) as { model: string }).model);
      if (script === undefined) {
        response.writeHead(404).end();
        return;
      }
      response.writeHead(script.status ?? 200, script.headers);
      void (async () => {
        for (const piece of script.pieces) {
          response.write(piece);
          // Apart, so the pieces reach tokentap as separate reads, as a server's tokens do.
          await new Promise((resolve) => setTimeout(resolve, 2));
        }
        if (script.holdOpen === true) {
          await new Promise((resolve) => {
            response.on('close', resolve);
            setTimeout(resolve, 3000);
          });
        }
        response.end();
      })();
    });
  });
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
  sidecar = await startTestSidecar(upstreamUrl);
});

afterAll(async () => {
  await sidecar?.close();
  await new Promise((resolve) => upstream?.close(resolve));
});

/** A fetch that hands the client its response and keeps a copy of the body it received (decoded, as the client reads it). */
function teeingFetch(): { fetch: typeof fetch; body: () => Promise<Buffer> } {
  let copy: Promise<Buffer> = Promise.resolve(Buffer.alloc(0));
  const teeing: typeof fetch = async (input, init) => {
    const response = await fetch(input, init);
    if (response.body === null) return response;
    const [forClient, forTest] = response.body.tee();
    // A client that aborts (an SDK on an error event) aborts the copy too: no bytes to compare then.
    copy = new Response(forTest).arrayBuffer().then(
      (bytes) => Buffer.from(bytes),
      () => Buffer.alloc(0),
    );
    return new Response(forClient, { status: response.status, statusText: response.statusText, headers: response.headers });
  };
  return { fetch: teeing, body: () => copy };
}

interface RequestLine {
  outcome: string;
  output_tokens: number;
  counted_tokens: number;
  token_source: string;
  ttft_ms: number | null;
}

/** The request's log line, once it is written. */
async function recorded(model: string): Promise<RequestLine> {
  const lines = await eventually(
    `the request line of ${model}`,
    () => sidecar.logs.filter((line) => line.msg === 'request' && line.model === model),
    (found) => found.length === 1,
  );
  return lines[0] as unknown as RequestLine;
}

async function tapProblems(model: string, reason: string): Promise<number> {
  return sumValues(await scrape(sidecar.adminUrl), 'tokentap_tap_errors_total', { gen_ai_request_model: model, reason });
}

const sse = (name: string, data: object | string) => Buffer.from(`event: ${name}\ndata: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`);
const SSE_HEADERS = { 'content-type': 'text/event-stream' };

/** An Anthropic Messages stream's opening and `count` text deltas. */
function anthropicOpening(model: string, count: number): Buffer[] {
  return [
    sse('message_start', { type: 'message_start', message: { id: 'msg_1', type: 'message', role: 'assistant', model, content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 9, output_tokens: 1 } } }),
    sse('content_block_start', { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }),
    ...Array.from({ length: count }, (_, i) => sse('content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: `t${i} ` } })),
  ];
}

function anthropicClosing(outputTokens: number): Buffer[] {
  return [
    sse('content_block_stop', { type: 'content_block_stop', index: 0 }),
    sse('message_delta', { type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: outputTokens } }),
    sse('message_stop', { type: 'message_stop' }),
  ];
}

/** Streams a message with the SDK's messages.stream() helper: the text it got and what it threw. */
async function anthropicStream(model: string): Promise<{ text: string; error: unknown; bytes: Buffer }> {
  const tee = teeingFetch();
  const client = new Anthropic({ baseURL: sidecar.proxyUrl, apiKey: 'sk-ant-test', maxRetries: 0, fetch: tee.fetch, logLevel: 'off' });
  const stream = client.messages.stream({ model, max_tokens: 64, messages: [{ role: 'user', content: 'hi' }] });
  let text = '';
  stream.on('text', (delta) => (text += delta));
  const error = await stream.finalMessage().then(
    () => undefined,
    (thrown: unknown) => thrown,
  );
  return { text, error, bytes: await tee.body() };
}

describe('Anthropic Messages: what the SDK saw against what tokentap recorded', () => {
  it('records an upstream error for an error event after message_stop, on which the SDK throws (was completed)', async () => {
    const model = 'anthropic-error-after-stop';
    const pieces = [...anthropicOpening(model, 3), ...anthropicClosing(3), sse('error', { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } })];
    scripts.set(model, { headers: SSE_HEADERS, pieces });
    const got = await anthropicStream(model);
    expect(got.bytes.equals(Buffer.concat(pieces))).toBe(true);
    expect(got.text).toBe('t0 t1 t2 ');
    expect(got.error).toBeInstanceOf(Anthropic.APIError);
    const line = await recorded(model);
    expect(line.outcome).toBe('upstream_error');
    expect(line.counted_tokens).toBe(3);
    expect(await tapProblems(model, 'data_after_end')).toBe(1);
  });

  it('records an upstream error, not a client that left, for a client that closes on an error event the upstream sent without ending the stream (was client_cancelled)', async () => {
    // The Python SDKs raise on the error event and close the response (httpx cannot reuse a
    // connection whose body is unread): the client leaves because the stream failed.
    const model = 'anthropic-error-held-open';
    const pieces = [...anthropicOpening(model, 2), sse('error', { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } })];
    scripts.set(model, { headers: SSE_HEADERS, pieces, holdOpen: true });
    const received = await new Promise<Buffer>((resolve, reject) => {
      const parts: Buffer[] = [];
      const request = http.request(`${sidecar.proxyUrl}/v1/messages`, { method: 'POST', headers: { 'content-type': 'application/json' } }, (response) => {
        response.on('data', (part: Buffer) => {
          parts.push(part);
          const body = Buffer.concat(parts);
          if (body.includes('"Overloaded"}}\n\n')) {
            request.destroy();
            resolve(body);
          }
        });
      });
      request.on('error', () => undefined);
      request.on('close', () => reject(new Error('closed before the error event')));
      request.end(JSON.stringify({ model, stream: true, max_tokens: 64, messages: [] }));
    });
    expect(received.equals(Buffer.concat(pieces))).toBe(true);
    const line = await recorded(model);
    expect(line.outcome).toBe('upstream_error');
    expect(line.counted_tokens).toBe(2);
  });

  it('records an upstream error for an event named error whose data is not JSON, on which the SDK throws, even when message_stop follows (was completed)', async () => {
    const model = 'anthropic-error-not-json';
    const pieces = [...anthropicOpening(model, 2), sse('error', 'upstream overloaded, try later'), ...anthropicClosing(2)];
    scripts.set(model, { headers: SSE_HEADERS, pieces });
    const got = await anthropicStream(model);
    expect(got.bytes.equals(Buffer.concat(pieces))).toBe(true);
    expect(got.error).toBeInstanceOf(Anthropic.APIError);
    expect((await recorded(model)).outcome).toBe('upstream_error');
    expect(await tapProblems(model, 'malformed_event')).toBe(0);
  });

  it('records an upstream error for a content_block_delta whose data is not JSON, on which the SDK fails with a JSON error, even when message_stop follows (was completed)', async () => {
    const model = 'anthropic-broken-delta';
    const pieces = [...anthropicOpening(model, 2), sse('content_block_delta', '{"type":"content_block_delta","index":0,"delta":{"type":"text_'), ...anthropicClosing(3)];
    scripts.set(model, { headers: SSE_HEADERS, pieces });
    const got = await anthropicStream(model);
    expect(got.bytes.equals(Buffer.concat(pieces))).toBe(true);
    expect(got.text).toBe('t0 t1 ');
    // MessageStream wraps the SyntaxError: "Unterminated string in JSON at position ...".
    expect(got.error).toBeInstanceOf(Anthropic.AnthropicError);
    expect((got.error as Error).message).toMatch(/JSON/);
    expect((await recorded(model)).outcome).toBe('upstream_error');
    expect(await tapProblems(model, 'malformed_event')).toBe(1);
  });

  it('records truncated for a stream closed cleanly after message_delta without message_stop, on which finalMessage() rejects', async () => {
    const model = 'anthropic-no-stop';
    const pieces = [...anthropicOpening(model, 2), ...anthropicClosing(2).slice(0, 2)];
    scripts.set(model, { headers: SSE_HEADERS, pieces });
    const got = await anthropicStream(model);
    expect(got.bytes.equals(Buffer.concat(pieces))).toBe(true);
    expect(got.text).toBe('t0 t1 ');
    expect(got.error).toBeInstanceOf(Anthropic.AnthropicError);
    const line = await recorded(model);
    expect(line.outcome).toBe('truncated');
    expect(line.output_tokens).toBe(2);
  });

  it('drops a message_delta output_tokens that is negative, fractional or beyond 10^7, counting each, and keeps the counted tokens; a string is skipped uncounted', async () => {
    for (const [suffix, outputTokens, implausible] of [['negative', -5, 1], ['fraction', 2.5, 1], ['huge', 1e300, 1], ['string', '9', 0]] as const) {
      const model = `anthropic-output-${suffix}`;
      const pieces = [...anthropicOpening(model, 3), ...anthropicClosing(0)];
      pieces[pieces.length - 2] = sse('message_delta', { type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: outputTokens } });
      scripts.set(model, { headers: SSE_HEADERS, pieces });
      const got = await anthropicStream(model);
      expect(got.bytes.equals(Buffer.concat(pieces)), suffix).toBe(true);
      expect(got.error, suffix).toBeUndefined();
      const line = await recorded(model);
      expect(line.outcome, suffix).toBe('completed');
      expect(line.token_source, suffix).toBe('counted');
      expect(line.output_tokens, suffix).toBe(3);
      expect(await tapProblems(model, 'implausible_value'), suffix).toBe(implausible);
    }
  });

  it('records a gzip-coded stream the SDK read whole as unobserved and counted, not as truncated without a token (was truncated, 0 tokens)', async () => {
    const model = 'anthropic-gzip';
    const plain = Buffer.concat([...anthropicOpening(model, 4), ...anthropicClosing(4)]);
    const coded = gzipSync(plain);
    scripts.set(model, { headers: { ...SSE_HEADERS, 'content-encoding': 'gzip' }, pieces: [coded.subarray(0, 40), coded.subarray(40)] });
    const got = await anthropicStream(model);
    // undici's fetch decodes the body for the SDK: the client got the whole stream.
    expect(got.bytes.equals(plain)).toBe(true);
    expect(got.error).toBeUndefined();
    expect(got.text).toBe('t0 t1 t2 t3 ');
    const line = await recorded(model);
    expect(line.outcome).toBe('completed');
    expect(line.ttft_ms).toBeNull();
    expect(await tapProblems(model, 'compressed_body')).toBe(1);
    expect(await tapProblems(model, 'malformed_event')).toBe(0);
  });
});

describe('Ollama NDJSON: what the ollama client saw against what tokentap recorded', () => {
  const line = (value: object) => Buffer.from(`${JSON.stringify(value)}\n`);

  it('ignores lines after done: true, which the client never reads, and counts them once (was upstream_error with their token counted)', async () => {
    const model = 'ollama-after-done';
    const pieces = [
      line({ model, message: { role: 'assistant', content: 'a' }, done: false }),
      line({ model, message: { role: 'assistant', content: 'b' }, done: false }),
      line({ model, message: { role: 'assistant', content: '' }, done: true, done_reason: 'stop', prompt_eval_count: 5, eval_count: 2 }),
      line({ model, message: { role: 'assistant', content: 'c' }, done: false }),
      line({ error: 'model crashed' }),
    ];
    scripts.set(model, { headers: { 'content-type': 'application/x-ndjson' }, pieces });
    const tee = teeingFetch();
    const client = new Ollama({ host: sidecar.proxyUrl, fetch: tee.fetch });
    const parts: string[] = [];
    let done = false;
    for await (const part of await client.chat({ model, messages: [{ role: 'user', content: 'hi' }], stream: true })) {
      parts.push(part.message.content);
      done ||= part.done;
    }
    expect(parts).toEqual(['a', 'b', '']);
    expect(done).toBe(true);
    expect((await tee.body()).equals(Buffer.concat(pieces))).toBe(true);
    const recordedLine = await recorded(model);
    expect(recordedLine.outcome).toBe('completed');
    expect(recordedLine.counted_tokens).toBe(2);
    expect(recordedLine.output_tokens).toBe(2);
    expect(await tapProblems(model, 'data_after_end')).toBe(1);
  });

  async function chat(model: string): Promise<{ parts: string[]; done: boolean; error: unknown; bytes: Buffer }> {
    const tee = teeingFetch();
    const client = new Ollama({ host: sidecar.proxyUrl, fetch: tee.fetch });
    const parts: string[] = [];
    let done = false;
    const error = await (async () => {
      for await (const part of await client.chat({ model, messages: [{ role: 'user', content: 'hi' }], stream: true })) {
        parts.push(part.message.content);
        done ||= part.done;
      }
    })().then(
      () => undefined,
      (thrown: unknown) => thrown,
    );
    return { parts, done, error, bytes: await tee.body() };
  }

  it('records truncated, not completed, when a byte-order mark opens the done line: the client cannot parse it and throws for want of a done line (was completed)', async () => {
    const model = 'ollama-bom-done';
    const pieces = [
      line({ model, message: { role: 'assistant', content: 'a' }, done: false }),
      Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), line({ model, message: { role: 'assistant', content: '' }, done: true, done_reason: 'stop', eval_count: 1 })]),
    ];
    scripts.set(model, { headers: { 'content-type': 'application/x-ndjson' }, pieces });
    const warned = vi.spyOn(console, 'warn').mockImplementation(() => undefined);
    let got: Awaited<ReturnType<typeof chat>>;
    try {
      got = await chat(model);
      expect(warned).toHaveBeenCalledWith('invalid json: ', expect.stringContaining('"done":true'));
    } finally {
      warned.mockRestore();
    }
    expect(got.bytes.equals(Buffer.concat(pieces))).toBe(true);
    expect(got.parts).toEqual(['a']);
    expect((got.error as Error).message).toBe('Did not receive done or success response in stream.');
    const recordedLine = await recorded(model);
    expect(recordedLine.outcome).toBe('truncated');
    expect(recordedLine.token_source).toBe('counted');
    expect(await tapProblems(model, 'malformed_event')).toBe(1);
  });

  it('records an upstream error for an error line mid-stream, on which the client throws its message', async () => {
    const model = 'ollama-error-line';
    const pieces = [line({ model, message: { role: 'assistant', content: 'a' }, done: false }), line({ error: 'an error was encountered while running the model: CUDA error' })];
    scripts.set(model, { headers: { 'content-type': 'application/x-ndjson' }, pieces });
    const got = await chat(model);
    expect(got.bytes.equals(Buffer.concat(pieces))).toBe(true);
    expect(got.parts).toEqual(['a']);
    expect((got.error as Error).message).toBe('an error was encountered while running the model: CUDA error');
    const recordedLine = await recorded(model);
    expect(recordedLine.outcome).toBe('upstream_error');
    expect(recordedLine.counted_tokens).toBe(1);
  });
});

describe('OpenAI Responses: what the SDK saw against what tokentap recorded', () => {
  it('records an upstream error for an event whose data carries an error object, on which the SDK throws (was completed)', async () => {
    const model = 'responses-data-error';
    const delta = (text: string) => sse('response.output_text.delta', { type: 'response.output_text.delta', output_index: 0, content_index: 0, item_id: 'm', delta: text, sequence_number: 1 });
    const pieces = [
      delta('a'),
      Buffer.from(`data: ${JSON.stringify({ error: { message: 'engine died', type: 'server_error' } })}\n\n`),
      sse('response.completed', { type: 'response.completed', response: { id: 'r', object: 'response', status: 'completed', output: [], usage: { input_tokens: 3, output_tokens: 1, total_tokens: 4 } } }),
    ];
    scripts.set(model, { headers: SSE_HEADERS, pieces });
    const tee = teeingFetch();
    const client = new OpenAI({ baseURL: `${sidecar.proxyUrl}/v1`, apiKey: 'sk-test', maxRetries: 0, fetch: tee.fetch });
    const types: string[] = [];
    const error = await (async () => {
      for await (const event of await client.responses.create({ model, input: 'hi', stream: true })) types.push(event.type);
    })().then(
      () => undefined,
      (thrown: unknown) => thrown,
    );
    expect(types).toEqual(['response.output_text.delta']);
    expect(error).toBeInstanceOf(OpenAI.APIError);
    expect((await tee.body()).equals(Buffer.concat(pieces))).toBe(true);
    expect((await recorded(model)).outcome).toBe('upstream_error');
  });
});

describe('OpenAI Responses: an event cut mid-JSON', () => {
  it('records an upstream error for a delta whose data is not JSON, on which the SDK throws a SyntaxError, even when response.completed follows (was completed)', async () => {
    const model = 'responses-broken-delta';
    const delta = (text: string) => sse('response.output_text.delta', { type: 'response.output_text.delta', output_index: 0, content_index: 0, item_id: 'm', delta: text, sequence_number: 1 });
    const pieces = [
      delta('a'),
      sse('response.output_text.delta', '{"type":"response.output_text.delta","delta":"b'),
      sse('response.completed', { type: 'response.completed', response: { id: 'r', object: 'response', status: 'completed', output: [], usage: { input_tokens: 3, output_tokens: 2, total_tokens: 5 } } }),
    ];
    scripts.set(model, { headers: SSE_HEADERS, pieces });
    const tee = teeingFetch();
    const client = new OpenAI({ baseURL: `${sidecar.proxyUrl}/v1`, apiKey: 'sk-test', maxRetries: 0, fetch: tee.fetch, logLevel: 'off' });
    const types: string[] = [];
    const error = await (async () => {
      for await (const event of await client.responses.create({ model, input: 'hi', stream: true })) types.push(event.type);
    })().then(
      () => undefined,
      (thrown: unknown) => thrown,
    );
    expect(types).toEqual(['response.output_text.delta']);
    expect(error).toBeInstanceOf(SyntaxError);
    expect((await recorded(model)).outcome).toBe('upstream_error');
    expect(await tapProblems(model, 'malformed_event')).toBe(1);
  });
});

describe('TGI /generate_stream: an event cut mid-JSON', () => {
  it('records an upstream error for a token event whose data is not JSON, on which huggingface_hub raises, even when the final event follows (was completed)', async () => {
    const model = 'tgi-broken-token';
    const token = (id: number, text: string, final = false) =>
      Buffer.from(`data:${JSON.stringify({ index: id, token: { id, text, logprob: -0.1, special: false }, generated_text: final ? 'abc' : null, details: null })}\n\n`);
    const pieces = [token(1, 'a'), Buffer.from('data:{"index":2,"token":{"id":2,"text":"b\n\n'), token(3, 'c', true)];
    scripts.set(model, { headers: SSE_HEADERS, pieces });
    const response = await fetch(`${sidecar.proxyUrl}/generate_stream`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model, inputs: 'hi' }) });
    expect(Buffer.from(await response.arrayBuffer()).equals(Buffer.concat(pieces))).toBe(true);
    const line = await recorded(model);
    expect(line.outcome).toBe('upstream_error');
    expect(line.counted_tokens).toBe(2);
    expect(await tapProblems(model, 'malformed_event')).toBe(1);
  });
});

describe('non-streamed JSON answers: what the SDK saw against what tokentap recorded', () => {
  const completion = (model: string) => ({ id: 'c', object: 'chat.completion', created: 1, model, choices: [{ index: 0, message: { role: 'assistant', content: 'hi' }, finish_reason: 'stop' }], usage: { prompt_tokens: 4, completion_tokens: 7, total_tokens: 11 } });
  const JSON_HEADERS = { 'content-type': 'application/json' };

  async function create(model: string): Promise<{ result: unknown; error: unknown; bytes: Buffer }> {
    const tee = teeingFetch();
    const client = new OpenAI({ baseURL: `${sidecar.proxyUrl}/v1`, apiKey: 'sk-test', maxRetries: 0, fetch: tee.fetch });
    const settled = await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'hi' }] }).then(
      (result) => ({ result, error: undefined }),
      (error: unknown) => ({ result: undefined, error }),
    );
    return { ...settled, bytes: await tee.body() };
  }

  it('records an upstream error and a malformed event for a 200 body cut short with its Content-Length met, which the SDK cannot parse (was completed, nothing counted)', async () => {
    const model = 'json-cut';
    const cut = Buffer.from(JSON.stringify(completion(model)).slice(0, 60));
    scripts.set(model, { headers: { ...JSON_HEADERS, 'content-length': String(cut.length) }, pieces: [cut] });
    const got = await create(model);
    expect(got.bytes.equals(cut)).toBe(true);
    expect(got.error).toBeInstanceOf(SyntaxError);
    expect((await recorded(model)).outcome).toBe('upstream_error');
    expect(await tapProblems(model, 'malformed_event')).toBe(1);
  });

  it('records an upstream error for a 200 answer that is an error object, which gives the client no completion (was completed)', async () => {
    const model = 'json-error-200';
    const body = Buffer.from(JSON.stringify({ error: { message: 'CUDA out of memory', type: 'InternalServerError', code: 500 } }));
    scripts.set(model, { headers: JSON_HEADERS, pieces: [body] });
    const got = await create(model);
    expect(got.bytes.equals(body)).toBe(true);
    expect((got.result as { choices?: unknown }).choices).toBeUndefined();
    expect((await recorded(model)).outcome).toBe('upstream_error');
  });

  it('records a gzip-coded answer the SDK read as unobserved and counted, neither misread nor an error (was completed with its usage silently lost)', async () => {
    const model = 'json-gzip';
    const plain = Buffer.from(JSON.stringify(completion(model)));
    scripts.set(model, { headers: { ...JSON_HEADERS, 'content-encoding': 'gzip' }, pieces: [gzipSync(plain)] });
    const got = await create(model);
    expect(got.bytes.equals(plain)).toBe(true);
    expect((got.result as { usage: { completion_tokens: number } }).usage.completion_tokens).toBe(7);
    const line = await recorded(model);
    expect(line.outcome).toBe('completed');
    expect(await tapProblems(model, 'compressed_body')).toBe(1);
    expect(await tapProblems(model, 'malformed_event')).toBe(0);
  });
});

describe("llama.cpp's `error:` line (a field SSE does not define), as llama.cpp writes a stream error", () => {
  const LLAMACPP_ERROR = Buffer.from('error: {"code":500,"message":"failed to decode the batch","type":"server_error"}\n\n');

  /** POSTs `body` to `path` through tokentap with fetch, reading the whole body. */
  async function post(path: string, body: object): Promise<Buffer> {
    const response = await fetch(`${sidecar.proxyUrl}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    return Buffer.from(await response.arrayBuffer());
  }

  it('records an upstream error, not truncated, for a native /completion stream that ends after an error line (was truncated)', async () => {
    const model = 'llamacpp-error-line';
    const content = (text: string, predicted: number) => Buffer.from(`data: ${JSON.stringify({ content: text, stop: false, tokens_predicted: predicted })}\n\n`);
    const pieces = [content('a', 1), content('b', 2), LLAMACPP_ERROR];
    scripts.set(model, { headers: SSE_HEADERS, pieces });
    expect((await post('/completion', { model, prompt: 'hi', stream: true })).equals(Buffer.concat(pieces))).toBe(true);
    const line = await recorded(model);
    expect(line.outcome).toBe('upstream_error');
    expect(line.counted_tokens).toBe(2);
  });

  it('records an upstream error, not completed, for an OpenAI chat stream with an error line before its [DONE]: the SDK ignores the line and returns the cut answer without a finish_reason (was completed)', async () => {
    const model = 'llamacpp-chat-error-line';
    const chunk = (delta: object) => Buffer.from(`data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', created: 1, model, choices: [{ index: 0, delta, finish_reason: null }] })}\n\n`);
    const pieces = [chunk({ role: 'assistant', content: 'a' }), chunk({ content: 'b' }), LLAMACPP_ERROR, Buffer.from('data: [DONE]\n\n')];
    scripts.set(model, { headers: SSE_HEADERS, pieces });
    const tee = teeingFetch();
    const client = new OpenAI({ baseURL: `${sidecar.proxyUrl}/v1`, apiKey: 'sk-test', maxRetries: 0, fetch: tee.fetch });
    const finishReasons: unknown[] = [];
    let text = '';
    for await (const part of await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'hi' }], stream: true })) {
      text += part.choices[0]?.delta.content ?? '';
      finishReasons.push(part.choices[0]?.finish_reason);
    }
    expect(text).toBe('ab');
    expect(finishReasons).toEqual([null, null]);
    expect((await tee.body()).equals(Buffer.concat(pieces))).toBe(true);
    expect((await recorded(model)).outcome).toBe('upstream_error');
  });
});

describe('a coded stream relayed over HTTP/2 (an h2 client, an h2c upstream)', () => {
  it('is left untapped and counted there too, relayed byte for byte, not recorded truncated without a token (was truncated)', async () => {
    const model = 'h2c-gzip';
    const plain = Buffer.concat([...anthropicOpening(model, 3), ...anthropicClosing(3)]);
    const coded = gzipSync(plain);
    const h2Upstream = await startH2cReplayUpstream(() => ({ headers: { 'content-type': 'text/event-stream', 'content-encoding': 'gzip' }, chunks: [coded.subarray(0, 30), coded.subarray(30)] }));
    const h2Sidecar = await startTestSidecar(h2Upstream.url, 'upstream_protocol: h2c\n');
    const cleanups: Array<() => Promise<void> | void> = [];
    try {
      const session = connectH2(h2Sidecar.proxyUrl, cleanups);
      const got = await h2Request(session, { ':method': 'POST', ':path': '/v1/messages', 'content-type': 'application/json', 'accept-encoding': 'gzip' }, Buffer.from(JSON.stringify({ model, stream: true })));
      expect(got.head['content-encoding']).toBe('gzip');
      expect(got.body.equals(coded)).toBe(true);
      const lines = await eventually('the h2 request line', () => h2Sidecar.logs.filter((line) => line.msg === 'request' && line.model === model), (found) => found.length === 1);
      expect(lines[0]?.outcome).toBe('completed');
      expect(sumValues(await scrape(h2Sidecar.adminUrl), 'tokentap_tap_errors_total', { gen_ai_request_model: model, reason: 'compressed_body' })).toBe(1);
    } finally {
      for (const cleanup of cleanups) await cleanup();
      await h2Sidecar.close();
      await h2Upstream.close();
    }
  });
});

describe('the coded bytes themselves', () => {
  it('relays a gzip-coded stream byte for byte, coding and all, to a client that does not decode it', async () => {
    const model = 'raw-gzip';
    const plain = Buffer.concat([...anthropicOpening(model, 2), ...anthropicClosing(2)]);
    const coded = gzipSync(plain);
    scripts.set(model, { headers: { ...SSE_HEADERS, 'content-encoding': 'gzip' }, pieces: [coded] });
    const received = await new Promise<{ encoding: string | undefined; body: Buffer }>((resolve, reject) => {
      const request = http.request(`${sidecar.proxyUrl}/v1/messages`, { method: 'POST', headers: { 'content-type': 'application/json', 'accept-encoding': 'gzip' } }, (response) => {
        const parts: Buffer[] = [];
        response.on('data', (part: Buffer) => parts.push(part));
        response.on('end', () => resolve({ encoding: response.headers['content-encoding'], body: Buffer.concat(parts) }));
        response.on('error', reject);
      });
      request.on('error', reject);
      request.end(JSON.stringify({ model, stream: true }));
    });
    expect(received.encoding).toBe('gzip');
    expect(received.body.equals(coded)).toBe(true);
    expect(gunzipSync(received.body).equals(plain)).toBe(true);
  });
});

describe('inject_usage meeting a gzip-coded chat stream', () => {
  it('passes the coded stream on as it comes, not held to its end by the usage-chunk stripper, which cannot cut it into events (was one read at the end)', async () => {
    const chunk = (delta: object) => `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta, finish_reason: null }] })}\n\n`;
    const sent: Buffer[] = [];
    let clientGotBytes: () => void = () => undefined;
    const clientGotFirstBytes = new Promise<boolean>((resolve) => {
      clientGotBytes = () => resolve(true);
      setTimeout(() => resolve(false), 3000);
    });
    const codedUpstream = http.createServer((request, response) => {
      request.resume();
      request.on('end', () => {
        response.writeHead(200, { 'content-type': 'text/event-stream', 'content-encoding': 'gzip' });
        const gzip = createGzip();
        gzip.on('data', (part: Buffer) => {
          sent.push(part);
          response.write(part);
        });
        gzip.write(chunk({ role: 'assistant', content: 'a' }));
        // The rest only once the client has the first token, or after 3 s if it never gets it.
        gzip.flush(constants.Z_SYNC_FLUSH, () => {
          void clientGotFirstBytes.then(() => {
            gzip.end(`${chunk({ content: 'b' })}data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [], usage: { prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 } })}\n\ndata: [DONE]\n\n`);
            gzip.on('end', () => response.end());
          });
        });
      });
    });
    await new Promise<void>((resolve) => codedUpstream.listen(0, '127.0.0.1', resolve));
    const injecting = await startTestSidecar(`http://127.0.0.1:${(codedUpstream.address() as AddressInfo).port}`, 'inject_usage: true\n');
    try {
      const received: Buffer[] = [];
      await new Promise<void>((resolve, reject) => {
        const request = http.request(`${injecting.proxyUrl}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', 'accept-encoding': 'gzip' } }, (response) => {
          response.on('data', (part: Buffer) => {
            if (received.length === 0) clientGotBytes();
            received.push(part);
          });
          response.on('end', resolve);
          response.on('error', reject);
        });
        request.on('error', reject);
        request.end(JSON.stringify({ model: 'm', stream: true, messages: [{ role: 'user', content: 'hi' }] }));
      });
      // Resolved false when the client had nothing 3 s after the first token was sent.
      expect(await clientGotFirstBytes).toBe(true);
      expect(Buffer.concat(received).equals(Buffer.concat(sent))).toBe(true);
      // The request was rewritten: the coded answer carries the usage chunk, which the client now gets too.
      expect(gunzipSync(Buffer.concat(received)).toString('utf8')).toContain('"choices":[]');
    } finally {
      await injecting.close();
      await new Promise((resolve) => codedUpstream.close(resolve));
    }
  });
});
