import http2 from 'node:http2';
import { afterEach, describe, expect, it } from 'vitest';
import { startCaptureUpstream } from '../helpers/capture-upstream.js';
import { FLAG, FRAME, frame, headerBlock, RawH2Client } from '../helpers/h2-frames.js';
import { startH2cReplayUpstream } from '../helpers/h2c-upstream.js';
import { eventually, startTestSidecar } from '../helpers/sidecar.js';

/**
 * Request smuggling through the HTTP/2 listener (RFC 9113 section 8; the h2-to-HTTP/1.1 downgrade
 * class): requests written as raw frames (Node's client refuses to send them), HPACK literals with
 * the bytes exactly as given. Each case asserts what the upstream received byte for byte (nothing,
 * or exactly one HTTP/1.1 head / one h2c field list) and what the client got, for both upstream
 * protocols. A malformed request's stream is reset by nghttp2 before tokentap sees it; the next,
 * well-formed request on the same connection is then the upstream's only input, which shows both
 * that nothing of the first leaked and that the reset cost that stream alone.
 */

const { NGHTTP2_PROTOCOL_ERROR, NGHTTP2_INTERNAL_ERROR } = http2.constants;

type Field = readonly [string, string];
type Protocol = 'http1' | 'h2c';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function request(method: string, path: string, ...more: Field[]): Field[] {
  return [[':method', method], [':scheme', 'http'], [':path', path], [':authority', 'tokentap.test'], ...more];
}

/** What one upstream received: the raw HTTP/1.1 bytes, or one line per h2c stream with its fields as the upstream's session read them. */
async function setUp(protocol: Protocol) {
  if (protocol === 'http1') {
    const upstream = await startCaptureUpstream();
    cleanups.push(() => upstream.close());
    const sidecar = await startTestSidecar(upstream.url);
    cleanups.push(() => sidecar.close());
    upstream.mark();
    return { sidecar, received: () => upstream.since(), answer: (path: string) => JSON.stringify({ method: 'GET', target: path, authorization: null, body: '' }) };
  }
  const upstream = await startH2cReplayUpstream(() => ({ chunks: [Buffer.from('ok')] }));
  cleanups.push(() => upstream.close());
  const sidecar = await startTestSidecar(upstream.url, 'upstream_protocol: h2c\n');
  cleanups.push(() => sidecar.close());
  // Streams opened, even those reset before their end, each as its raw field list.
  const received = () => `${upstream.streams} stream(s)\n` + upstream.seen.map((s) => JSON.stringify(s.rawHeaders) + ` body=${JSON.stringify(s.body.toString('latin1'))}`).join('\n');
  return { sidecar, received, answer: () => 'ok' };
}

async function connect(url: string): Promise<RawH2Client> {
  const client = await RawH2Client.connect(url);
  cleanups.push(() => client.close());
  return client;
}

/** Sends one request on `streamId` in a single write (HEADERS, then the body as one DATA frame); waits until the server ends the stream. */
async function send(client: RawH2Client, streamId: number, fields: readonly Field[], body?: string): Promise<void> {
  const block = headerBlock(fields);
  const bytes =
    body === undefined
      ? frame(FRAME.HEADERS, FLAG.END_HEADERS | FLAG.END_STREAM, streamId, block)
      : Buffer.concat([frame(FRAME.HEADERS, FLAG.END_HEADERS, streamId, block), frame(FRAME.DATA, FLAG.END_STREAM, streamId, Buffer.from(body, 'latin1'))]);
  client.write(bytes);
  await eventually(`stream ${streamId} to end`, () => client.ended(streamId) || client.goawayCode() !== undefined, (ended) => ended, 5_000);
}

/** Exactly what the upstream receives for the well-formed `GET /v1/models` sent after each attack. */
const WELL_FORMED: Record<Protocol, string> = {
  http1: 'GET /v1/models HTTP/1.1\r\nhost: tokentap.test\r\nConnection: keep-alive\r\n\r\n',
  h2c: '1 stream(s)\n' + JSON.stringify([':method', 'GET', ':scheme', 'http', ':path', '/v1/models', ':authority', 'tokentap.test']) + ' body=""',
};

