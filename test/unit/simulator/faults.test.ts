import { once } from 'node:events';
import { request } from 'node:http';
import { describe, expect, it } from 'vitest';
import type { RequestClosedEvent } from '../../../src/simulator/index.js';
import { CHAT_BODY, RESET_CODES, chunksOf, rawRequest, simulator, sseData, streamRequest } from './helpers.js';

const STREAM = { ...CHAT_BODY, stream: true };

function contentChunks(events: readonly string[]): string[] {
  return chunksOf(events)
    .map((chunk) => chunk.choices[0]?.delta?.content ?? '')
    .filter((text) => text !== '');
}

describe('fault status:<code>', () => {
  it('answers at once with that status and vLLM\'s error body, even for a stream', async () => {
    const sim = await simulator({ ttftMs: 5_000 });
    const closed = once(sim.events, 'request-closed') as Promise<[RequestClosedEvent]>;
    const started = performance.now();
    const res = await rawRequest(sim.port, 'POST', '/v1/chat/completions', STREAM, { 'x-sim-fault': 'status:503' });
    expect(performance.now() - started).toBeLessThan(2_000);
    expect(res.status).toBe(503);
    expect(res.headers['content-type']).toBe('application/json');
    expect(JSON.parse(res.body.toString('utf8'))).toEqual({
      error: { message: 'Simulated failure (x-sim-fault: status:503)', type: 'Service Unavailable', param: null, code: 503 },
    });
    const [event] = await closed;
    expect(event).toMatchObject({ path: '/v1/chat/completions', completed: false, end: 'error-status', tokensSent: 0 });
  });

  it('uses vLLM\'s serving-layer error type where vLLM has one', async () => {
    const sim = await simulator();
    const res = await rawRequest(sim.port, 'POST', '/v1/completions', { prompt: 'x' }, { 'x-sim-fault': 'status:500' });
    expect(res.status).toBe(500);
    expect(JSON.parse(res.body.toString('utf8'))).toMatchObject({ error: { type: 'InternalServerError', code: 500 } });
  });
});

describe('fault reset:<n>', () => {
  it('lets n tokens through, then resets the connection', async () => {
    const sim = await simulator({ outputTokens: 10 });
    const closed = once(sim.events, 'request-closed') as Promise<[RequestClosedEvent]>;
    const res = await rawRequest(sim.port, 'POST', '/v1/chat/completions', STREAM, { 'x-sim-fault': 'reset:3' });
    expect(RESET_CODES).toContain(res.error?.code);
    expect(res.complete).toBe(false);
    const events = sseData(res.body);
    expect(contentChunks(events)).toHaveLength(3);
    expect(events).not.toContain('[DONE]');
    const [event] = await closed;
    expect(event).toMatchObject({ completed: false, end: 'reset', tokensSent: 3 });
    expect(sim.stats()).toMatchObject({ clientAborts: 0, inFlight: 0 });
  });

  it('resets a non-streaming request before any response', async () => {
    const sim = await simulator({ outputTokens: 10 });
    const res = await rawRequest(sim.port, 'POST', '/v1/chat/completions', CHAT_BODY, { 'x-sim-fault': 'reset:2' });
    expect(res.error?.code).toBe('ECONNRESET');
    expect(res.head).toBe('');
  });

  it('never strikes when n exceeds the tokens generated', async () => {
    const sim = await simulator({ outputTokens: 3 });
    const res = await rawRequest(sim.port, 'POST', '/v1/chat/completions', STREAM, { 'x-sim-fault': 'reset:4' });
    expect(res.error).toBeUndefined();
    expect(res.complete).toBe(true);
    expect(sseData(res.body).at(-1)).toBe('[DONE]');
  });
});

describe('fault truncate:<n>', () => {
  it('ends the stream cleanly after n tokens, without finish chunk, usage or [DONE]', async () => {
    const sim = await simulator({ outputTokens: 10 });
    const closed = once(sim.events, 'request-closed') as Promise<[RequestClosedEvent]>;
    const res = await rawRequest(
      sim.port,
      'POST',
      '/v1/chat/completions',
      { ...STREAM, stream_options: { include_usage: true } },
      { 'x-sim-fault': 'truncate:4' },
    );
    expect(res.error).toBeUndefined();
    expect(res.complete).toBe(true);
    const events = sseData(res.body);
    expect(events).toHaveLength(5);
    expect(contentChunks(events)).toHaveLength(4);
    expect(chunksOf(events).every((chunk) => chunk.choices[0]?.finish_reason === null && chunk.usage === undefined)).toBe(true);
    const [event] = await closed;
    expect(event).toMatchObject({ completed: false, end: 'truncated', tokensSent: 4 });
  });

  it('drops the finish_reason of a length-capped generation cut at its last token', async () => {
    const sim = await simulator({ outputTokens: 10 });
    const res = await rawRequest(sim.port, 'POST', '/v1/completions', { prompt: 'x', stream: true, max_tokens: 3 }, {
      'x-sim-fault': 'truncate:3',
    });
    const chunks = chunksOf(sseData(res.body));
    expect(chunks).toHaveLength(3);
    expect(chunks.every((chunk) => chunk.choices[0]?.finish_reason === null)).toBe(true);
  });

  it('cuts a non-streaming body after the text of n tokens, in a complete HTTP response', async () => {
    const sim = await simulator({ outputTokens: 10 });
    const full = await rawRequest(sim.port, 'POST', '/v1/chat/completions', CHAT_BODY, { 'x-sim-seed': '6' });
    const fullContent = (JSON.parse(full.body.toString('utf8')) as { choices: { message: { content: string } }[] })
      .choices[0]?.message.content;
    const cut = await rawRequest(sim.port, 'POST', '/v1/chat/completions', CHAT_BODY, {
      'x-sim-seed': '6',
      'x-sim-fault': 'truncate:2',
    });
    expect(cut.status).toBe(200);
    expect(cut.complete).toBe(true);
    const text = cut.body.toString('utf8');
    expect(() => JSON.parse(text) as unknown).toThrow();
    const content = JSON.parse(`${text.slice(text.indexOf('"content":') + '"content":'.length)}"`) as string;
    expect(fullContent?.startsWith(content)).toBe(true);
    expect(content.length).toBeGreaterThan(0);
    expect(content.length).toBeLessThan(fullContent?.length ?? 0);
  });
});

