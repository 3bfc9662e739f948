import { describe, expect, it } from 'vitest';
import { createRandom, pickTokens } from '../../../src/simulator/vocabulary.js';
import { CHAT_BODY, rawRequest, simulator, sseData } from './helpers.js';

/** The tokens the simulator generates for a seed: content is a pure function of it. */
function expectedTokens(seed: number, count: number): string[] {
  return pickTokens(count, createRandom(seed));
}

const nowSeconds = (): number => Math.floor(Date.now() / 1000);

// 'Hello there, simulator!' is 23 UTF-8 bytes: ceil(23 / 4) = 6 prompt tokens.
const PROMPT_TOKENS = 6;

describe('chat completions stream: vLLM 0.11 bytes', () => {
  it('sends the role prelude, one chunk per token, the stop chunk, the usage chunk and [DONE], byte for byte', async () => {
    const sim = await simulator({ outputTokens: 3 });
    const res = await rawRequest(
      sim.port,
      'POST',
      '/v1/chat/completions',
      { ...CHAT_BODY, stream: true, stream_options: { include_usage: true } },
      { 'x-sim-seed': '7' },
    );

    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('text/event-stream; charset=utf-8');
    expect(res.headers['transfer-encoding']).toBe('chunked');
    expect(res.complete).toBe(true);

    const first = JSON.parse(sseData(res.body)[0] ?? '{}') as { id: string; created: number };
    expect(first.id).toMatch(/^chatcmpl-[0-9a-f]{32}$/);
    expect(Math.abs(first.created - nowSeconds())).toBeLessThanOrEqual(5);
    const head = `{"id":"${first.id}","object":"chat.completion.chunk","created":${first.created},"model":"test-model"`;
    const [a, b, c] = expectedTokens(7, 3).map((token) => JSON.stringify(token));
    const expected = [
      `${head},"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"prompt_token_ids":null}`,
      `${head},"choices":[{"index":0,"delta":{"content":${a}},"logprobs":null,"finish_reason":null,"token_ids":null}]}`,
      `${head},"choices":[{"index":0,"delta":{"content":${b}},"logprobs":null,"finish_reason":null,"token_ids":null}]}`,
      `${head},"choices":[{"index":0,"delta":{"content":${c}},"logprobs":null,"finish_reason":null,"token_ids":null}]}`,
      `${head},"choices":[{"index":0,"delta":{"content":""},"logprobs":null,"finish_reason":"stop","stop_reason":null,"token_ids":null}]}`,
      `${head},"choices":[],"usage":{"prompt_tokens":${PROMPT_TOKENS},"total_tokens":${PROMPT_TOKENS + 3},"completion_tokens":3}}`,
      '[DONE]',
    ];
    expect(res.body.toString('utf8')).toBe(expected.map((data) => `data: ${data}\n\n`).join(''));
  });

  it('puts finish_reason "length" on the last content chunk when max_tokens caps the generation', async () => {
    const sim = await simulator({ outputTokens: 10 });
    const res = await rawRequest(
      sim.port,
      'POST',
      '/v1/chat/completions',
      { ...CHAT_BODY, stream: true, max_tokens: 2 },
      { 'x-sim-seed': '3' },
    );
    const events = sseData(res.body);
    const { id, created } = JSON.parse(events[0] ?? '{}') as { id: string; created: number };
    const head = `{"id":"${id}","object":"chat.completion.chunk","created":${created},"model":"test-model"`;
    const [a, b] = expectedTokens(3, 2).map((token) => JSON.stringify(token));
    expect(events.slice(1)).toEqual([
      `${head},"choices":[{"index":0,"delta":{"content":${a}},"logprobs":null,"finish_reason":null,"token_ids":null}]}`,
      `${head},"choices":[{"index":0,"delta":{"content":${b}},"logprobs":null,"finish_reason":"length","stop_reason":null,"token_ids":null}]}`,
      '[DONE]',
    ]);
  });

  it('adds cumulative usage to every chunk with stream_options.continuous_usage_stats', async () => {
    const sim = await simulator({ outputTokens: 2 });
    const res = await rawRequest(
      sim.port,
      'POST',
      '/v1/chat/completions',
      { ...CHAT_BODY, stream: true, stream_options: { include_usage: true, continuous_usage_stats: true } },
      { 'x-sim-seed': '5' },
    );
    const events = sseData(res.body);
    const { id, created } = JSON.parse(events[0] ?? '{}') as { id: string; created: number };
    const head = `{"id":"${id}","object":"chat.completion.chunk","created":${created},"model":"test-model"`;
    const usage = (n: number): string =>
      `"usage":{"prompt_tokens":${PROMPT_TOKENS},"total_tokens":${PROMPT_TOKENS + n},"completion_tokens":${n}}`;
    const [a, b] = expectedTokens(5, 2).map((token) => JSON.stringify(token));
    expect(events).toEqual([
      `${head},"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],${usage(0)},"prompt_token_ids":null}`,
      `${head},"choices":[{"index":0,"delta":{"content":${a}},"logprobs":null,"finish_reason":null,"token_ids":null}],${usage(1)}}`,
      `${head},"choices":[{"index":0,"delta":{"content":${b}},"logprobs":null,"finish_reason":null,"token_ids":null}],${usage(2)}}`,
      `${head},"choices":[{"index":0,"delta":{"content":""},"logprobs":null,"finish_reason":"stop","stop_reason":null,"token_ids":null}],${usage(2)}}`,
      `${head},"choices":[],${usage(2)}}`,
      '[DONE]',
    ]);
  });
});

