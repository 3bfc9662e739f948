import { Agent, request } from 'node:http';
import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { VOCABULARY } from '../../../src/simulator/vocabulary.js';
import { CHAT_BODY, chunksOf, contentOf, rawRequest, simulator, sseData } from './helpers.js';

const STREAM = { ...CHAT_BODY, stream: true };

async function chatStream(
  port: number,
  body: Record<string, unknown>,
  headers: Record<string, string> = {},
): Promise<{ events: string[]; chunks: ReturnType<typeof chunksOf> }> {
  const res = await rawRequest(port, 'POST', '/v1/chat/completions', body, headers);
  expect(res.status).toBe(200);
  const events = sseData(res.body);
  return { events, chunks: chunksOf(events) };
}

describe('usage chunk', () => {
  it('is absent unless the request asks for it (usage: auto)', async () => {
    const sim = await simulator({ outputTokens: 3 });
    const { events, chunks } = await chatStream(sim.port, STREAM);
    expect(chunks.some((chunk) => chunk.choices.length === 0 || 'usage' in chunk)).toBe(false);
    expect(events.at(-1)).toBe('[DONE]');
  });

  it('is sent for stream_options: {} because vLLM defaults include_usage to true', async () => {
    const sim = await simulator({ outputTokens: 3 });
    const { chunks } = await chatStream(sim.port, { ...STREAM, stream_options: {} });
    expect(chunks.at(-1)?.usage?.completion_tokens).toBe(3);
  });

  it('is not sent for include_usage: false, nor for include_usage: null', async () => {
    const sim = await simulator({ outputTokens: 3 });
    for (const include_usage of [false, null]) {
      const { chunks } = await chatStream(sim.port, { ...STREAM, stream_options: { include_usage } });
      expect(chunks.some((chunk) => chunk.usage !== undefined), String(include_usage)).toBe(false);
    }
  });

  it('is always sent with usage "always" and never with "never", whatever the request says', async () => {
    const always = await simulator({ outputTokens: 2, usage: 'always' });
    const never = await simulator({ outputTokens: 2, usage: 'never' });
    expect((await chatStream(always.port, STREAM)).chunks.at(-1)?.usage?.completion_tokens).toBe(2);
    const asked = { ...STREAM, stream_options: { include_usage: true } };
    expect((await chatStream(never.port, asked)).chunks.some((chunk) => chunk.usage !== undefined)).toBe(false);
  });

  it('counts exactly the tokens sent, for chat and completions', async () => {
    const sim = await simulator({ outputTokens: 17, tokensPerChunk: 4 });
    const chat = await chatStream(sim.port, { ...STREAM, stream_options: { include_usage: true } });
    const chatTokens = chat.chunks.filter((chunk) => (chunk.choices[0]?.delta?.content ?? '') !== '');
    expect(chat.chunks.at(-1)?.usage?.completion_tokens).toBe(17);
    expect(chatTokens).toHaveLength(5);

    const res = await rawRequest(sim.port, 'POST', '/v1/completions', {
      prompt: 'p',
      stream: true,
      max_tokens: 9,
      stream_options: { include_usage: true },
    });
    const completion = chunksOf(sseData(res.body));
    expect(completion.at(-1)?.usage?.completion_tokens).toBe(9);
    expect(completion.filter((chunk) => (chunk.choices[0]?.text ?? '') !== '')).toHaveLength(3);
  });
});

describe('length and finish_reason', () => {
  it('uses "length" iff max_tokens <= outputTokens, "stop" otherwise', async () => {
    const sim = await simulator({ outputTokens: 3 });
    const finishOf = async (max_tokens?: number) => {
      const { chunks } = await chatStream(sim.port, { ...STREAM, ...(max_tokens === undefined ? {} : { max_tokens }) });
      const content = chunks.map((chunk) => chunk.choices[0]?.delta?.content ?? '').filter((text) => text !== '');
      return { finish: chunks.at(-1)?.choices[0]?.finish_reason, tokens: content.length };
    };
    expect(await finishOf()).toEqual({ finish: 'stop', tokens: 3 });
    expect(await finishOf(5)).toEqual({ finish: 'stop', tokens: 3 });
    expect(await finishOf(3)).toEqual({ finish: 'length', tokens: 3 });
    expect(await finishOf(2)).toEqual({ finish: 'length', tokens: 2 });
  });

  it('prefers max_completion_tokens over max_tokens for chat', async () => {
    const sim = await simulator({ outputTokens: 10 });
    const { chunks } = await chatStream(sim.port, { ...STREAM, max_tokens: 8, max_completion_tokens: 2 });
    expect(chunks.filter((chunk) => chunk.choices[0]?.delta?.content).length).toBe(2);
  });

  it('echoes the request model and falls back to the configured one', async () => {
    const sim = await simulator({ outputTokens: 1, model: 'served' });
    expect((await chatStream(sim.port, { ...STREAM, model: 'asked' })).chunks[0]?.model).toBe('asked');
    const { model: _unused, ...withoutModel } = STREAM;
    expect((await chatStream(sim.port, withoutModel)).chunks[0]?.model).toBe('served');
  });
});

