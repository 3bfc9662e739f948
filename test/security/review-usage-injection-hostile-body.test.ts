import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCaptureUpstream, type SplitMessage } from '../helpers/capture-upstream.js';
import { RawClient } from '../helpers/raw-http.js';
import { startTestSidecar } from '../helpers/sidecar.js';

/**
 * `inject_usage: true` rewrites one member of a client's JSON body (`stream_options`). A hostile or
 * merely unusual body must not turn that rewrite into something else: a nesting too deep for
 * JSON.stringify (5,000 levels overflow V8's stack, measured) reset the client's connection from
 * inside the parser callback, and re-serialising the whole body changed bytes the client wrote
 * (integers beyond 2^53, invalid UTF-8) that the rewrite has no business touching.
 */

const seen: SplitMessage[] = [];
let upstream: Awaited<ReturnType<typeof startCaptureUpstream>>;
let sidecar: Awaited<ReturnType<typeof startTestSidecar>>;
const clients: RawClient[] = [];

beforeAll(async () => {
  upstream = await startCaptureUpstream((message) => {
    seen.push(message);
    return false;
  });
  sidecar = await startTestSidecar(upstream.url, 'inject_usage: true\nupstream_idle_timeout: 20s\n');
});

afterAll(async () => {
  for (const c of clients) c.close();
  await sidecar?.close();
  await upstream?.close();
});

async function relay(body: Buffer): Promise<{ answer: string; upstreamBody: Buffer }> {
  const c = await RawClient.connect(sidecar.proxyUrl);
  clients.push(c);
  const before = seen.length;
  c.write(Buffer.concat([Buffer.from(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`), body]));
  const answer = await c.read((t) => /\r\n\r\n[\s\S]*\}$/.test(t), 5_000);
  expect(seen.length).toBe(before + 1);
  return { answer, upstreamBody: Buffer.from((seen[before] as SplitMessage).body, 'latin1') };
}

describe('usage injection never breaks or alters what it does not rewrite', () => {
  it('forwards a body nested 20,000 deep (stream_options present) instead of resetting the connection', async () => {
    const depth = 20_000;
    const body = Buffer.from(`{"stream":true,"stream_options":{"include_usage":false},"x":${'['.repeat(depth)}${']'.repeat(depth)}}`);
    const { answer, upstreamBody } = await relay(body);
    expect(answer).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    expect(upstreamBody.toString('latin1')).toBe(`{"stream":true,"stream_options":{"include_usage":true},"x":${'['.repeat(depth)}${']'.repeat(depth)}}`);
  });

  it('rewrites only stream_options: integers beyond 2^53, spacing and invalid UTF-8 elsewhere stay byte for byte', async () => {
    const before = Buffer.from('{ "seed": 18446744073709551615, "temperature": 1.0, "stream": true,\n  "stream_options": {"include_usage": false, "continuous_usage_stats": true}, "user": "');
    const after = Buffer.from('" }');
    const body = Buffer.concat([before, Buffer.from([0xff, 0xfe]), after]);
    const { answer, upstreamBody } = await relay(body);
    expect(answer).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    const expected = Buffer.concat([
      Buffer.from('{ "seed": 18446744073709551615, "temperature": 1.0, "stream": true,\n  "stream_options": {"include_usage": true, "continuous_usage_stats": true}, "user": "'),
      Buffer.from([0xff, 0xfe]),
      after,
    ]);
    expect(upstreamBody.toString('hex')).toBe(expected.toString('hex'));
  });

  it('with stream_options given twice, rewrites the last (the one JSON.parse and Python read) and leaves the first as written', async () => {
    const body = Buffer.from('{"stream":true,"stream_options":{"include_usage":true},"stream_options":{"include_usage":false}}');
    const { upstreamBody } = await relay(body);
    expect(upstreamBody.toString('latin1')).toBe('{"stream":true,"stream_options":{"include_usage":true},"stream_options":{"include_usage":true}}');
  });

  it.each([
    ['an array (it became {"0":1,"1":{...},"include_usage":true})', '{"stream":true,"stream_options":[1,{"include_usage":false}]}'],
    ['a string', '{"stream":true,"stream_options":"include_usage"}'],
    ['a number', '{"stream":true,"stream_options":18446744073709551615}'],
    ['false', '{"stream":true,"stream_options":false}'],
  ])('forwards a stream_options that is %s byte for byte, without injecting', async (_what, text) => {
    const { upstreamBody } = await relay(Buffer.from(text));
    expect(upstreamBody.toString('latin1')).toBe(text);
  });

  it.each([
    ['keeps integers beyond 2^53 and numbers beyond a double inside stream_options (they were rounded, 1e400 became null)', '{"stream":true,"stream_options":{ "seed" : 18446744073709551615, "x": 1e400, "include_usage" : false }}', '{"stream":true,"stream_options":{ "seed" : 18446744073709551615, "x": 1e400, "include_usage" : true }}'],
    ['leaves an object without include_usage as written (vLLM defaults it to true: the client asked)', '{"stream":true,"stream_options":{"continuous_usage_stats": true,"n":12345678901234567890}}', '{"stream":true,"stream_options":{"continuous_usage_stats": true,"n":12345678901234567890}}'],
    ['leaves an empty object as written (the same)', '{"stream":true,"stream_options":{ }}', '{"stream":true,"stream_options":{ }}'],
    ['replaces a null (OpenAI: no options) with the option', '{"stream":true,"stream_options":null}', '{"stream":true,"stream_options":{"include_usage":true}}'],
    ['replaces the last of a repeated include_usage, the one JSON.parse reads', '{"stream":true,"stream_options":{"include_usage":true,"include_usage":false}}', '{"stream":true,"stream_options":{"include_usage":true,"include_usage":true}}'],
  ])('%s', async (_what, text, expected) => {
    const { upstreamBody } = await relay(Buffer.from(text));
    expect(upstreamBody.toString('latin1')).toBe(expected);
  });

  it('forwards a stream_options whose include_usage key is written with escapes unchanged, rather than guessing', async () => {
    const text = '{"stream":true,"stream_options":{"include\\u005fusage":false}}';
    const { upstreamBody } = await relay(Buffer.from(text));
    expect(upstreamBody.toString('latin1')).toBe(text);
  });
});

