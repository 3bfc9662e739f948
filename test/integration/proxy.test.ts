import net, { type AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { llamacppStream, llamacppStreamNames, randomChunks, splitEvents } from '../helpers/fixtures.js';
import { histogram, scrape, sumValues } from '../helpers/prometheus-text.js';
import { exchange, startReplayUpstream, type Script, type SeenRequest } from '../helpers/replay-upstream.js';
import { eventually, startTestSidecar } from '../helpers/sidecar.js';

/**
 * The proxy against a replaying upstream: the script for each request is chosen by its
 * `x-script` header, so one upstream and one sidecar serve every case.
 */
const scripts: Record<string, (req: SeenRequest) => Script> = {};
let upstream: Awaited<ReturnType<typeof startReplayUpstream>>;
let sidecar: Awaited<ReturnType<typeof startTestSidecar>>;

function headerOf(req: SeenRequest, name: string): string | undefined {
  for (let i = 0; i < req.rawHeaders.length; i += 2) if (req.rawHeaders[i]?.toLowerCase() === name) return req.rawHeaders[i + 1];
  return undefined;
}

beforeAll(async () => {
  upstream = await startReplayUpstream((req) => {
    if (req.url === '/health') return { status: 200, headers: { 'content-type': 'application/json' }, chunks: [] };
    const name = headerOf(req, 'x-script') ?? '';
    const script = scripts[name];
    if (!script) throw new Error(`no script ${name}`);
    return script(req);
  });
  sidecar = await startTestSidecar(upstream.url, 'upstream_idle_timeout: 400ms\nmetrics:\n  max_models: 2\n');
});

afterAll(async () => {
  await sidecar?.close();
  await upstream?.close();
});

const chatBody = (model = 'tiny') => JSON.stringify({ model, stream: true, messages: [{ role: 'user', content: 'hi' }] });
const post = (script: string, extra: Parameters<typeof exchange>[1] = {}) =>
  exchange(`${sidecar.proxyUrl}/v1/chat/completions`, {
    method: 'POST',
    body: chatBody(),
    ...extra,
    headers: { 'content-type': 'application/json', 'x-script': script, ...extra.headers },
  });

describe('tee without touching', () => {
  it.each(llamacppStreamNames())('delivers the real capture %s byte-identical, one event per chunk', async (name) => {
    const stream = llamacppStream(name);
    scripts[`capture-${name}`] = () => ({ chunks: splitEvents(stream) });
    const result = await post(`capture-${name}`);
    expect(result.status).toBe(200);
    expect(result.body.equals(stream)).toBe(true);
  });

  it('delivers streams cut at random chunk boundaries byte-identical', async () => {
    const stream = llamacppStream('chat-completions-held-utf8-token.sse');
    for (let seed = 1; seed <= 20; seed++) {
      scripts[`random-${seed}`] = () => ({ chunks: randomChunks(stream, seed) });
      const result = await post(`random-${seed}`);
      expect(result.body.equals(stream), `seed ${seed}`).toBe(true);
    }
  });

  it('writes each chunk as it arrives, without waiting for the next', async () => {
    scripts['slow'] = () => ({ chunks: [Buffer.from('data: {"choices":[{"delta":{"content":"a"}}]}\n\n'), Buffer.from('data: [DONE]\n\n')], gapMs: 300 });
    const result = await post('slow');
    expect(result.chunks.length).toBeGreaterThanOrEqual(2);
    // The first chunk reaches the client about 300 ms before the second: it was not held back.
    const first = result.chunks[0]!;
    const last = result.chunks.at(-1)!;
    expect(last.atMs - first.atMs).toBeGreaterThan(150);
  });

  it('forwards method, path, query, body and end-to-end headers unchanged, and drops hop-by-hop ones', async () => {
    scripts['echo'] = () => ({ status: 201, headers: { 'content-type': 'application/json', 'x-upstream': 'yes' }, chunks: [Buffer.from('{"ok":true}')] });
    const body = Buffer.from(JSON.stringify({ model: 'tiny', input: 'ünïcödé' }));
    const result = await exchange(`${sidecar.proxyUrl}/v1/embeddings?x=1&y=%20`, {
      method: 'PUT',
      body,
      headers: { 'x-script': 'echo', 'content-type': 'application/json', authorization: 'Bearer secret', 'X-Custom': 'Value', 'keep-alive': 'timeout=5', connection: 'keep-alive, x-drop', 'x-drop': '1' },
    });
    expect(result.status).toBe(201);
    expect(result.headers['x-upstream']).toBe('yes');
    expect(result.body.toString()).toBe('{"ok":true}');
    const seen = upstream.seen.at(-1)!;
    expect(seen.method).toBe('PUT');
    expect(seen.url).toBe('/v1/embeddings?x=1&y=%20');
    expect(seen.body.equals(body)).toBe(true);
    expect(headerOf(seen, 'authorization')).toBe('Bearer secret');
    expect(headerOf(seen, 'x-custom')).toBe('Value');
    expect(headerOf(seen, 'x-drop')).toBeUndefined();
    expect(headerOf(seen, 'keep-alive')).toBeUndefined();
  });

  it('passes non-streaming JSON through and records its usage', async () => {
    const json = JSON.stringify({ id: 'x', object: 'chat.completion', choices: [], usage: { prompt_tokens: 11, completion_tokens: 13, total_tokens: 24 } });
    scripts['json'] = () => ({ headers: { 'content-type': 'application/json' }, chunks: [Buffer.from(json)] });
    const before = await scrape(sidecar.adminUrl);
    const result = await post('json', { body: JSON.stringify({ model: 'json-model', messages: [] }) });
    expect(result.body.toString()).toBe(json);
    const after = await eventually('tokens counted', () => scrape(sidecar.adminUrl), (m) => sumValues(m, 'tokentap_tokens_total', { gen_ai_token_type: 'output' }) > sumValues(before, 'tokentap_tokens_total', { gen_ai_token_type: 'output' }));
    const delta = (labels: Record<string, string>) => sumValues(after, 'tokentap_tokens_total', labels) - sumValues(before, 'tokentap_tokens_total', labels);
    expect(delta({ gen_ai_token_type: 'output', token_source: 'usage' })).toBe(13);
    expect(delta({ gen_ai_token_type: 'input' })).toBe(11);
  });
});

describe('outcomes', () => {
  const outcomes = async () => {
    const m = await scrape(sidecar.adminUrl);
    const of = (outcome: string) => sumValues(m, 'tokentap_requests_total', { outcome });
    return { completed: of('completed'), client_cancelled: of('client_cancelled'), client_error: of('client_error'), upstream_error: of('upstream_error'), truncated: of('truncated'), timeout: of('timeout') };
  };

  it('counts a stream that ends with [DONE] as completed', async () => {
    scripts['done'] = () => ({ chunks: splitEvents(llamacppStream('chat-completions.sse')) });
    const before = await outcomes();
    await post('done');
    await eventually('completed', outcomes, (o) => o.completed === before.completed + 1);
  });

  it.each([
    [400, 'client_error'],
    [404, 'client_error'],
    [408, 'upstream_error'],
    [429, 'upstream_error'],
    [503, 'upstream_error'],
  ] as const)('counts an upstream answer of %i as %s, forwarded as is', async (status, outcome) => {
    const answer = JSON.stringify({ error: { message: 'no', code: status } });
    scripts[`status-${status}`] = () => ({ status, headers: { 'content-type': 'application/json' }, chunks: [Buffer.from(answer)] });
    const before = await outcomes();
    const result = await post(`status-${status}`);
    expect(result.status).toBe(status);
    expect(result.body.toString()).toBe(answer);
    const after = await eventually(outcome, outcomes, (o) => o[outcome] === before[outcome] + 1);
    const other = outcome === 'client_error' ? 'upstream_error' : 'client_error';
    expect(after[other]).toBe(before[other]);
  });

  it('counts a stream that stops without a terminal event as truncated, and ends it cleanly for the client', async () => {
    scripts['truncated'] = () => ({ chunks: splitEvents(llamacppStream('chat-completions.sse')).slice(0, 10) });
    const before = await outcomes();
    const result = await post('truncated');
    expect(result.ended).toBe('clean');
    await eventually('truncated', outcomes, (o) => o.truncated === before.truncated + 1);
  });

  it('breaks the client stream when the upstream resets mid-stream, and counts upstream_error', async () => {
    scripts['reset'] = () => ({ chunks: splitEvents(llamacppStream('chat-completions.sse')).slice(0, 5), ending: 'reset' });
    const before = await outcomes();
    const result = await post('reset');
    expect(result.ended).toBe('error');
    await eventually('upstream_error', outcomes, (o) => o.upstream_error === before.upstream_error + 1);
    const logged = sidecar.logs.filter((l) => l.msg === 'request' && l.outcome === 'upstream_error').at(-1);
    // Under load (test files running in parallel) the reset has reached the proxy as a plain close,
    // with no socket error, and the proxy says so; the stream is broken and counted either way.
    const host = new URL(upstream.url).host;
    expect([`upstream ${host} connection broke mid-body (ECONNRESET)`, `upstream ${host} closed the connection mid-body`]).toContain(logged?.error);
  });

  it('counts a non-2xx answer as upstream_error and forwards it as is', async () => {
    scripts['503'] = () => ({ status: 503, headers: { 'content-type': 'application/json' }, chunks: [Buffer.from('{"error":"overloaded"}')] });
    const before = await outcomes();
    const result = await post('503');
    expect(result.status).toBe(503);
    expect(result.body.toString()).toBe('{"error":"overloaded"}');
    await eventually('upstream_error', outcomes, (o) => o.upstream_error === before.upstream_error + 1);
    const m = await scrape(sidecar.adminUrl);
    expect(sumValues(m, 'tokentap_requests_total', { outcome: 'upstream_error', http_status_class: '5xx' })).toBeGreaterThan(0);
  });

  it('aborts the upstream request at once when the client leaves, and counts client_cancelled', async () => {
    scripts['forever'] = () => ({ chunks: Array.from({ length: 200 }, () => Buffer.from('data: {"choices":[{"delta":{"content":"a"}}]}\n\n')), gapMs: 20 });
    const before = await outcomes();
    const clientGoneAt = performance.now() + 300;
    await post('forever', { abortAfterMs: 300 });
    const seen = await eventually('upstream saw the close', () => upstream.seen.at(-1), (s) => s?.closedEarlyAtMs !== undefined);
    // At once: the stream had 4 s left; 500 ms of slack covers a loaded machine.
    expect(seen!.closedEarlyAtMs! - clientGoneAt).toBeLessThan(500);
    await eventually('client_cancelled', outcomes, (o) => o.client_cancelled === before.client_cancelled + 1);
  });

  it('cuts an upstream that goes silent mid-stream after the idle timeout: a broken stream and a timeout', async () => {
    scripts['hang'] = () => ({ chunks: [Buffer.from('data: {"choices":[{"delta":{"content":"a"}}]}\n\n')], ending: 'hang' });
    const before = await outcomes();
    const result = await post('hang');
    expect(result.ended).toBe('error');
    await eventually('timeout', outcomes, (o) => o.timeout === before.timeout + 1);
    const logged = sidecar.logs.filter((l) => l.msg === 'request' && l.outcome === 'timeout').at(-1);
    expect(logged?.error).toBe(`upstream ${new URL(upstream.url).host} sent nothing for 400 ms (upstream_idle_timeout)`);
  });
});

describe('upstream down', () => {
  it('answers 502 with a JSON error body and counts upstream_error', async () => {
    const down = await startTestSidecar('http://127.0.0.1:1');
    try {
      const result = await exchange(`${down.proxyUrl}/v1/chat/completions`, { method: 'POST', body: chatBody(), headers: { 'content-type': 'application/json' } });
      expect(result.status).toBe(502);
      expect(result.headers['content-type']).toBe('application/json');
      const body = JSON.parse(result.body.toString());
      expect(body.error.type).toBe('upstream_error');
      expect(body.error.message).toBe('tokentap: upstream 127.0.0.1:1 connection failed (ECONNREFUSED)');
      // The operator's request log line names the same place and cause.
      const [line] = await eventually('the request log line', () => down.logs.filter((l) => l.msg === 'request'), (l) => l.length > 0);
      expect(line).toMatchObject({ outcome: 'upstream_error', status: 502, error: 'upstream 127.0.0.1:1 connection failed (ECONNREFUSED)' });
      const m = await eventually('counted', () => scrape(down.adminUrl), (x) => sumValues(x, 'tokentap_requests_total', { outcome: 'upstream_error' }) === 1);
      expect(sumValues(m, 'tokentap_requests_total', { outcome: 'upstream_error', http_status_class: '5xx', gen_ai_request_model: 'tiny' })).toBe(1);
      const ready = await fetch(`${down.adminUrl}/readyz`);
      expect(ready.status).toBe(503);
    } finally {
      await down.close();
    }
  });
});

describe('an upstream answer Node cannot forward', () => {
  it('answers 502 naming it (a status below 100 or above 599), counts upstream_error, and keeps serving', async () => {
    const statuses = ['099', '600', '999'];
    let next = 0;
    const odd = net.createServer((socket) => socket.once('data', () => socket.end(`HTTP/1.1 ${statuses[next++ % statuses.length]} Odd\r\ncontent-length: 2\r\n\r\nok`)));
    await new Promise<void>((resolve) => odd.listen(0, '127.0.0.1', resolve));
    const oddUrl = `http://127.0.0.1:${(odd.address() as AddressInfo).port}`;
    const proxied = await startTestSidecar(oddUrl);
    try {
      for (const status of statuses) {
        const result = await exchange(`${proxied.proxyUrl}/v1/chat/completions`, { method: 'POST', body: chatBody(), headers: { 'content-type': 'application/json' } });
        expect(result.status).toBe(502);
        expect(JSON.parse(result.body.toString()).error.message).toBe(`tokentap: upstream ${new URL(oddUrl).host} sent a response that cannot be forwarded (status ${Number(status)} is outside 100-599)`);
      }
      const m = await eventually('counted', () => scrape(proxied.adminUrl), (x) => sumValues(x, 'tokentap_requests_total', { outcome: 'upstream_error' }) === statuses.length);
      expect(sumValues(m, 'tokentap_requests_total', { outcome: 'upstream_error', http_status_class: '5xx' })).toBe(statuses.length);
    } finally {
      await proxied.close();
      await new Promise((resolve) => odd.close(resolve));
    }
  });
});

describe('labels, logs and admin endpoints', () => {
  it('keeps at most max_models model labels and folds the rest into "other"', async () => {
    scripts['short'] = () => ({ chunks: splitEvents(llamacppStream('chat-completions.sse')).slice(-2) });
    for (const model of ['m-one', 'm-two', 'm-three', 'm-four']) await post('short', { body: chatBody(model) });
    const m = await eventually('four requests', () => scrape(sidecar.adminUrl), (x) => sumValues(x, 'tokentap_requests_total', { gen_ai_request_model: 'other' }) >= 4);
    const models = new Set(m.get('tokentap_requests_total')!.metrics.map((s) => s.labels?.['gen_ai_request_model']));
    // "tiny" and "json-model" (earlier tests) fill the limit of 2: the four new names are all "other".
    expect(models).toEqual(new Set(['tiny', 'json-model', 'other']));
    expect(sumValues(m, 'tokentap_requests_total', { gen_ai_request_model: 'other' })).toBe(4);
    for (const s of m.get('tokentap_requests_total')!.metrics) expect(s.labels?.['workload']).toBe('default');
  });

  it('logs one JSON line per request with timings, tokens and outcome, and never a credential', async () => {
    scripts['logged'] = () => ({ chunks: splitEvents(llamacppStream('chat-completions.sse')) });
    await post('logged', { headers: { authorization: 'Bearer sk-SECRET', 'x-api-key': 'KEY-SECRET', cookie: 'c=COOKIE-SECRET' } });
    const line = await eventually('log line', () => sidecar.logs.filter((l) => l['msg'] === 'request').at(-1), (l) => l?.['outcome'] === 'completed' && l?.['output_tokens'] === 128);
    expect(line).toMatchObject({ method: 'POST', path: '/v1/chat/completions', status: 200, workload: 'default', model: 'tiny', input_tokens: 36, token_source: 'usage', content_events: 128 });
    expect(typeof line!['ttft_ms']).toBe('number');
    expect(typeof line!['e2e_ms']).toBe('number');
    const all = JSON.stringify(sidecar.logs);
    for (const secret of ['sk-SECRET', 'KEY-SECRET', 'COOKIE-SECRET', ' gouvernement']) expect(all).not.toContain(secret);
  });

  it('serves every documented metric family on /metrics as valid Prometheus text', async () => {
    const m = await scrape(sidecar.adminUrl);
    for (const name of [
      'gen_ai_server_time_to_first_token_seconds',
      'gen_ai_server_time_per_output_token_seconds',
      'gen_ai_server_request_duration_seconds',
      'gen_ai_client_token_usage',
      'tokentap_time_to_first_byte_seconds',
      'tokentap_inter_token_latency_seconds',
      'tokentap_inter_chunk_latency_seconds',
    ]) {
      expect(m.get(name)?.type, name).toBe('HISTOGRAM');
      expect(histogram(m, name).count, name).toBeGreaterThan(0);
    }
    expect(m.get('tokentap_requests_total')?.type).toBe('COUNTER');
    expect(m.get('tokentap_tokens_total')?.type).toBe('COUNTER');
    expect(m.get('tokentap_requests_in_flight')?.type).toBe('GAUGE');
    expect(m.get('nodejs_eventloop_lag_seconds')?.type).toBe('GAUGE');
    expect(m.get('nodejs_heap_size_used_bytes')?.type).toBe('GAUGE');
    // SLO thresholds are exact boundaries.
    expect([...histogram(m, 'gen_ai_server_time_to_first_token_seconds').buckets.keys()]).toEqual(expect.arrayContaining([0.2, 0.3]));
  });

  it('answers /healthz, and /readyz while the upstream answers', async () => {
    expect((await fetch(`${sidecar.adminUrl}/healthz`)).status).toBe(200);
    const ready = await fetch(`${sidecar.adminUrl}/readyz`);
    expect(ready.status).toBe(200);
    expect(upstream.seen.at(-1)?.url).toBe('/health');
  });
});