describe('chunking', () => {
  it('joins tokensPerChunk tokens into one delta, the last chunk holding the rest', async () => {
    const sim = await simulator({ outputTokens: 7 });
    const one = await chatStream(sim.port, STREAM, { 'x-sim-seed': '4' });
    const three = await chatStream(sim.port, STREAM, { 'x-sim-seed': '4', 'x-sim-tokens-per-chunk': '3' });
    const deltas = (chunks: ReturnType<typeof chunksOf>) =>
      chunks.map((chunk) => chunk.choices[0]?.delta?.content).filter((text) => text !== undefined && text !== '');
    const tokens = deltas(one.chunks) as string[];
    expect(tokens).toHaveLength(7);
    expect(deltas(three.chunks)).toEqual([tokens.slice(0, 3).join(''), tokens.slice(3, 6).join(''), tokens[6]]);
  });

  it('omits the role prelude when rolePrelude is off', async () => {
    const sim = await simulator({ outputTokens: 2, rolePrelude: false });
    const { chunks } = await chatStream(sim.port, STREAM);
    expect(chunks[0]?.choices[0]?.delta).not.toHaveProperty('role');
    expect(chunks[0]?.choices[0]?.delta?.content).not.toBe('');
    const withHeader = await chatStream(sim.port, STREAM, { 'x-sim-role-prelude': 'true' });
    expect(withHeader.chunks[0]?.choices[0]?.delta).toEqual({ role: 'assistant', content: '' });
  });

  it('writes each SSE event as its own HTTP chunk', async () => {
    const sim = await simulator({ outputTokens: 40, tokensPerChunk: 2 });
    const res = await rawRequest(sim.port, 'POST', '/v1/chat/completions', {
      ...STREAM,
      stream_options: { include_usage: true },
    });
    // prelude + 20 content chunks + stop chunk + usage chunk + [DONE]
    expect(res.chunks).toHaveLength(24);
    for (const chunk of res.chunks) {
      const text = chunk.toString('utf8');
      expect(text).toMatch(/^data: [^\n]+\n\n$/);
      expect(Buffer.from(text, 'utf8').equals(chunk)).toBe(true);
    }
  });
});

