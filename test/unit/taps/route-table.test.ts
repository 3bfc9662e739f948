import { describe, expect, it } from 'vitest';
import { loadSettings } from '../../../src/config/load.js';
import { TokentapError } from '../../../src/errors.js';
import { createAnthropicSseTap } from '../../../src/taps/anthropic-sse.js';
import { createLlamaCppSseTap } from '../../../src/taps/llamacpp-sse.js';
import { createOllamaNdjsonTap } from '../../../src/taps/ollama-ndjson.js';
import { createOpenAIJsonTap } from '../../../src/taps/openai-json.js';
import { createOpenAIResponsesSseTap } from '../../../src/taps/openai-responses-sse.js';
import { createOpenAISseTap } from '../../../src/taps/openai-sse.js';
import { RouteTable } from '../../../src/taps/route-table.js';
import { TapSelector } from '../../../src/taps/select.js';
import { createTgiSseTap } from '../../../src/taps/tgi-sse.js';
import { createTritonSseTap } from '../../../src/taps/triton-sse.js';

const SSE = 'text/event-stream; charset=utf-8';

describe('built-in routes', () => {
  const selector = new TapSelector(new RouteTable([]));
  const tapFor = (path: string, contentType: string, method = 'POST') => selector.select(method, path, contentType)?.create;

  it('chooses each protocol by path and content type', () => {
    expect(tapFor('/v1/chat/completions', SSE)).toBe(createOpenAISseTap);
    expect(tapFor('/v1/completions', SSE)).toBe(createOpenAISseTap);
    expect(tapFor('/v1/responses', SSE)).toBe(createOpenAIResponsesSseTap);
    expect(tapFor('/v1/messages', SSE)).toBe(createAnthropicSseTap);
    expect(tapFor('/generate_stream', SSE)).toBe(createTgiSseTap);
    expect(tapFor('/api/chat', 'application/x-ndjson')).toBe(createOllamaNdjsonTap);
    expect(tapFor('/api/generate', 'application/x-ndjson')).toBe(createOllamaNdjsonTap);
    expect(tapFor('/completion', SSE)).toBe(createLlamaCppSseTap);
    expect(tapFor('/v2/models/ensemble/generate_stream', SSE)).toBe(createTritonSseTap);
    expect(tapFor('/v2/models/ensemble/versions/1/generate_stream', SSE)).toBe(createTritonSseTap);
  });

  it('falls back to the content type when a routed protocol answers in another format', () => {
    // llama.cpp serves /api/chat as OpenAI SSE, not Ollama NDJSON.
    expect(tapFor('/api/chat', SSE)).toBe(createOpenAISseTap);
    expect(tapFor('/v1/messages', 'application/json')).toBe(createOpenAIJsonTap);
    expect(tapFor('/api/chat', 'application/json')).toBe(createOpenAIJsonTap);
  });

  it('reads unrouted SSE as OpenAI and a POST JSON body for usage; anything else passes unobserved', () => {
    expect(tapFor('/somewhere/else', SSE)).toBe(createOpenAISseTap);
    expect(tapFor('/somewhere/else', 'application/json')).toBe(createOpenAIJsonTap);
    expect(tapFor('/v1/models', 'application/json', 'GET')).toBeUndefined();
    expect(tapFor('/v1/chat/completions', 'text/plain')).toBeUndefined();
    expect(selector.select('POST', '/v1/chat/completions', undefined)).toBeUndefined();
    // A segment wildcard matches one non-empty segment only.
    expect(tapFor('/v2/models//generate_stream', SSE)).toBe(createOpenAISseTap);
    expect(tapFor('/v2/models/a/b/generate_stream', SSE)).toBe(createOpenAISseTap);
  });

  it('reads each response by its own content type when one selector sees them alternate', () => {
    const alternating = new TapSelector(new RouteTable([]));
    const answers = ['text/event-stream; charset=utf-8', 'application/json', 'Text/Event-Stream', 'text/plain', 'APPLICATION/JSON; charset=utf-8', 'text/event-stream; charset=utf-8'];
    expect(answers.map((contentType) => alternating.select('POST', '/v1/chat/completions', contentType)?.create)).toEqual([
      createOpenAISseTap,
      createOpenAIJsonTap,
      createOpenAISseTap,
      undefined,
      createOpenAIJsonTap,
      createOpenAISseTap,
    ]);
  });

  it('marks streamed protocols as streaming and JSON bodies as not', () => {
    expect(selector.select('POST', '/v1/messages', SSE)?.streaming).toBe(true);
    expect(selector.select('POST', '/v1/messages', 'application/json')?.streaming).toBe(false);
  });
});

