import { describe, expect, it } from 'vitest';
import { RESET_CODES, rawRequest, simulator, streamRequest, type TimedEvent } from './helpers.js';

/**
 * The x-sim-* headers behave the same on every API: one request shape per API, the same timing,
 * chunking, fault and stamp checks on each.
 */

interface Api {
  readonly name: string;
  readonly path: string;
  readonly body: Record<string, unknown>;
  /** The content text of one event body (SSE data or an NDJSON line), or undefined when it carries none. */
  readonly contentOf: (event: string) => string | undefined;
}

function json(event: string): Record<string, any> | undefined {
  const start = event.indexOf('{');
  if (start < 0) return undefined;
  try {
    return JSON.parse(event.slice(start)) as Record<string, any>;
  } catch {
    return undefined;
  }
}

const nonEmpty = (text: unknown): string | undefined => (typeof text === 'string' && text !== '' ? text : undefined);

const APIS: readonly Api[] = [
  {
    name: 'OpenAI chat',
    path: '/v1/chat/completions',
    body: { messages: [{ role: 'user', content: 'hi' }], stream: true },
    contentOf: (event) => nonEmpty(json(event)?.['choices']?.[0]?.delta?.content),
  },
  {
    name: 'OpenAI completions',
    path: '/v1/completions',
    body: { prompt: 'hi', stream: true },
    contentOf: (event) => nonEmpty(json(event)?.['choices']?.[0]?.text),
  },
  {
    name: 'OpenAI Responses',
    path: '/v1/responses',
    body: { input: 'hi', stream: true },
    contentOf: (event) => (json(event)?.['type'] === 'response.output_text.delta' ? json(event)?.['delta'] : undefined),
  },
  {
    name: 'Anthropic Messages',
    path: '/v1/messages',
    body: { model: 'm', max_tokens: 1000, messages: [{ role: 'user', content: 'hi' }], stream: true },
    contentOf: (event) => (json(event)?.['type'] === 'content_block_delta' ? json(event)?.['delta']?.text : undefined),
  },
  {
    name: 'TGI',
    path: '/generate_stream',
    body: { inputs: 'hi' },
    contentOf: (event) => (json(event)?.['token']?.special === false ? json(event)?.['token']?.text : undefined),
  },
  {
    name: 'Ollama chat',
    path: '/api/chat',
    body: { model: 'm', messages: [{ role: 'user', content: 'hi' }] },
    contentOf: (event) => nonEmpty(json(event)?.['message']?.content),
  },
  {
    name: 'Ollama generate',
    path: '/api/generate',
    body: { model: 'm', prompt: 'hi' },
    contentOf: (event) => nonEmpty(json(event)?.['response']),
  },
  {
    name: 'llama.cpp',
    path: '/completion',
    body: { prompt: 'hi', stream: true },
    contentOf: (event) => nonEmpty(json(event)?.['content']),
  },
  {
    name: 'Triton',
    path: '/v2/models/m/generate_stream',
    body: { text_input: 'hi' },
    contentOf: (event) => nonEmpty(json(event)?.['text_output']),
  },
];

/** Events of a raw body: SSE blocks or NDJSON lines. */
function eventsOf(body: Buffer): string[] {
  const text = body.toString('utf8');
  return (text.includes('\n\n') ? text.split('\n\n') : text.split('\n')).filter((event) => event !== '');
}

/** Content events with their arrival time, from a timed stream (NDJSON lines arrive one per chunk). */
function timedContent(api: Api, events: readonly TimedEvent[]): { text: string; atMs: number }[] {
  return events.flatMap((event) =>
    event.data.split('\n').flatMap((part) => {
      const text = api.contentOf(part);
      return text === undefined ? [] : [{ text, atMs: event.atMs }];
    }),
  );
}

