import { describe, expect, it } from 'vitest';
import { expectedTokens, rawRequest, simulator, sseBlocks } from './helpers.js';

const BODY = { model: 'resp-model', input: 'Hello there, simulator!' };
const INPUT_TOKENS = 6;

interface ResponseObject {
  id: string;
  created_at: number;
  status: string;
  incomplete_details: unknown;
  output: { id: string; status: string; content: { text: string }[] }[];
  usage: unknown;
}

function responseJson(id: string, createdAt: number, status: string, output: string, usage: string, extra = ''): string {
  return (
    `{"id":"${id}","object":"response","created_at":${createdAt},"status":"${status}","error":null,` +
    `"incomplete_details":${status === 'incomplete' ? '{"reason":"max_output_tokens"}' : 'null'},"instructions":null,${extra}` +
    `"model":"resp-model","output":${output},"parallel_tool_calls":true,"previous_response_id":null,` +
    `"reasoning":{"effort":null,"summary":null},"store":true,"temperature":1,"text":{"format":{"type":"text"}},` +
    `"tool_choice":"auto","tools":[],"top_p":1,"truncation":"disabled","usage":${usage},"user":null,"metadata":{}}`
  );
}

describe('OpenAI Responses stream (POST /v1/responses, stream: true)', () => {
  it('sends the documented typed events in order, numbered from 0, with usage on response.completed, byte for byte', async () => {
    const sim = await simulator({ outputTokens: 2 });
    const res = await rawRequest(sim.port, 'POST', '/v1/responses', { ...BODY, stream: true }, { 'x-sim-seed': '5' });
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('text/event-stream; charset=utf-8');
    expect(res.complete).toBe(true);
    const blocks = sseBlocks(res.body);
    const created = JSON.parse(blocks[0]?.data ?? '{}') as { response: ResponseObject };
    const { id, created_at: createdAt } = created.response;
    expect(id).toMatch(/^resp_[0-9a-f]{48}$/);
    const itemId = (JSON.parse(blocks[2]?.data ?? '{}') as { item: { id: string } }).item.id;
    expect(itemId).toMatch(/^msg_[0-9a-f]{48}$/);

    const [a, b] = expectedTokens(5, 2);
    const text = JSON.stringify(`${a}${b}`);
    const where = `"item_id":"${itemId}","output_index":0,"content_index":0`;
    const inProgress = responseJson(id, createdAt, 'in_progress', '[]', 'null', '"max_output_tokens":null,');
    const item = `{"id":"${itemId}","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":${text},"annotations":[]}]}`;
    const usage = `{"input_tokens":${INPUT_TOKENS},"input_tokens_details":{"cached_tokens":0},"output_tokens":2,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":${INPUT_TOKENS + 2}}`;
    const expected: [string, string][] = [
      ['response.created', `{"type":"response.created","response":${inProgress},"sequence_number":0}`],
      ['response.in_progress', `{"type":"response.in_progress","response":${inProgress},"sequence_number":1}`],
      ['response.output_item.added', `{"type":"response.output_item.added","output_index":0,"item":{"id":"${itemId}","type":"message","status":"in_progress","role":"assistant","content":[]},"sequence_number":2}`],
      ['response.content_part.added', `{"type":"response.content_part.added",${where},"part":{"type":"output_text","text":"","annotations":[]},"sequence_number":3}`],
      ['response.output_text.delta', `{"type":"response.output_text.delta",${where},"delta":${JSON.stringify(a)},"logprobs":[],"sequence_number":4}`],
      ['response.output_text.delta', `{"type":"response.output_text.delta",${where},"delta":${JSON.stringify(b)},"logprobs":[],"sequence_number":5}`],
      ['response.output_text.done', `{"type":"response.output_text.done",${where},"text":${text},"logprobs":[],"sequence_number":6}`],
      ['response.content_part.done', `{"type":"response.content_part.done",${where},"part":{"type":"output_text","text":${text},"annotations":[]},"sequence_number":7}`],
      ['response.output_item.done', `{"type":"response.output_item.done","output_index":0,"item":${item},"sequence_number":8}`],
      ['response.completed', `{"type":"response.completed","response":${responseJson(id, createdAt, 'completed', `[${item}]`, usage, '"max_output_tokens":null,')},"sequence_number":9}`],
    ];
    expect(res.body.toString('utf8')).toBe(expected.map(([event, data]) => `event: ${event}\ndata: ${data}\n\n`).join(''));
  });

  it('opens the output item only with the first token, so the prelude carries no content', async () => {
    const sim = await simulator({ outputTokens: 1, ttftMs: 150 });
    const res = await rawRequest(sim.port, 'POST', '/v1/responses', { ...BODY, stream: true });
    // The head and the two prelude events leave at once, the item with its first delta later.
    expect(res.chunks.slice(0, 2).map((chunk) => chunk.toString('utf8').split('\n', 1)[0])).toEqual([
      'event: response.created',
      'event: response.in_progress',
    ]);
    expect(res.chunks[2]?.toString('utf8')).toMatch(/^event: response\.output_item\.added\n/);
  });

  it('ends with response.incomplete (max_output_tokens) when max_output_tokens caps the output', async () => {
    const sim = await simulator({ outputTokens: 10 });
    const res = await rawRequest(sim.port, 'POST', '/v1/responses', { ...BODY, stream: true, max_output_tokens: 3 });
    const blocks = sseBlocks(res.body);
    expect(blocks.filter((block) => block.event === 'response.output_text.delta')).toHaveLength(3);
    const last = JSON.parse(blocks.at(-1)?.data ?? '{}') as { type: string; response: ResponseObject };
    expect(last.type).toBe('response.incomplete');
    expect(last.response.status).toBe('incomplete');
    expect(last.response.incomplete_details).toEqual({ reason: 'max_output_tokens' });
    expect(last.response.usage).toMatchObject({ output_tokens: 3 });
    expect(blocks.some((block) => block.event === 'response.completed')).toBe(false);
  });

  it('sends the error event for x-sim-fault error:<n>', async () => {
    const sim = await simulator({ outputTokens: 10 });
    const res = await rawRequest(sim.port, 'POST', '/v1/responses', { ...BODY, stream: true }, { 'x-sim-fault': 'error:1' });
    const last = sseBlocks(res.body).at(-1);
    expect(last?.event).toBe('error');
    expect(JSON.parse(last?.data ?? '{}')).toEqual({
      type: 'error',
      code: 'server_error',
      message: 'Simulated failure (x-sim-fault: error:1)',
      param: null,
      sequence_number: 5,
    });
  });
});

describe('OpenAI Responses, non-streaming', () => {
  it('answers with the completed Response object and its usage', async () => {
    const sim = await simulator({ outputTokens: 3 });
    const res = await rawRequest(sim.port, 'POST', '/v1/responses', BODY, { 'x-sim-seed': '8' });
    expect(res.headers['content-type']).toBe('application/json');
    const body = JSON.parse(res.body.toString('utf8')) as ResponseObject;
    expect(body.status).toBe('completed');
    expect(body.output[0]?.content[0]?.text).toBe(expectedTokens(8, 3).join(''));
    expect(body.usage).toEqual({
      input_tokens: INPUT_TOKENS,
      input_tokens_details: { cached_tokens: 0 },
      output_tokens: 3,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: INPUT_TOKENS + 3,
    });
  });

  it('refuses a request without input, naming the parameter', async () => {
    const sim = await simulator();
    const res = await rawRequest(sim.port, 'POST', '/v1/responses', { model: 'm' });
    expect(res.status).toBe(400);
    expect(JSON.parse(res.body.toString('utf8'))).toEqual({
      error: { message: "Missing required parameter: 'input'.", type: 'invalid_request_error', param: 'input', code: 400 },
    });
  });
});