describe('configured routes', () => {
  it('take precedence, in order: exact, prefix and segment patterns, method filters, and none opts out', () => {
    const routes = new RouteTable([
      { path: '/llm/v1/chat/completions', protocol: 'openai-chat' },
      { path: '/anthropic/*', protocol: 'anthropic-messages', method: 'POST' },
      { path: '/tenants/*/ollama/api/chat', protocol: 'ollama' },
      { path: '/v1/chat/completions', protocol: 'none' },
      { path: '/completions', protocol: 'llamacpp' },
    ]);
    expect(routes.protocolFor('POST', '/llm/v1/chat/completions')).toBe('openai-chat');
    expect(routes.protocolFor('POST', '/anthropic/v1/messages')).toBe('anthropic-messages');
    expect(routes.protocolFor('GET', '/anthropic/v1/messages')).toBeUndefined();
    expect(routes.protocolFor('POST', '/tenants/acme/ollama/api/chat')).toBe('ollama');
    expect(routes.protocolFor('POST', '/tenants/acme/ollama/api/chat/x')).toBeUndefined();
    expect(routes.protocolFor('POST', '/v1/chat/completions')).toBe('none');
    expect(routes.protocolFor('POST', '/completions')).toBe('llamacpp');
    expect(routes.protocolFor('POST', '/v1/messages')).toBe('anthropic-messages');
    expect(new TapSelector(routes).select('POST', '/v1/chat/completions', SSE)).toBeUndefined();
  });

  it('load from the config file into the settings', () => {
    const settings = loadSettings({
      flags: { config: 'tokentap.yaml' },
      env: {},
      readFile: () => 'routes:\n  - { path: /llm/v1/chat/completions, protocol: openai-chat }\n  - { path: "/llm/*", protocol: none, method: post }\ninject_usage: true\n',
    });
    expect(settings.routes).toEqual([
      { path: '/llm/v1/chat/completions', protocol: 'openai-chat', method: undefined },
      { path: '/llm/*', protocol: 'none', method: 'POST' },
    ]);
    expect(settings.injectUsage).toBe(true);
    expect(loadSettings({ flags: {}, env: {} })).toMatchObject({ routes: [], injectUsage: false });
  });

  it('reject bad routes with the file, line and path of each problem', () => {
    const yaml = [
      'routes:',
      '  - path: llm/chat',
      '    protocol: openai-chat',
      '  - path: /llm/*/x*y',
      '    protocol: ollama',
      '  - path: /ok',
      '    protocol: grpc',
      '  - path: /ok',
      '    protocol: tgi',
      '    method: "GET /"',
      '  - path: /ok',
      '    protocol: tgi',
      '    port: 3',
      'inject_usage: yes please',
      '',
    ].join('\n');
    let error: unknown;
    try {
      loadSettings({ flags: { config: 'tokentap.yaml' }, env: {}, readFile: () => yaml });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(TokentapError);
    const message = (error as Error).message;
    expect(message).toContain('tokentap.yaml:2: routes[0].path: expected a path starting with "/", got "llm/chat"');
    expect(message).toContain('tokentap.yaml:4: routes[1].path: a "*" must be a whole segment');
    expect(message).toMatch(/tokentap\.yaml:7: routes\[2\]\.protocol: expected one of openai-chat, openai-completions, openai-responses, anthropic-messages, tgi, ollama, llamacpp, triton, none/);
    expect(message).toContain('tokentap.yaml:10: routes[3].method: expected an HTTP method such as POST');
    expect(message).toContain('tokentap.yaml:13: routes[4].port: unknown setting');
    expect(message).toContain('tokentap.yaml:14: inject_usage: expected true or false');
  });
});
