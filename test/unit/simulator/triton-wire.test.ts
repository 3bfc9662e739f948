import { describe, expect, it } from 'vitest';
import { expectedTokens, rawRequest, simulator, sseBlocks } from './helpers.js';

describe('Triton generate extension', () => {
  it('streams one {"model_name","model_version","text_output"} data event per chunk and simply ends', async () => {
    const sim = await simulator({ outputTokens: 3 });
    const res = await rawRequest(sim.port, 'POST', '/v2/models/ensemble/generate_stream', { text_input: 'hi', parameters: { stream: true } }, { 'x-sim-seed': '7' });
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('text/event-stream; charset=utf-8');
    expect(res.complete).toBe(true);
    expect(res.body.toString('utf8')).toBe(
      expectedTokens(7, 3)
        .map((text) => `data: {"model_name":"ensemble","model_version":"1","text_output":${JSON.stringify(text)}}\n\n`)
        .join(''),
    );
  });

  it('honours max_tokens at the top level or under parameters, and the version in the path', async () => {
    const sim = await simulator({ outputTokens: 10 });
    const top = await rawRequest(sim.port, 'POST', '/v2/models/m/versions/2/generate_stream', { text_input: 'hi', max_tokens: 2 });
    expect(sseBlocks(top.body).map((block) => (JSON.parse(block.data ?? '{}') as { model_version: string }).model_version)).toEqual(['2', '2']);
    const nested = await rawRequest(sim.port, 'POST', '/v2/models/m/generate_stream', { text_input: 'hi', parameters: { max_tokens: 4 } });
    expect(sseBlocks(nested.body)).toHaveLength(4);
  });

  it('answers /generate with one object and the whole text', async () => {
    const sim = await simulator({ outputTokens: 4 });
    const res = await rawRequest(sim.port, 'POST', '/v2/models/llama/generate', { text_input: 'hi' }, { 'x-sim-seed': '2' });
    expect(res.headers['content-type']).toBe('application/json');
    expect(res.body.toString('utf8')).toBe(`{"model_name":"llama","model_version":"1","text_output":${JSON.stringify(expectedTokens(2, 4).join(''))}}`);
  });

  it('sends {"error"} as a data event for x-sim-fault error:<n> and as the body of a status fault', async () => {
    const sim = await simulator({ outputTokens: 5 });
    const streamed = await rawRequest(sim.port, 'POST', '/v2/models/m/generate_stream', { text_input: 'hi' }, { 'x-sim-fault': 'error:1' });
    expect(sseBlocks(streamed.body).at(-1)?.data).toBe('{"error":"Simulated failure (x-sim-fault: error:1)"}');
    const failed = await rawRequest(sim.port, 'POST', '/v2/models/m/generate', { text_input: 'hi' }, { 'x-sim-fault': 'status:503' });
    expect(failed.status).toBe(503);
    expect(failed.body.toString('utf8')).toBe('{"error":"Simulated failure (x-sim-fault: status:503)"}');
  });

  it('refuses a request without text_input', async () => {
    const sim = await simulator();
    const res = await rawRequest(sim.port, 'POST', '/v2/models/m/generate', { prompt: 'hi' });
    expect(res.status).toBe(400);
    expect(JSON.parse(res.body.toString('utf8'))).toMatchObject({ error: expect.stringContaining('text_input') as unknown });
  });
});
