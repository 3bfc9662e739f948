import { describe, expect, it } from 'vitest';
import { expectedTokens, rawRequest, simulator, sseBlocks } from './helpers.js';

const BODY = { model: 'claude-test', max_tokens: 100, messages: [{ role: 'user', content: 'Hello there, simulator!' }] };
// 'Hello there, simulator!' is 23 UTF-8 bytes: ceil(23 / 4) = 6 input tokens.
const INPUT_TOKENS = 6;

describe('Anthropic Messages stream (POST /v1/messages, stream: true)', () => {
  it('sends message_start, content_block_start, ping, one text_delta per chunk, then block stop, message_delta and message_stop, byte for byte', async () => {
    const sim = await simulator({ outputTokens: 3 });
    const res = await rawRequest(sim.port, 'POST', '/v1/messages', { ...BODY, stream: true }, { 'x-sim-seed': '7' });
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('text/event-stream; charset=utf-8');
    expect(res.complete).toBe(true);

    const blocks = sseBlocks(res.body);
    const start = JSON.parse(blocks[0]?.data ?? '{}') as { message: { id: string } };
    const id = start.message.id;
    expect(id).toMatch(/^msg_01[0-9A-Za-z]{22}$/);
    const [a, b, c] = expectedTokens(7, 3).map((token) => JSON.stringify(token));
    const delta = (text: string | undefined): string =>
      `event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":${text}}}\n\n`;
    expect(res.body.toString('utf8')).toBe(
      `event: message_start\ndata: {"type":"message_start","message":{"id":"${id}","type":"message","role":"assistant","model":"claude-test","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":${INPUT_TOKENS},"output_tokens":1}}}\n\n` +
        'event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\n\n' +
        'event: ping\ndata: {"type":"ping"}\n\n' +
        delta(a) +
        delta(b) +
        delta(c) +
        'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n' +
        'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":3}}\n\n' +
        'event: message_stop\ndata: {"type":"message_stop"}\n\n',
    );
    // Every payload names its own event, and every event is its own HTTP chunk.
    for (const block of blocks) expect((JSON.parse(block.data ?? '{}') as { type: string }).type).toBe(block.event);
    expect(res.chunks).toHaveLength(blocks.length);
  });

  it('ends with stop_reason max_tokens right after the last delta when max_tokens caps the output', async () => {
    const sim = await simulator({ outputTokens: 10 });
    const res = await rawRequest(sim.port, 'POST', '/v1/messages', { ...BODY, max_tokens: 2, stream: true }, { 'x-sim-seed': '3' });
    const blocks = sseBlocks(res.body);
    expect(blocks.map((block) => block.event)).toEqual([
      'message_start',
      'content_block_start',
      'ping',
      'content_block_delta',
      'content_block_delta',
      'content_block_stop',
      'message_delta',
      'message_stop',
    ]);
    expect(JSON.parse(blocks[6]?.data ?? '{}')).toEqual({
      type: 'message_delta',
      delta: { stop_reason: 'max_tokens', stop_sequence: null },
      usage: { output_tokens: 2 },
    });
  });

  it('sends joined text per delta with x-sim-tokens-per-chunk and still reports every token in usage', async () => {
    const sim = await simulator({ outputTokens: 5 });
    const res = await rawRequest(sim.port, 'POST', '/v1/messages', { ...BODY, stream: true }, {
      'x-sim-seed': '4',
      'x-sim-tokens-per-chunk': '2',
    });
    const blocks = sseBlocks(res.body);
    const deltas = blocks
      .filter((block) => block.event === 'content_block_delta')
      .map((block) => (JSON.parse(block.data ?? '{}') as { delta: { text: string } }).delta.text);
    const tokens = expectedTokens(4, 5);
    expect(deltas).toEqual([tokens.slice(0, 2).join(''), tokens.slice(2, 4).join(''), tokens[4]]);
    const messageDelta = blocks.find((block) => block.event === 'message_delta');
    expect(JSON.parse(messageDelta?.data ?? '{}')).toMatchObject({ usage: { output_tokens: 5 } });
  });

  it('sends an Anthropic error event after n tokens for x-sim-fault error:<n>, and no message_stop', async () => {
    const sim = await simulator({ outputTokens: 10 });
    const res = await rawRequest(sim.port, 'POST', '/v1/messages', { ...BODY, stream: true }, { 'x-sim-fault': 'error:2' });
    expect(res.complete).toBe(true);
    const blocks = sseBlocks(res.body);
    expect(blocks.filter((block) => block.event === 'content_block_delta')).toHaveLength(2);
    expect(blocks.at(-1)).toEqual({
      event: 'error',
      data: '{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}',
      comment: undefined,
    });
    expect(blocks.some((block) => block.event === 'message_stop')).toBe(false);
  });
});

describe('Anthropic Messages, non-streaming and errors', () => {
  it('answers with the Message object and its usage', async () => {
    const sim = await simulator({ outputTokens: 4 });
    const res = await rawRequest(sim.port, 'POST', '/v1/messages', BODY, { 'x-sim-seed': '9' });
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('application/json');
    const { id } = JSON.parse(res.body.toString('utf8')) as { id: string };
    expect(res.body.toString('utf8')).toBe(
      `{"id":"${id}","type":"message","role":"assistant","model":"claude-test","content":[{"type":"text","text":${JSON.stringify(expectedTokens(9, 4).join(''))}}],` +
        `"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":${INPUT_TOKENS},"output_tokens":4}}`,
    );
  });

  it('answers a status fault with the Anthropic error body and the type for that status', async () => {
    const sim = await simulator();
    const res = await rawRequest(sim.port, 'POST', '/v1/messages', { ...BODY, stream: true }, { 'x-sim-fault': 'status:529' });
    expect(res.status).toBe(529);
    const body = JSON.parse(res.body.toString('utf8')) as Record<string, unknown>;
    expect(Object.keys(body)).toEqual(['type', 'error', 'request_id']);
    expect(body).toMatchObject({ type: 'error', error: { type: 'overloaded_error', message: 'Simulated failure (x-sim-fault: status:529)' } });
    expect(body['request_id']).toMatch(/^req_01[0-9A-Za-z]{22}$/);
  });

  it('rejects a request without max_tokens as invalid_request_error', async () => {
    const sim = await simulator();
    const res = await rawRequest(sim.port, 'POST', '/v1/messages', { model: 'm', messages: [] });
    expect(res.status).toBe(400);
    expect(JSON.parse(res.body.toString('utf8'))).toMatchObject({
      type: 'error',
      error: { type: 'invalid_request_error', message: 'max_tokens: Field required' },
    });
  });
});
