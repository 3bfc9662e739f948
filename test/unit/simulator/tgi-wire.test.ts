import { describe, expect, it } from 'vitest';
import { VOCABULARY } from '../../../src/simulator/vocabulary.js';
import { expectedTokens, rawRequest, simulator, sseBlocks, streamRequest } from './helpers.js';

const BODY = { inputs: 'Hello there, simulator!' };
const INPUT_TOKENS = 6;

interface StreamEvent {
  index: number;
  token: { id: number; text: string; logprob: number; special: boolean };
  generated_text: string | null;
  details: Record<string, unknown> | null;
}

describe('TGI /generate_stream', () => {
  it('sends one data: event per token (no space after the colon), the EOS special token last with generated_text and details', async () => {
    const sim = await simulator({ outputTokens: 3 });
    const res = await rawRequest(sim.port, 'POST', '/generate_stream', { ...BODY, parameters: { details: true } }, { 'x-sim-seed': '7' });
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('text/event-stream');
    expect(res.complete).toBe(true);
    const tokens = expectedTokens(7, 3);
    const token = (text: string): string => {
      const index = VOCABULARY.indexOf(text);
      return `{"id":${1000 + index},"text":${JSON.stringify(text)},"logprob":${-((index % 8) + 1) / 16},"special":false}`;
    };
    expect(res.body.toString('utf8')).toBe(
      tokens.map((text, k) => `data:{"index":${k + 1},"token":${token(text)},"generated_text":null,"details":null}\n\n`).join('') +
        `data:{"index":4,"token":{"id":2,"text":"</s>","logprob":-0.0078125,"special":true},"generated_text":${JSON.stringify(tokens.join(''))},` +
        `"details":{"finish_reason":"eos_token","generated_tokens":4,"seed":null,"input_length":${INPUT_TOKENS}}}\n\n`,
    );
  });

  it('ends on the last ordinary token with finish_reason length at max_new_tokens, and sends no details unless asked', async () => {
    const sim = await simulator({ outputTokens: 10 });
    const asked = await rawRequest(sim.port, 'POST', '/generate_stream', { ...BODY, parameters: { max_new_tokens: 2, details: true } });
    const events = sseBlocks(asked.body).map((block) => JSON.parse(block.data ?? '{}') as StreamEvent);
    expect(events).toHaveLength(2);
    expect(events.every((event) => !event.token.special)).toBe(true);
    expect(events[1]?.details).toEqual({ finish_reason: 'length', generated_tokens: 2, seed: null, input_length: INPUT_TOKENS });
    expect(events[1]?.generated_text).toBe(events.map((event) => event.token.text).join(''));

    const plain = await rawRequest(sim.port, 'POST', '/generate_stream', { ...BODY, parameters: { max_new_tokens: 2 } });
    const last = JSON.parse(sseBlocks(plain.body).at(-1)?.data ?? '{}') as StreamEvent;
    expect(last.details).toBeNull();
    expect(typeof last.generated_text).toBe('string');
  });

  it('sends ":" keep-alive comments while idle (x-sim-keep-alive-ms), never in place of a token', async () => {
    const sim = await simulator({ outputTokens: 2, ttftMs: 200, itlMs: 1 });
    const res = await rawRequest(sim.port, 'POST', '/generate_stream', BODY, { 'x-sim-keep-alive-ms': '40' });
    const blocks = sseBlocks(res.body);
    const comments = blocks.filter((block) => block.comment !== undefined);
    // 200 ms idle at 40 ms: about 4; a loaded machine fires fewer, never none.
    expect(comments.length).toBeGreaterThanOrEqual(1);
    expect(comments.length).toBeLessThanOrEqual(5);
    for (const comment of comments) expect(comment).toEqual({ event: undefined, data: undefined, comment: '' });
    expect(res.body.toString('utf8').startsWith(':\n\n')).toBe(true);
    expect(blocks.filter((block) => block.data !== undefined)).toHaveLength(3);
  });

  it('keeps sending keep-alives through a stall, until the client leaves', async () => {
    const sim = await simulator({ outputTokens: 5, ttftMs: 1, itlMs: 1 });
    const result = await streamRequest(sim.url, '/generate_stream', BODY, {
      headers: { 'x-sim-keep-alive-ms': '20', 'x-sim-fault': 'stall:1' },
      onEvent: (events, leave) => {
        if (events.filter((event) => event.data === ':').length >= 3) leave();
      },
    });
    const kinds = result.events.map((event) => (event.data === ':' ? 'keep-alive' : 'token'));
    expect(kinds).toEqual(['token', 'keep-alive', 'keep-alive', 'keep-alive']);
  });

  it('sends TGI\'s error event for x-sim-fault error:<n>', async () => {
    const sim = await simulator({ outputTokens: 5 });
    const res = await rawRequest(sim.port, 'POST', '/generate_stream', BODY, { 'x-sim-fault': 'error:1' });
    expect(sseBlocks(res.body).at(-1)?.data).toBe('{"error":"Simulated failure (x-sim-fault: error:1)","error_type":"generation"}');
  });
});

describe('TGI /generate', () => {
  it('answers {"generated_text"} and adds details with every token when asked', async () => {
    const sim = await simulator({ outputTokens: 2 });
    const plain = await rawRequest(sim.port, 'POST', '/generate', BODY, { 'x-sim-seed': '2' });
    expect(plain.headers['content-type']).toBe('application/json');
    const text = expectedTokens(2, 2).join('');
    expect(plain.body.toString('utf8')).toBe(`{"generated_text":${JSON.stringify(text)}}`);
    const detailed = await rawRequest(sim.port, 'POST', '/generate', { ...BODY, parameters: { details: true } }, { 'x-sim-seed': '2' });
    const body = JSON.parse(detailed.body.toString('utf8')) as { details: { finish_reason: string; generated_tokens: number; tokens: { special: boolean }[] } };
    expect(body.details.finish_reason).toBe('eos_token');
    expect(body.details.generated_tokens).toBe(3);
    expect(body.details.tokens.map((token) => token.special)).toEqual([false, false, true]);
  });

  it('refuses a body without inputs with 422 and TGI\'s error shape', async () => {
    const sim = await simulator();
    const res = await rawRequest(sim.port, 'POST', '/generate', { prompt: 'x' });
    expect(res.status).toBe(422);
    expect(JSON.parse(res.body.toString('utf8'))).toMatchObject({ error_type: 'validation' });
  });
});