/** streamRequest splits on blank lines; NDJSON has none, so read Ollama's lines from the raw body instead. */
async function timedRequest(url: string, api: Api, headers: Record<string, string>): Promise<{ text: string; atMs: number }[]> {
  if (api.path.startsWith('/api/')) {
    const started = performance.now();
    const response = await fetch(`${url}${api.path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(api.body) });
    const reader = response.body?.getReader();
    const decoder = new TextDecoder();
    const out: { text: string; atMs: number }[] = [];
    let pending = '';
    for (let round = 0; reader !== undefined && round < 10_000; round++) {
      const { value, done } = await reader.read();
      if (done) break;
      pending += decoder.decode(value, { stream: true });
      const lines = pending.split('\n');
      pending = lines.pop() ?? '';
      for (const line of lines) {
        const text = api.contentOf(line);
        if (text !== undefined) out.push({ text, atMs: performance.now() - started });
      }
    }
    return out;
  }
  const result = await streamRequest(url, api.path, api.body, { headers });
  return timedContent(api, result.events).map((event) => ({ text: event.text, atMs: event.atMs - result.sentMs }));
}

describe.each(APIS)('$name honours the x-sim-* headers', (api) => {
  it('waits x-sim-ttft-ms for the first content and x-sim-itl-ms between chunks of x-sim-tokens-per-chunk tokens', async () => {
    const sim = await simulator();
    const content = await timedRequest(sim.url, api, {
      'x-sim-ttft-ms': '120',
      'x-sim-itl-ms': '40',
      'x-sim-output-tokens': '6',
      'x-sim-tokens-per-chunk': '2',
      'x-sim-seed': '1',
    });
    // TGI has one event per token, sent two to a write; every other API joins them into one event.
    expect(content).toHaveLength(api.name === 'TGI' ? 6 : 3);
    expect(content[0]?.atMs).toBeGreaterThanOrEqual(115);
    expect(content[0]?.atMs).toBeLessThan(2_000);
    // Chunk k is due at ttft + k × itl from the request: timers only ever fire late, and a late
    // chunk does not shift the later ones, so only the targets are certain, not the gaps.
    expect(content.at(-1)?.atMs).toBeGreaterThanOrEqual(195);
  });

  it('lets n tokens through, then resets the connection for reset:<n>', async () => {
    const sim = await simulator({ outputTokens: 10 });
    const res = await rawRequest(sim.port, 'POST', api.path, api.body, { 'x-sim-fault': 'reset:3' });
    expect(RESET_CODES).toContain(res.error?.code);
    expect(res.complete).toBe(false);
    expect(eventsOf(res.body).filter((event) => api.contentOf(event) !== undefined)).toHaveLength(3);
  });

  it('ends cleanly after n tokens without a terminal event for truncate:<n>', async () => {
    const sim = await simulator({ outputTokens: 10 });
    const full = await rawRequest(sim.port, 'POST', api.path, api.body, { 'x-sim-output-tokens': '2', 'x-sim-seed': '3' });
    const cut = await rawRequest(sim.port, 'POST', api.path, api.body, { 'x-sim-fault': 'truncate:2', 'x-sim-seed': '3' });
    expect(cut.error).toBeUndefined();
    expect(cut.complete).toBe(true);
    const cutEvents = eventsOf(cut.body);
    expect(cutEvents.filter((event) => api.contentOf(event) !== undefined)).toHaveLength(2);
    // The complete response has more events after its content (its terminal ones), except on
    // Triton, whose stream has no terminal event: there the cut stream is the whole stream.
    const fullEvents = eventsOf(full.body);
    if (api.name === 'Triton') expect(cutEvents).toEqual(fullEvents);
    else expect(cutEvents.length).toBeLessThan(fullEvents.length);
  });

  it('answers status:<code> at once with that status and a JSON error body', async () => {
    const sim = await simulator({ ttftMs: 5_000 });
    const res = await rawRequest(sim.port, 'POST', api.path, api.body, { 'x-sim-fault': 'status:429' });
    expect(res.status).toBe(429);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    expect(res.body.toString('utf8')).toContain('Simulated failure (x-sim-fault: status:429)');
  });

  it('stamps each content token with its send time, CLOCK_MONOTONIC nanoseconds, for x-sim-stamp: 1', async () => {
    const sim = await simulator({ outputTokens: 4, ttftMs: 20, itlMs: 30 });
    const before = process.hrtime.bigint();
    const res = await rawRequest(sim.port, 'POST', api.path, api.body, { 'x-sim-stamp': '1', 'x-sim-tokens-per-chunk': '2' });
    const after = process.hrtime.bigint();
    const texts = eventsOf(res.body).flatMap((event) => api.contentOf(event) ?? []);
    const stamps = texts.join('').split(' ').slice(0, -1).map(BigInt);
    expect(texts.join('')).toMatch(/^(\d+ ){4}$/);
    expect(stamps).toHaveLength(4);
    // Both tokens of a chunk carry the same stamp, taken no earlier than the chunk was due
    // (20 ms, then 50 ms, after the request) and before the response reached the client.
    expect(stamps[0]).toBe(stamps[1]);
    expect(stamps[2]).toBe(stamps[3]);
    expect((stamps[0] ?? 0n) - before).toBeGreaterThanOrEqual(20_000_000n);
    expect((stamps[2] ?? 0n) - before).toBeGreaterThanOrEqual(50_000_000n);
    for (const stamp of stamps) expect(stamp).toBeLessThan(after);
  });
});
