import { describe, expect, it } from 'vitest';
import { createAnthropicSseTap } from '../../../src/taps/anthropic-sse.js';
import { createLlamaCppSseTap } from '../../../src/taps/llamacpp-sse.js';
import { createOllamaNdjsonTap } from '../../../src/taps/ollama-ndjson.js';
import { createOpenAIResponsesSseTap } from '../../../src/taps/openai-responses-sse.js';
import { createOpenAISseTap } from '../../../src/taps/openai-sse.js';
import { createTgiSseTap } from '../../../src/taps/tgi-sse.js';
import { createTritonSseTap } from '../../../src/taps/triton-sse.js';
import type { TapFactory } from '../../../src/taps/tap.js';
import { chatChunk, runTap } from '../../helpers/tap-harness.js';

/** One chunk per element; chunk i arrives at 100 + 10 i ms, so TTFT names the chunk that carried the first token. */
const chunks = (...parts: string[]) => parts.map((p) => Buffer.from(p));
const event = (type: string, data: object) => `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;
const data = (payload: object) => `data: ${JSON.stringify(payload)}\n\n`;
const line = (payload: object) => `${JSON.stringify(payload)}\n`;

/** [protocol, tap, trap chunks (none of them a token), the first content chunk]. */
const CASES: Array<[string, TapFactory, string[], string]> = [
  [
    'OpenAI chat: role prelude, empty delta, keep-alive comment, empty tool_calls',
    createOpenAISseTap,
    [data(chatChunk({ role: 'assistant', content: '' })), data(chatChunk({ content: '' })), ': keep-alive\n\n', data(chatChunk({ tool_calls: [] }))],
    data(chatChunk({ content: 'Hi' })),
  ],
  [
    'OpenAI Responses: response.created, response.in_progress, output_item.added, content_part.added, an empty delta',
    createOpenAIResponsesSseTap,
    [
      event('response.created', { response: { status: 'in_progress', usage: null } }),
      event('response.in_progress', { response: { status: 'in_progress' } }),
      event('response.output_item.added', { output_index: 0, item: { type: 'message', content: [] } }),
      event('response.content_part.added', { output_index: 0, part: { type: 'output_text', text: '' } }),
      event('response.output_text.delta', { delta: '' }),
    ],
    event('response.output_text.delta', { delta: 'Hi' }),
  ],
  [
    'Anthropic: message_start, content_block_start, ping, an empty text delta, the empty input_json opener, a signature',
    createAnthropicSseTap,
    [
      event('message_start', { message: { usage: { input_tokens: 3, output_tokens: 1 } } }),
      event('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }),
      event('ping', {}),
      event('content_block_delta', { index: 0, delta: { type: 'text_delta', text: '' } }),
      event('content_block_delta', { index: 1, delta: { type: 'input_json_delta', partial_json: '' } }),
      event('content_block_delta', { index: 0, delta: { type: 'signature_delta', signature: 'abc' } }),
    ],
    event('content_block_delta', { index: 0, delta: { type: 'text_delta', text: 'Hi' } }),
  ],
  [
    'TGI: keep-alive comments and a special token',
    createTgiSseTap,
    [':\n\n', data({ index: 1, token: { id: 1, text: '<s>', logprob: 0, special: true }, generated_text: null, details: null }), ':\n\n'],
    data({ index: 2, token: { id: 9, text: 'Hi', logprob: -0.1, special: false }, generated_text: null, details: null }),
  ],
  [
    'Ollama: an empty message content and an empty response',
    createOllamaNdjsonTap,
    [line({ model: 'm', message: { role: 'assistant', content: '' }, done: false }), line({ model: 'm', response: '', done: false })],
    line({ model: 'm', message: { role: 'assistant', content: 'Hi' }, done: false }),
  ],
  [
    'llama.cpp native: a held UTF-8 token (empty content) and a comment',
    createLlamaCppSseTap,
    [data({ index: 0, content: '', tokens: [226], stop: false, tokens_predicted: 1 }), ': comment\n\n'],
    data({ index: 0, content: 'é', tokens: [169], stop: false, tokens_predicted: 2 }),
  ],
  [
    'Triton: an empty text_output and a comment',
    createTritonSseTap,
    [data({ model_name: 'm', model_version: '1', text_output: '' }), ': comment\n\n'],
    data({ model_name: 'm', model_version: '1', text_output: 'Hi' }),
  ],
];

describe('first token: every protocol skips its traps', () => {
  it.each(CASES)('%s', (_name, tap, traps, first) => {
    const run = runTap(tap, chunks(...traps, first));
    expect(run.timeline.ttftMs).toBe(100 + traps.length * 10);
    expect(run.timeline.contentEvents).toBe(1);
    expect(run.problems).toEqual([]);
  });

  it('llama.cpp native: the token held back as incomplete UTF-8 is counted with the next content event', () => {
    const run = runTap(createLlamaCppSseTap, chunks(
      data({ content: 'a', stop: false, tokens_predicted: 1 }),
      data({ content: '', stop: false, tokens_predicted: 2 }),
      data({ content: 'é', stop: false, tokens_predicted: 3 }),
      data({ content: '', stop: true, tokens_predicted: 3, tokens_evaluated: 4, timings: { prompt_ms: 1.5, predicted_ms: 20.25 } }),
    ));
    expect(run.gaps).toEqual([[20, 2]]);
    expect(run.timeline.countedTokens).toBe(3);
    expect(run.timeline.tokenCountMismatch).toBe(false);
    expect(run.timeline.terminal).toBe(true);
  });

  it('a stream that ends without its terminal event is not terminal (Anthropic, Responses, TGI, Ollama, llama.cpp)', () => {
    const cut: Array<[TapFactory, string]> = [
      [createAnthropicSseTap, event('content_block_delta', { index: 0, delta: { type: 'text_delta', text: 'Hi' } })],
      [createOpenAIResponsesSseTap, event('response.output_text.delta', { delta: 'Hi' })],
      [createTgiSseTap, data({ index: 1, token: { id: 9, text: 'Hi', special: false }, generated_text: null, details: null })],
      [createOllamaNdjsonTap, line({ message: { content: 'Hi' }, done: false })],
      [createLlamaCppSseTap, data({ content: 'Hi', stop: false, tokens_predicted: 1 })],
    ];
    for (const [tap, only] of cut) expect(runTap(tap, chunks(only)).timeline.terminal).toBe(false);
  });

  it('upstream error events: Responses response.failed and error, TGI, Ollama, llama.cpp and Triton error objects', () => {
    const errors: Array<[TapFactory, string]> = [
      [createOpenAIResponsesSseTap, event('response.failed', { response: { status: 'failed', error: { code: 'server_error' } } })],
      [createOpenAIResponsesSseTap, event('error', { code: 'ERR_SOMETHING', message: 'Something went wrong' })],
      [createTgiSseTap, data({ error: 'Request failed during generation: Server error: CUDA out of memory', error_type: 'generation' })],
      [createOllamaNdjsonTap, line({ error: 'an error was encountered while running the model' })],
      [createLlamaCppSseTap, data({ error: { code: 500, message: 'context shift is disabled', type: 'server_error' } })],
      [createTritonSseTap, data({ error: 'in ensemble, failed to run' })],
    ];
    for (const [tap, error] of errors) expect(runTap(tap, chunks(error)).timeline.errorEvent, error).toBe(true);
  });

  it('a malformed event is counted and the next one still measured', () => {
    for (const tap of [createAnthropicSseTap, createOpenAIResponsesSseTap, createTgiSseTap, createLlamaCppSseTap, createTritonSseTap]) {
      const run = runTap(tap, chunks('data: {oops\n\n', 'data: [1,2]\n\n'));
      expect(run.problems).toEqual(['malformed_event', 'malformed_event']);
    }
    const ollama = runTap(createOllamaNdjsonTap, chunks('{oops\n', line({ response: 'x', done: false })));
    expect(ollama.problems).toEqual(['malformed_event']);
    expect(ollama.timeline.ttftMs).toBe(110);
  });
});