describe('completions stream: vLLM 0.11 bytes', () => {
  it('sends text chunks with every field (usage null), no prelude, then the usage chunk and [DONE]', async () => {
    const sim = await simulator({ outputTokens: 2 });
    const res = await rawRequest(
      sim.port,
      'POST',
      '/v1/completions',
      { model: 'm', prompt: 'Once upon a time', stream: true, stream_options: { include_usage: true } },
      { 'x-sim-seed': '11' },
    );
    expect(res.headers['content-type']).toBe('text/event-stream; charset=utf-8');
    const events = sseData(res.body);
    const { id, created } = JSON.parse(events[0] ?? '{}') as { id: string; created: number };
    expect(id).toMatch(/^cmpl-[0-9a-f]{32}$/);
    const head = `{"id":"${id}","object":"text_completion","created":${created},"model":"m"`;
    const [a, b] = expectedTokens(11, 2).map((token) => JSON.stringify(token));
    const choice = (text: string, finish: string): string =>
      `"choices":[{"index":0,"text":${text},"logprobs":null,"finish_reason":${finish},"stop_reason":null,"prompt_token_ids":null,"token_ids":null}]`;
    // 'Once upon a time' is 16 bytes: 4 prompt tokens.
    expect(events).toEqual([
      `${head},${choice(a ?? '', 'null')},"usage":null}`,
      `${head},${choice(b ?? '', 'null')},"usage":null}`,
      `${head},${choice('""', '"stop"')},"usage":null}`,
      `${head},"choices":[],"usage":{"prompt_tokens":4,"total_tokens":6,"completion_tokens":2}}`,
      '[DONE]',
    ]);
  });
});

describe('non-streaming responses: vLLM 0.11 bytes', () => {
  it('answers a chat completion with the full ChatCompletionResponse and usage', async () => {
    const sim = await simulator({ outputTokens: 4 });
    const res = await rawRequest(sim.port, 'POST', '/v1/chat/completions', CHAT_BODY, { 'x-sim-seed': '9' });
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('application/json');
    expect(Number(res.headers['content-length'])).toBe(res.body.length);
    const { id, created } = JSON.parse(res.body.toString('utf8')) as { id: string; created: number };
    expect(id).toMatch(/^chatcmpl-[0-9a-f]{32}$/);
    const content = JSON.stringify(expectedTokens(9, 4).join(''));
    expect(res.body.toString('utf8')).toBe(
      `{"id":"${id}","object":"chat.completion","created":${created},"model":"test-model","choices":[{"index":0,` +
        `"message":{"role":"assistant","content":${content},"refusal":null,"annotations":null,"audio":null,"function_call":null,"tool_calls":[],"reasoning_content":null},` +
        `"logprobs":null,"finish_reason":"stop","stop_reason":null,"token_ids":null}],"service_tier":null,"system_fingerprint":null,` +
        `"usage":{"prompt_tokens":${PROMPT_TOKENS},"total_tokens":${PROMPT_TOKENS + 4},"completion_tokens":4,"prompt_tokens_details":null},` +
        `"prompt_logprobs":null,"prompt_token_ids":null,"kv_transfer_params":null}`,
    );
  });

  it('answers a completion with the full CompletionResponse, finish_reason length at max_tokens', async () => {
    const sim = await simulator({ outputTokens: 8 });
    const res = await rawRequest(sim.port, 'POST', '/v1/completions', { prompt: 'abcd', max_tokens: 3 }, { 'x-sim-seed': '2' });
    const { id, created } = JSON.parse(res.body.toString('utf8')) as { id: string; created: number };
    const text = JSON.stringify(expectedTokens(2, 3).join(''));
    expect(res.body.toString('utf8')).toBe(
      `{"id":"${id}","object":"text_completion","created":${created},"model":"sim-model","choices":[{"index":0,"text":${text},` +
        `"logprobs":null,"finish_reason":"length","stop_reason":null,"token_ids":null,"prompt_logprobs":null,"prompt_token_ids":null}],` +
        `"service_tier":null,"system_fingerprint":null,"usage":{"prompt_tokens":1,"total_tokens":4,"completion_tokens":3,"prompt_tokens_details":null},` +
        `"kv_transfer_params":null}`,
    );
  });

  it('names the response after the caller\'s X-Request-Id, as vLLM does', async () => {
    const sim = await simulator({ outputTokens: 1 });
    const res = await rawRequest(sim.port, 'POST', '/v1/chat/completions', CHAT_BODY, { 'x-request-id': 'abc-123' });
    expect((JSON.parse(res.body.toString('utf8')) as { id: string }).id).toBe('chatcmpl-abc-123');
  });
});

