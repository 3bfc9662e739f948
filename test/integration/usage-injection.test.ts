import OpenAI from 'openai';
import { afterEach, describe, expect, it } from 'vitest';
import { scrape, sumValues } from '../helpers/prometheus-text.js';
import { RawClient } from '../helpers/raw-http.js';
import { exchange, startReplayUpstream, type SeenRequest } from '../helpers/replay-upstream.js';
import { eventually, startTestSidecar } from '../helpers/sidecar.js';

/**
 * Usage injection through the real proxy: an upstream that behaves like vLLM (a usage-only chunk
 * only when the request asks `stream_options.include_usage`), clients that ask and clients that do
 * not, with `inject_usage` on and off.
 */

const chunk = (payload: object) => Buffer.from(`data: ${JSON.stringify({ id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 1, model: 'm', ...payload })}\n\n`);
const delta = (d: object, finish: string | null = null) => chunk({ choices: [{ index: 0, delta: d, logprobs: null, finish_reason: finish }] });
/** The usage the upstream reports: 4 output tokens for 3 content events (one held token), so its source shows in the count. */
const USAGE_CHUNK = chunk({ choices: [], usage: { prompt_tokens: 9, completion_tokens: 4, total_tokens: 13 } });

function vllmLike(request: SeenRequest) {
  const body = JSON.parse(request.body.toString('utf8')) as { stream_options?: unknown };
  const chunks = [delta({ role: 'assistant', content: '' }), delta({ content: 'Hel' }), delta({ content: 'lo' }), delta({ content: '!' }), delta({}, 'stop')];
  // vLLM's StreamOptions: once stream_options is an object, include_usage defaults to true.
  const options = body.stream_options as { include_usage?: unknown } | null | undefined;
  if (options != null && typeof options === 'object' && !Array.isArray(options) && options.include_usage !== false && options.include_usage !== null) chunks.push(USAGE_CHUNK);
  chunks.push(Buffer.from('data: [DONE]\n\n'));
  return { chunks };
}

const running: Array<{ close(): Promise<void> }> = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((r) => r.close()));
});

async function setUp(config: string) {
  const upstream = await startReplayUpstream(vllmLike);
  running.push(upstream);
  const sidecar = await startTestSidecar(upstream.url, config);
  running.push(sidecar);
  return { upstream, sidecar };
}

const NAIVE_REQUEST = '{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}';
const ASKING_REQUEST = '{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}';

