import { afterEach, describe, expect, it } from 'vitest';
import { llamacppStream, splitEvents } from '../helpers/fixtures.js';
import { exchange, startReplayUpstream } from '../helpers/replay-upstream.js';
import { eventually, startTestSidecar } from '../helpers/sidecar.js';
import { splitLines, streamFixture } from '../unit/taps/replay.js';

/**
 * Each protocol's fixture served by an upstream at its usual path, through the real proxy: the
 * client gets the bytes unchanged, and the request's log line shows the protocol's own tap read it
 * (outcome from its terminal event, tokens from its usage).
 */

const running: Array<{ close(): Promise<void> }> = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((r) => r.close()));
});

const NDJSON = 'application/x-ndjson';
const SSE = 'text/event-stream';

const CASES: Array<[path: string, contentType: string, stream: Buffer, split: (b: Buffer) => Buffer[], expected: Record<string, unknown>]> = [
  ['/v1/messages', SSE, streamFixture('anthropic', 'messages-tool-use.sse'), splitEvents, { output_tokens: 89, input_tokens: 472, content_events: 20 }],
  ['/v1/responses', SSE, streamFixture('openai-responses', 'text.sse'), splitEvents, { output_tokens: 10, input_tokens: 37, content_events: 10 }],
  ['/generate_stream', SSE, streamFixture('tgi', 'generate-stream.sse'), splitEvents, { output_tokens: 17, input_tokens: 9, content_events: 16 }],
  ['/api/chat', NDJSON, streamFixture('ollama', 'chat.ndjson'), splitLines, { output_tokens: 18, input_tokens: 26, content_events: 18 }],
  ['/completion', SSE, llamacppStream('completion-native.sse'), splitEvents, { output_tokens: 128, input_tokens: 5, token_source: 'usage' }],
  ['/v2/models/ensemble/generate_stream', SSE, streamFixture('triton', 'generate-stream-trtllm.sse'), splitEvents, { output_tokens: 15, content_events: 15, token_source: 'counted' }],
];

describe('each protocol through the proxy at its built-in path', () => {
  it.each(CASES)('%s', async (path, contentType, stream, split, expected) => {
    const upstream = await startReplayUpstream(() => ({ headers: { 'content-type': contentType }, chunks: split(stream), gapMs: 1 }));
    running.push(upstream);
    const sidecar = await startTestSidecar(upstream.url);
    running.push(sidecar);
    const response = await exchange(`${sidecar.proxyUrl}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"model":"m"}' });
    expect(response.body.equals(stream)).toBe(true);
    const [log] = await eventually('the request log line', () => sidecar.logs.filter((l) => l.msg === 'request'), (l) => l.length > 0);
    expect(log).toMatchObject({ outcome: 'completed', path, ...expected });
    expect(typeof log!['ttft_ms']).toBe('number');
  });
});

describe('configured routes through the proxy', () => {
  it('reads a server mounted under another path with the configured protocol, and not at all with none', async () => {
    const stream = streamFixture('anthropic', 'messages-basic.sse');
    const upstream = await startReplayUpstream(() => ({ chunks: splitEvents(stream) }));
    running.push(upstream);
    const sidecar = await startTestSidecar(upstream.url, 'routes:\n  - { path: "/claude/*", protocol: anthropic-messages }\n  - { path: /quiet, protocol: none }\n');
    running.push(sidecar);
    await exchange(`${sidecar.proxyUrl}/claude/v1/messages`, { method: 'POST', body: '{}' });
    await exchange(`${sidecar.proxyUrl}/quiet`, { method: 'POST', body: '{}' });
    const logs = await eventually('two request log lines', () => sidecar.logs.filter((l) => l.msg === 'request'), (l) => l.length === 2);
    const byPath = Object.fromEntries(logs.map((l) => [l.path, l]));
    expect(byPath['/claude/v1/messages']).toMatchObject({ outcome: 'completed', output_tokens: 15, input_tokens: 25, content_events: 2 });
    // Unobserved: no tap, so no tokens and no terminal event to judge by; TTFB and e2e only.
    expect(byPath['/quiet']).toMatchObject({ output_tokens: 0, content_events: 0, ttft_ms: null });
    expect(typeof byPath['/quiet']!['ttfb_ms']).toBe('number');
  });
});

describe('the request body read for its model whatever its content type says, on generation routes', () => {
  it.each([
    ['/api/chat, sent as Ollama\'s docs show with curl -d (application/x-www-form-urlencoded): labelled by its model (it was "unknown")', '/api/chat', 'application/x-www-form-urlencoded', 'llama3.2'],
    ['/api/generate without a content type', '/api/generate', undefined, 'llama3.2'],
    ['an unrouted path with a form body: not read, "unknown"', '/upload', 'application/x-www-form-urlencoded', 'unknown'],
  ])('%s', async (_what, path, contentType, label) => {
    const upstream = await startReplayUpstream(() => ({ headers: { 'content-type': NDJSON }, chunks: splitLines(streamFixture('ollama', 'chat.ndjson')), gapMs: 1 }));
    running.push(upstream);
    const sidecar = await startTestSidecar(upstream.url);
    running.push(sidecar);
    const body = '{"model":"llama3.2","messages":[{"role":"user","content":"why is the sky blue?"}]}';
    const response = await exchange(`${sidecar.proxyUrl}${path}`, { method: 'POST', headers: contentType === undefined ? {} : { 'content-type': contentType }, body });
    expect(response.status).toBe(200);
    expect(upstream.seen[0]!.body.toString()).toBe(body);
    const [log] = await eventually('the request log line', () => sidecar.logs.filter((l) => l.msg === 'request'), (l) => l.length > 0);
    expect(log).toMatchObject({ path, model: label });
  });
});