describe('fault stall:<n>', () => {
  it('sends n tokens, then nothing until the client leaves, which is recorded at once', async () => {
    const sim = await simulator({ outputTokens: 50, itlMs: 2 });
    const closed = once(sim.events, 'request-closed') as Promise<[RequestClosedEvent]>;
    let leftAtMs = 0;
    const result = await streamRequest(sim.url, '/v1/chat/completions', STREAM, {
      headers: { 'x-sim-fault': 'stall:2' },
      onEvent: (events, leave) => {
        // Prelude and 2 tokens; the other 48 would be done within about 100 ms.
        if (events.length === 3) {
          setTimeout(() => {
            leftAtMs = performance.now();
            leave();
          }, 300);
        }
      },
    });
    expect(result.events).toHaveLength(3);
    const [event] = await closed;
    expect(event).toMatchObject({ completed: false, end: 'client-closed', tokensSent: 2 });
    expect(event.atMs - leftAtMs).toBeLessThan(1_000);
    expect(sim.stats()).toEqual({ requests: 1, clientAborts: 1, inFlight: 0 });
  });
});

describe('client going away', () => {
  it('stops generating at once and records completed=false', async () => {
    const sim = await simulator({ outputTokens: 1_000, itlMs: 2 });
    const ended: RequestClosedEvent[] = [];
    sim.events.on('request-closed', (event) => ended.push(event));
    let leftAtMs = 0;
    await streamRequest(sim.url, '/v1/completions', { prompt: 'x', stream: true }, {
      onEvent: (events, leave) => {
        if (events.length === 3) {
          leftAtMs = performance.now();
          leave();
        }
      },
    });
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(ended).toHaveLength(1);
    const [event] = ended;
    expect(event?.completed).toBe(false);
    expect(event?.end).toBe('client-closed');
    // A few chunks may be in flight when the client leaves, and more when a busy machine stalls
    // the event loop (overdue chunks then leave in a burst); 1000 would mean the timers ran on.
    expect(event?.tokensSent).toBeGreaterThanOrEqual(3);
    expect(event?.tokensSent).toBeLessThan(200);
    expect((event?.atMs ?? Infinity) - leftAtMs).toBeLessThan(1_000);
    expect(sim.stats()).toEqual({ requests: 1, clientAborts: 1, inFlight: 0 });
  });

  it('records a non-streaming request abandoned while waiting', async () => {
    const sim = await simulator({ ttftMs: 10_000 });
    const closed = once(sim.events, 'request-closed') as Promise<[RequestClosedEvent]>;
    const req = request(`${sim.url}/v1/chat/completions`, { method: 'POST', agent: false });
    req.on('error', () => undefined);
    req.end(JSON.stringify(CHAT_BODY));
    await new Promise((resolve) => setTimeout(resolve, 100));
    const leftAtMs = performance.now();
    req.destroy();
    const [event] = await closed;
    expect(event).toMatchObject({ completed: false, end: 'client-closed', tokensSent: 0 });
    expect(event.atMs - leftAtMs).toBeLessThan(1_000);
    expect(sim.stats()).toEqual({ requests: 1, clientAborts: 1, inFlight: 0 });
  });
});

describe('close()', () => {
  it('reports requests it cuts as server-closed, not as client aborts', async () => {
    const sim = await simulator({ ttftMs: 10_000 });
    const closed = once(sim.events, 'request-closed') as Promise<[RequestClosedEvent]>;
    const res = rawRequest(sim.port, 'POST', '/v1/chat/completions', CHAT_BODY);
    await new Promise((resolve) => setTimeout(resolve, 100));
    await sim.close();
    const [event] = await closed;
    expect(event).toMatchObject({ completed: false, end: 'server-closed', tokensSent: 0 });
    expect((await res).head).toBe('');
    expect(sim.stats()).toMatchObject({ clientAborts: 0, inFlight: 0 });
  });

  it('closes open streams and stops listening', async () => {
    const sim = await simulator({ outputTokens: 5 });
    const stream = streamRequest(sim.url, '/v1/chat/completions', STREAM, { headers: { 'x-sim-fault': 'stall:1' } });
    await new Promise((resolve) => setTimeout(resolve, 100));
    await sim.close();
    const result = await stream;
    expect(result.events).toHaveLength(2);
    const refused = await rawRequest(sim.port, 'GET', '/health');
    expect(refused.error?.code).toBe('ECONNREFUSED');
  });
});