describe('other routes', () => {
  it('lists the configured model in vLLM\'s ModelList format', async () => {
    const sim = await simulator({ model: 'my-model' });
    const res = await rawRequest(sim.port, 'GET', '/v1/models');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('application/json');
    const list = JSON.parse(res.body.toString('utf8')) as { data: { created: number; permission: { id: string }[] }[] };
    const card = list.data[0];
    const created = card?.created ?? 0;
    const permissionId = card?.permission[0]?.id ?? '';
    expect(permissionId).toMatch(/^modelperm-[0-9a-f]{32}$/);
    expect(res.body.toString('utf8')).toBe(
      `{"object":"list","data":[{"id":"my-model","object":"model","created":${created},"owned_by":"vllm","root":"my-model","parent":null,` +
        `"max_model_len":8192,"permission":[{"id":"${permissionId}","object":"model_permission","created":${created},"allow_create_engine":false,` +
        `"allow_sampling":true,"allow_logprobs":true,"allow_search_indices":false,"allow_view":true,"allow_fine_tuning":false,` +
        `"organization":"*","group":null,"is_blocking":false}]}]}`,
    );
  });

  it('answers /health with 200 and an empty body', async () => {
    const sim = await simulator();
    const res = await rawRequest(sim.port, 'GET', '/health');
    expect(res.status).toBe(200);
    expect(res.headers['content-length']).toBe('0');
    expect(res.headers['content-type']).toBeUndefined();
    expect(res.body.length).toBe(0);
  });

  it('answers an unknown path with FastAPI\'s 404 body, as vLLM does', async () => {
    const sim = await simulator();
    const res = await rawRequest(sim.port, 'GET', '/v1/nothing-here');
    expect(res.status).toBe(404);
    expect(res.headers['content-type']).toBe('application/json');
    expect(res.body.toString('utf8')).toBe('{"detail":"Not Found"}');
  });

  it('answers a wrong method on a known path with 405 and Allow', async () => {
    const sim = await simulator();
    const res = await rawRequest(sim.port, 'GET', '/v1/chat/completions');
    expect(res.status).toBe(405);
    expect(res.headers['allow']).toBe('POST');
    expect(res.body.toString('utf8')).toBe('{"detail":"Method Not Allowed"}');
  });
});

describe('request errors: vLLM\'s ErrorResponse', () => {
  it('answers a body that is not JSON with 400 "Bad Request"', async () => {
    const sim = await simulator();
    const res = await rawRequest(sim.port, 'POST', '/v1/chat/completions', '{"messages": [');
    expect(res.status).toBe(400);
    expect(res.headers['content-type']).toBe('application/json');
    const body = JSON.parse(res.body.toString('utf8')) as { error: Record<string, unknown> };
    expect(Object.keys(body)).toEqual(['error']);
    expect(Object.keys(body.error)).toEqual(['message', 'type', 'param', 'code']);
    expect(body.error).toMatchObject({ type: 'Bad Request', param: null, code: 400 });
    expect(body.error['message']).toMatch(/JSON/);
  });

  it('rejects a chat request without messages and a completion without prompt', async () => {
    const sim = await simulator();
    const chat = await rawRequest(sim.port, 'POST', '/v1/chat/completions', { model: 'm' });
    const completion = await rawRequest(sim.port, 'POST', '/v1/completions', { model: 'm' });
    expect(chat.status).toBe(400);
    expect(chat.body.toString('utf8')).toMatch(/messages/);
    expect(completion.status).toBe(400);
    expect(completion.body.toString('utf8')).toMatch(/prompt/);
  });

  it('rejects max_tokens below 1 as the serving layer does ("BadRequestError")', async () => {
    const sim = await simulator();
    const res = await rawRequest(sim.port, 'POST', '/v1/chat/completions', { ...CHAT_BODY, max_tokens: 0 });
    expect(res.status).toBe(400);
    expect(res.body.toString('utf8')).toBe(
      '{"error":{"message":"max_tokens must be at least 1, got 0.","type":"BadRequestError","param":null,"code":400}}',
    );
  });

  it('rejects stream_options on a non-streaming request, as vLLM\'s validator does', async () => {
    const sim = await simulator();
    const res = await rawRequest(sim.port, 'POST', '/v1/chat/completions', {
      ...CHAT_BODY,
      stream_options: { include_usage: true },
    });
    expect(res.status).toBe(400);
    expect(res.body.toString('utf8')).toMatch(/Stream options can only be defined when `stream=True`/);
  });
});