describe('content', () => {
  it('is reproducible for a given x-sim-seed and differs across seeds', async () => {
    const sim = await simulator({ outputTokens: 30 });
    const text = async (seed: string) => contentOf((await chatStream(sim.port, STREAM, { 'x-sim-seed': seed })).chunks);
    const first = await text('1234');
    expect(await text('1234')).toBe(first);
    expect(await text('1235')).not.toBe(first);
  });

  it('is the same for streaming and non-streaming, and a shorter max_tokens gives a prefix', async () => {
    const sim = await simulator({ outputTokens: 12 });
    const streamed = contentOf((await chatStream(sim.port, STREAM, { 'x-sim-seed': '77' })).chunks);
    const json = await rawRequest(sim.port, 'POST', '/v1/chat/completions', CHAT_BODY, { 'x-sim-seed': '77' });
    const message = (JSON.parse(json.body.toString('utf8')) as { choices: { message: { content: string } }[] }).choices[0];
    expect(message?.message.content).toBe(streamed);
    const shorter = contentOf((await chatStream(sim.port, { ...STREAM, max_tokens: 5 }, { 'x-sim-seed': '77' })).chunks);
    expect(streamed.startsWith(shorter)).toBe(true);
    expect(shorter.length).toBeLessThan(streamed.length);
  });

  it('draws from a vocabulary of non-empty tokens that includes multi-byte UTF-8', async () => {
    expect(VOCABULARY.every((token) => token.length > 0)).toBe(true);
    expect(VOCABULARY.filter((token) => Buffer.byteLength(token) > token.length).length).toBeGreaterThanOrEqual(3);
    expect(VOCABULARY.some((token) => /\p{Extended_Pictographic}/u.test(token))).toBe(true);

    const sim = await simulator({ outputTokens: 300, itlMs: 0 });
    const { chunks } = await chatStream(sim.port, STREAM, { 'x-sim-seed': '1' });
    const deltas = chunks.map((chunk) => chunk.choices[0]?.delta?.content ?? '').filter((text) => text !== '');
    expect(deltas).toHaveLength(300);
    expect(deltas.every((token) => VOCABULARY.includes(token))).toBe(true);
    expect(deltas.some((token) => Buffer.byteLength(token) > token.length)).toBe(true);
  });

  it('does not depend on the timing settings', async () => {
    const sim = await simulator({ outputTokens: 20, jitterMs: 2 });
    const { chunks } = await chatStream(sim.port, STREAM, { 'x-sim-seed': '8', 'x-sim-itl-ms': '2' });
    const plain = await chatStream(sim.port, STREAM, { 'x-sim-seed': '8', 'x-sim-jitter-ms': '0' });
    expect(contentOf(chunks)).toBe(contentOf(plain.chunks));
  });
});

describe('connections', () => {
  it('keeps the connection alive across requests', async () => {
    const sim = await simulator({ outputTokens: 2 });
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const send = () =>
      new Promise<{ reused: boolean; body: string }>((resolve, reject) => {
        const req = request(`${sim.url}/v1/chat/completions`, {
          method: 'POST',
          agent,
          headers: { 'content-type': 'application/json' },
        });
        req.on('response', (res) => {
          let body = '';
          res.setEncoding('utf8');
          res.on('data', (data: string) => (body += data));
          res.on('end', () => resolve({ reused: req.reusedSocket, body }));
        });
        req.on('error', reject);
        req.end(JSON.stringify(STREAM));
      });
    const first = await send();
    const second = await send();
    agent.destroy();
    expect(first.reused).toBe(false);
    expect(second.reused).toBe(true);
    expect(second.body.endsWith('data: [DONE]\n\n')).toBe(true);
  });

  it('reports the real port when started on port 0', async () => {
    const sim = await simulator();
    expect(sim.port).toBeGreaterThan(0);
    expect(sim.url).toBe(`http://127.0.0.1:${sim.port}`);
  });

  it('counts requests and ends with nothing in flight', async () => {
    const sim = await simulator({ outputTokens: 2 });
    const closed: boolean[] = [];
    sim.events.on('request-closed', (event) => closed.push(event.completed));
    await chatStream(sim.port, STREAM);
    await rawRequest(sim.port, 'POST', '/v1/completions', { prompt: 'x' });
    expect(sim.stats()).toEqual({ requests: 2, clientAborts: 0, inFlight: 0 });
    expect(closed).toEqual([true, true]);
  });
});

describe('official OpenAI client', () => {
  it('streams chat with usage, and reads non-streaming chat and completions', async () => {
    const sim = await simulator({ outputTokens: 6 });
    const client = new OpenAI({ baseURL: `${sim.url}/v1`, apiKey: 'unused', maxRetries: 0 });
    const stream = await client.chat.completions.create({
      model: 'm',
      messages: [{ role: 'user', content: 'hi' }],
      stream: true,
      stream_options: { include_usage: true },
    });
    let content = '';
    let completionTokens = 0;
    for await (const chunk of stream) {
      content += chunk.choices[0]?.delta.content ?? '';
      completionTokens = chunk.usage?.completion_tokens ?? completionTokens;
    }
    expect(content.length).toBeGreaterThan(0);
    expect(completionTokens).toBe(6);

    const chat = await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }] });
    expect(chat.choices[0]?.finish_reason).toBe('stop');
    expect(chat.usage?.completion_tokens).toBe(6);
    const completion = await client.completions.create({ model: 'm', prompt: 'hi', max_tokens: 4 });
    expect(completion.choices[0]?.finish_reason).toBe('length');
    expect(completion.usage?.completion_tokens).toBe(4);
  });
});