/**
 * [attack, RFC 9113 section, fields, DATA, whole session]: each a malformed request (section
 * 8.1.1) whose stream nghttp2 resets PROTOCOL_ERROR, or, where `whole session` is set, whose
 * session Node may end with a GOAWAY instead: for DATA past the content-length, Node 20 (nghttp2
 * 1.61) resets the stream PROTOCOL_ERROR, Node 24 (nghttp2 1.70) ends the session with
 * GOAWAY(INTERNAL_ERROR), measured. Either way the upstream gets nothing of it.
 */
const MALFORMED: ReadonlyArray<readonly [string, string, Field[], string?, 'whole session'?]> = [
  ['transfer-encoding', '8.2.2', request('POST', '/v1/completions', ['transfer-encoding', 'chunked']), '5\r\nhello\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nhost: x\r\n\r\n'],
  ['connection', '8.2.2', request('GET', '/v1/models', ['connection', 'keep-alive'])],
  ['upgrade', '8.2.2', request('GET', '/v1/models', ['upgrade', 'websocket'])],
  ['te other than trailers', '8.2.2', request('GET', '/v1/models', ['te', 'gzip'])],
  ['a :path with a space', '8.3.1', request('GET', '/v1/models HTTP/1.1')],
  ['a :path with CR/LF', '8.3.1', request('GET', '/v1/models HTTP/1.1\r\nhost: x\r\n\r\nGET /smuggled')],
  ['a :path without a leading slash', '8.3.1', request('GET', 'v1/models')],
  ['a :path in absolute form', '8.3.1', request('GET', 'http://evil.test/v1/models')],
  ['an asterisk :path on a GET', '8.3.1', request('GET', '*')],
  ['a duplicate :path', '8.3.1', [...request('GET', '/v1/models'), [':path', '/smuggled']]],
  ['an unknown pseudo-header', '8.3', request('GET', '/v1/models', [':smuggled', '1'])],
  ['a pseudo-header after a regular field', '8.3', [[':method', 'GET'], [':scheme', 'http'], [':path', '/v1/models'], ['x-field', '1'], [':authority', 'tokentap.test']]],
  ['CR/LF in :method', '8.3.1', request('GET /smuggled HTTP/1.1\r\nhost: x\r\n\r\nGET', '/v1/models')],
  ['CR/LF in :authority', '8.3.1', [[':method', 'GET'], [':scheme', 'http'], [':path', '/v1/models'], [':authority', 'tokentap.test\r\nx-smuggled: 1']]],
  ['an uppercase field name', '8.2.1', request('GET', '/v1/models', ['X-Smuggled', '1'])],
  ['neither :authority nor host', '8.3.1', [[':method', 'GET'], [':scheme', 'http'], [':path', '/v1/models']]],
  ['a content-length above its DATA length', '8.1.1', request('POST', '/v1/completions', ['content-length', '10']), 'hello'],
  ['a content-length below its DATA length', '8.1.1', request('POST', '/v1/completions', ['content-length', '3']), 'hello', 'whole session'],
  ['content-length given twice', '8.1.1', request('POST', '/v1/completions', ['content-length', '5'], ['content-length', '6']), 'hello'],
];