function post(proxyUrl: string, body: string) {
  return exchange(`${proxyUrl}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
}

function header(request: SeenRequest, name: string): string | undefined {
  const i = request.rawHeaders.findIndex((h, n) => n % 2 === 0 && h.toLowerCase() === name);
  return i === -1 ? undefined : request.rawHeaders[i + 1];
}

async function requestLog(sidecar: Awaited<ReturnType<typeof startTestSidecar>>) {
  return eventually('the request log line', () => sidecar.logs.filter((l) => l.msg === 'request'), (l) => l.length > 0);
}

describe('usage injection (inject_usage: true)', () => {
  it('asks the upstream for usage, hides the usage-only chunk from a client that did not ask, and counts tokens from the usage', async () => {
    const { upstream, sidecar } = await setUp('inject_usage: true\n');
    const response = await post(sidecar.proxyUrl, NAIVE_REQUEST);

    const sent = upstream.seen[0]!;
    expect(JSON.parse(sent.body.toString()).stream_options).toEqual({ include_usage: true });
    expect(header(sent, 'content-length')).toBe(String(sent.body.length));

    const expected = Buffer.concat(vllmLike({ ...sent, body: Buffer.from(NAIVE_REQUEST) }).chunks);
    expect(response.body.toString()).toBe(expected.toString());
    expect(response.body.includes('"choices":[]')).toBe(false);

    const [log] = await requestLog(sidecar);
    expect(log).toMatchObject({ outcome: 'completed', output_tokens: 4, input_tokens: 9, token_source: 'usage', content_events: 3 });
  });

  it('leaves a client that asked for usage alone: its body unchanged, the usage chunk delivered', async () => {
    const { upstream, sidecar } = await setUp('inject_usage: true\n');
    const response = await post(sidecar.proxyUrl, ASKING_REQUEST);
    expect(upstream.seen[0]!.body.toString()).toBe(ASKING_REQUEST);
    expect(response.body.toString()).toBe(Buffer.concat(vllmLike(upstream.seen[0]!).chunks).toString());
    expect(response.body.includes(USAGE_CHUNK)).toBe(true);
    const [log] = await requestLog(sidecar);
    expect(log).toMatchObject({ output_tokens: 4, token_source: 'usage' });
  });

  it('lets the openai client iterate a naive chat stream without ever seeing an empty choices list', async () => {
    const { upstream, sidecar } = await setUp('inject_usage: true\n');
    const client = new OpenAI({ baseURL: `${sidecar.proxyUrl}/v1`, apiKey: 'unused', maxRetries: 0 });
    const stream = await client.chat.completions.create({ model: 'm', stream: true, messages: [{ role: 'user', content: 'hi' }] });
    let text = '';
    // What naive clients write: it throws on the usage-only chunk.
    for await (const part of stream) text += part.choices[0]!.delta.content ?? '';
    expect(text).toBe('Hello!');
    expect(JSON.parse(upstream.seen[0]!.body.toString()).stream_options).toEqual({ include_usage: true });
    const [log] = await requestLog(sidecar);
    expect(log).toMatchObject({ output_tokens: 4, token_source: 'usage' });
  });

  it('frames the rewritten body correctly when the client sent Expect: 100-continue (curl does for large bodies)', async () => {
    const { upstream, sidecar } = await setUp('inject_usage: true\n');
    const response = await exchange(`${sidecar.proxyUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', expect: '100-continue', 'content-length': String(NAIVE_REQUEST.length) },
      body: NAIVE_REQUEST,
    });
    expect(response.status).toBe(200);
    const sent = upstream.seen[0]!;
    expect(JSON.parse(sent.body.toString()).stream_options).toEqual({ include_usage: true });
    expect(header(sent, 'content-length')).toBe(String(sent.body.length));
    expect(upstream.seen).toHaveLength(1);
  });

  it.each([
    ['Expect: x, 100-continue', 'Expect: x, 100-continue\r\n'],
    ['a second Expect field', 'Expect: x\r\nExpect: 100-continue\r\n'],
  ])('answers 100 Continue itself to %s, as the relay reads the expectation (curl would wait a second before its body)', async (_what, expectFields) => {
    const { upstream, sidecar } = await setUp('inject_usage: true\n');
    const client = await RawClient.connect(sidecar.proxyUrl);
    running.push({ close: async () => client.close() });
    client.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nContent-Length: ${NAIVE_REQUEST.length}\r\n${expectFields}\r\n`);
    // The body goes only once told to, as curl does.
    await client.read((text) => text.includes('HTTP/1.1 100 Continue\r\n\r\n'), 3_000);
    client.write(NAIVE_REQUEST);
    await client.read((text) => text.includes('data: [DONE]'));
    expect(JSON.parse(upstream.seen[0]!.body.toString()).stream_options).toEqual({ include_usage: true });
  });

  it.each([
    [
      'a stream_options that is not an object (an array: it reached the upstream as {"0":1,"1":{...},"include_usage":true})',
      '{"model":"m","stream":true,"stream_options":[1,{"include_usage":false}],"messages":[{"role":"user","content":"hi"}]}',
      false,
    ],
    ['a stream_options object without include_usage (vLLM defaults it to true: the client asked)', '{"model":"m","stream":true,"stream_options":{"continuous_usage_stats":true},"messages":[]}', true],
  ])('forwards %s byte for byte, and the client gets the upstream`s answer whole', async (_what, body, usage) => {
    const { upstream, sidecar } = await setUp('inject_usage: true\n');
    const response = await post(sidecar.proxyUrl, body);
    expect(upstream.seen[0]!.body.toString('latin1')).toBe(body);
    expect(response.body.toString()).toBe(Buffer.concat(vllmLike(upstream.seen[0]!).chunks).toString());
    expect(response.body.toString().includes('"usage"')).toBe(usage);
  });

  it('sets include_usage in the stream_options object in place when it says false: its other members keep their bytes, a 20-digit integer included', async () => {
    const { upstream, sidecar } = await setUp('inject_usage: true\n');
    const body = '{"model":"m","stream":true,"stream_options":{"continuous_usage_stats":false,"include_usage":false,"seed":18446744073709551615},"messages":[]}';
    await post(sidecar.proxyUrl, body);
    expect(upstream.seen[0]!.body.toString('latin1')).toBe('{"model":"m","stream":true,"stream_options":{"continuous_usage_stats":false,"include_usage":true,"seed":18446744073709551615},"messages":[]}');
  });


  it('forwards a non-streaming request byte for byte', async () => {
    const { upstream, sidecar } = await setUp('inject_usage: true\n');
    const body = '{"model":"m","stream":false,"messages":[]}';
    await post(sidecar.proxyUrl, body);
    expect(upstream.seen[0]!.body.toString()).toBe(body);
    expect(header(upstream.seen[0]!, 'content-length')).toBe(String(body.length));
  });
});

describe('without usage injection (the default)', () => {
  it('forwards the request and the response unchanged and counts tokens from the content events', async () => {
    const { upstream, sidecar } = await setUp('');
    const response = await post(sidecar.proxyUrl, NAIVE_REQUEST);
    expect(upstream.seen[0]!.body.toString()).toBe(NAIVE_REQUEST);
    expect(response.body.toString()).toBe(Buffer.concat(vllmLike(upstream.seen[0]!).chunks).toString());
    const [log] = await requestLog(sidecar);
    expect(log).toMatchObject({ output_tokens: 3, token_source: 'counted' });
  });

  it('still delivers the usage chunk to a client that asked, with exact counts; fewer content events than reported tokens is no mismatch', async () => {
    const { sidecar } = await setUp('');
    const response = await post(sidecar.proxyUrl, ASKING_REQUEST);
    expect(response.body.includes(USAGE_CHUNK)).toBe(true);
    const [log] = await requestLog(sidecar);
    expect(log).toMatchObject({ output_tokens: 4, token_source: 'usage', counted_tokens: 3 });
    // 3 content events against 4 reported tokens: an event may carry several tokens, so no disagreement.
    await post(sidecar.proxyUrl, NAIVE_REQUEST); // no usage reported: nothing to disagree with
    const metrics = await eventually('both recorded', () => scrape(sidecar.adminUrl), (m) => sumValues(m, 'tokentap_requests_total') === 2);
    expect(sumValues(metrics, 'tokentap_token_count_mismatches_total')).toBe(0);
  });
});