describe.each(['http1', 'h2c'] as const)('upstream_protocol: %s', (protocol) => {
  for (const [attack, section, fields, body, wholeSession] of MALFORMED) {
    it(`forwards nothing of an HTTP/2 request carrying ${attack} (RFC 9113 ${section}): ${wholeSession === undefined ? 'the stream is reset PROTOCOL_ERROR' : 'the stream is reset or the session ended'}`, async () => {
      const { sidecar, received, answer } = await setUp(protocol);
      let client = await connect(sidecar.proxyUrl);
      await send(client, 1, fields, body);
      expect(client.data(1).length).toBe(0);
      let next = 3;
      if (wholeSession !== undefined && client.goawayCode() !== undefined) {
        expect([NGHTTP2_PROTOCOL_ERROR, NGHTTP2_INTERNAL_ERROR]).toContain(client.goawayCode());
        client = await connect(sidecar.proxyUrl);
        next = 1;
      } else {
        expect(client.resetCodes(1)).toEqual([NGHTTP2_PROTOCOL_ERROR]);
      }
      await send(client, next, request('GET', '/v1/models'));
      expect(received()).toBe(WELL_FORMED[protocol]);
      expect(client.data(next).toString('latin1')).toBe(answer('/v1/models'));
      expect(client.goawayCode()).toBeUndefined();
    });
  }

  it('answers 400 to a :path with a fragment and forwards nothing of it (RFC 9113 8.3.1: path and query only); the session goes on', async () => {
    const { sidecar, received, answer } = await setUp(protocol);
    const client = await connect(sidecar.proxyUrl);
    await send(client, 1, request('GET', '/v1/models#token=FRAGMENT'));
    expect(client.data(1).toString('latin1')).toBe('tokentap: the :path carries a fragment (#...), which clients do not send\n');
    await send(client, 3, request('GET', '/v1/models'));
    expect(received()).toBe(WELL_FORMED[protocol]);
    expect(client.data(3).toString('latin1')).toBe(answer('/v1/models'));
  });
});

describe('well-formed HTTP/2 requests HTTP/1.1 writes differently', () => {
  const cookies = request('GET', '/v1/models', ['cookie', 'a=1'], ['cookie', 'b=2']);
  const disagreeing = request('GET', '/v1/models', ['host', 'evil.test']);

  it('joins two cookie fields into one `cookie: a=1; b=2` line for the HTTP/1.1 upstream (RFC 9113 8.2.3)', async () => {
    const { sidecar, received, answer } = await setUp('http1');
    const client = await connect(sidecar.proxyUrl);
    await send(client, 1, cookies);
    expect(received()).toBe('GET /v1/models HTTP/1.1\r\ncookie: a=1; b=2\r\nhost: tokentap.test\r\nConnection: keep-alive\r\n\r\n');
    expect(client.data(1).toString('latin1')).toBe(answer('/v1/models'));
  });

  it('passes two cookie fields to the h2c upstream as two fields, in order (RFC 9113 8.2.3 allows either)', async () => {
    const { sidecar, received } = await setUp('h2c');
    const client = await connect(sidecar.proxyUrl);
    await send(client, 1, cookies);
    expect(received()).toBe('1 stream(s)\n' + JSON.stringify([':method', 'GET', ':scheme', 'http', ':path', '/v1/models', ':authority', 'tokentap.test', 'cookie', 'a=1', 'cookie', 'b=2']) + ' body=""');
    expect(client.data(1).toString('latin1')).toBe('ok');
  });

  it('sends the HTTP/1.1 upstream the :authority as its only Host when a host field disagrees (RFC 9113 8.3.1)', async () => {
    const { sidecar, received, answer } = await setUp('http1');
    const client = await connect(sidecar.proxyUrl);
    await send(client, 1, disagreeing);
    expect(received()).toBe(WELL_FORMED.http1);
    expect(client.data(1).toString('latin1')).toBe(answer('/v1/models'));
  });

  it('sends the h2c upstream the :authority and no host field when a host field disagrees (RFC 9113 8.3.1)', async () => {
    const { sidecar, received } = await setUp('h2c');
    const client = await connect(sidecar.proxyUrl);
    await send(client, 1, disagreeing);
    expect(received()).toBe(WELL_FORMED.h2c);
    expect(client.data(1).toString('latin1')).toBe('ok');
  });
});

/**
 * RFC 9113 section 8.2.1 makes a request with LF, CR or NUL in a field value malformed (reset it).
 * nghttp2 would, but Node registers an on_invalid_header callback that ignores the field instead
 * (src/node_http2.cc, Http2Session::OnInvalidHeader: "Ignore invalid header fields by default"),
 * the same on Node 20 and 24: the field never reaches JavaScript (not in the 'stream' event's
 * headers nor its rawHeaders), so tokentap cannot tell such a stream from a clean one without
 * decoding HPACK itself. What is pinned here is that the field is never forwarded on either
 * upstream protocol, so no byte of it can split an HTTP/1.1 head; if Node ever passes such a field
 * through or resets the stream, these tests fail and the refusal belongs in stream-relay.ts.
 */
describe.each(['http1', 'h2c'] as const)('a field value with LF or NUL, upstream_protocol: %s', (protocol) => {
  for (const [what, value] of [
    ['LF', 'a\nx-smuggled: 1'],
    ['NUL', 'a\u0000b'],
  ] as const) {
    it(`drops a field whose value holds ${what} (Node ignores it, RFC 9113 8.2.1 calls the request malformed) and forwards only the rest of the request`, async () => {
      const { sidecar, received, answer } = await setUp(protocol);
      const client = await connect(sidecar.proxyUrl);
      await send(client, 1, request('GET', '/v1/models', ['x-bad', value]));
      expect(received()).toBe(WELL_FORMED[protocol]);
      expect(client.resetCodes(1)).toEqual([]);
      expect(client.data(1).toString('latin1')).toBe(answer('/v1/models'));
    });
  }
});

describe('a content-length the DATA overruns only after the head was forwarded', () => {
  // The DATA frames come apart here, so tokentap has opened the upstream request before nghttp2
  // sees the overrun; what must hold is that the upstream never gets a complete request.
  const head = request('POST', '/v1/completions', ['content-length', '3']);

  async function overrun(client: RawH2Client, progressed: () => boolean): Promise<void> {
    client.write(frame(FRAME.HEADERS, FLAG.END_HEADERS, 1, headerBlock(head)));
    client.write(frame(FRAME.DATA, 0, 1, Buffer.from('hel')));
    await eventually('the first DATA to reach the upstream', progressed, (reached) => reached, 5_000);
    client.write(frame(FRAME.DATA, FLAG.END_STREAM, 1, Buffer.from('lo')));
    await eventually('stream 1 to end', () => client.ended(1) || client.goawayCode() !== undefined, (ended) => ended, 5_000);
  }

  it('leaves the HTTP/1.1 upstream an unterminated chunked body and closes its connection, so it never holds a complete request', async () => {
    const upstream = await startCaptureUpstream();
    cleanups.push(() => upstream.close());
    const sidecar = await startTestSidecar(upstream.url);
    cleanups.push(() => sidecar.close());
    upstream.mark();
    const client = await connect(sidecar.proxyUrl);
    await overrun(client, () => upstream.since().endsWith('hel\r\n'));
    await eventually('the upstream connection to close', () => upstream.connections.every((c) => c.closed), (closed) => closed, 5_000);
    expect(upstream.since()).toBe('POST /v1/completions HTTP/1.1\r\nhost: tokentap.test\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nhel\r\n');
    expect(client.data(1).length).toBe(0);
  });

  it('leaves the h2c upstream a stream that never ends', async () => {
    const upstream = await startH2cReplayUpstream(() => ({ chunks: [Buffer.from('ok')] }));
    cleanups.push(() => upstream.close());
    const sidecar = await startTestSidecar(upstream.url, 'upstream_protocol: h2c\n');
    cleanups.push(() => sidecar.close());
    const client = await connect(sidecar.proxyUrl);
    await overrun(client, () => upstream.streams === 1);
    await new Promise((r) => setTimeout(r, 100));
    expect(upstream.streams).toBe(1);
    // `seen` records a stream at its end: none ended, so the upstream answered nothing.
    expect(upstream.seen).toEqual([]);
    expect(client.data(1).length).toBe(0);
  });
});
