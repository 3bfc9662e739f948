import { describe, expect, it } from 'vitest';
import { createAnthropicSseTap } from '../../../src/taps/anthropic-sse.js';
import { createOllamaNdjsonTap } from '../../../src/taps/ollama-ndjson.js';
import { createOpenAIResponsesSseTap } from '../../../src/taps/openai-responses-sse.js';
import { createOpenAISseTap } from '../../../src/taps/openai-sse.js';
import type { TapFactory } from '../../../src/taps/tap.js';
import { chatChunk, runTap } from '../../helpers/tap-harness.js';

/** One chunk per element; chunk i arrives at 100 + 10 i ms. */
const chunks = (...parts: string[]) => parts.map((p) => Buffer.from(p));
const event = (type: string, data: object) => `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;
const data = (payload: object) => `data: ${JSON.stringify(payload)}\n\n`;
const line = (payload: object) => `${JSON.stringify(payload)}\n`;

/**
 * [protocol, tap, chunks]: in every case chunks 1 and 2 are reasoning (TTFT at chunk 1, 110 ms)
 * and chunk 3 is the first answer (130 ms); chunk 0 carries no token.
 */
const CASES: Array<[string, TapFactory, string[]]> = [
  [
    'OpenAI chat, reasoning_content (vLLM, llama.cpp, SGLang)',
    createOpenAISseTap,
    [
      data(chatChunk({ role: 'assistant', content: '' })),
      data(chatChunk({ reasoning_content: 'Let' })),
      data(chatChunk({ reasoning_content: ' me', content: null })),
      data(chatChunk({ content: 'Hi' })),
      data(chatChunk({}, {}, 'stop')),
      'data: [DONE]\n\n',
    ],
  ],
  [
    "OpenAI chat, vLLM's newer reasoning, then a tool call as the answer",
    createOpenAISseTap,
    [
      data(chatChunk({ role: 'assistant', content: '' })),
      data(chatChunk({ reasoning: 'Let' })),
      data(chatChunk({ reasoning: ' me' })),
      data(chatChunk({ tool_calls: [{ index: 0, id: 'c', type: 'function', function: { name: 'f', arguments: '' } }] })),
      'data: [DONE]\n\n',
    ],
  ],
  [
    'OpenAI Responses, reasoning text and summary deltas',
    createOpenAIResponsesSseTap,
    [
      event('response.created', { response: { usage: null } }),
      event('response.reasoning_text.delta', { delta: 'Let' }),
      event('response.reasoning_summary_text.delta', { delta: 'Thinking' }),
      event('response.output_text.delta', { delta: 'Hi' }),
      event('response.completed', { response: { usage: { input_tokens: 1, output_tokens: 3 } } }),
    ],
  ],
  [
    'OpenAI Responses, a function call as the answer',
    createOpenAIResponsesSseTap,
    [
      event('response.created', { response: { usage: null } }),
      event('response.reasoning_text.delta', { delta: 'Let' }),
      event('response.reasoning_text.delta', { delta: ' me' }),
      event('response.function_call_arguments.delta', { delta: '{"a"' }),
      event('response.completed', { response: { usage: { input_tokens: 1, output_tokens: 3 } } }),
    ],
  ],
  [
    'Anthropic, thinking deltas, then text',
    createAnthropicSseTap,
    [
      event('message_start', { message: { usage: { input_tokens: 3, output_tokens: 1 } } }),
      event('content_block_delta', { index: 0, delta: { type: 'thinking_delta', thinking: 'Let' } }),
      event('content_block_delta', { index: 0, delta: { type: 'thinking_delta', thinking: ' me' } }),
      event('content_block_delta', { index: 1, delta: { type: 'text_delta', text: 'Hi' } }),
      event('message_stop', {}),
    ],
  ],
  [
    'Anthropic, thinking deltas, then tool input',
    createAnthropicSseTap,
    [
      event('message_start', { message: { usage: { input_tokens: 3, output_tokens: 1 } } }),
      event('content_block_delta', { index: 0, delta: { type: 'thinking_delta', thinking: 'Let' } }),
      event('content_block_delta', { index: 0, delta: { type: 'thinking_delta', thinking: ' me' } }),
      event('content_block_delta', { index: 1, delta: { type: 'input_json_delta', partial_json: '{"a"' } }),
      event('message_stop', {}),
    ],
  ],
  [
    'Ollama /api/chat, message.thinking',
    createOllamaNdjsonTap,
    [
      line({ model: 'm', message: { role: 'assistant', content: '' }, done: false }),
      line({ model: 'm', message: { role: 'assistant', content: '', thinking: 'Let' }, done: false }),
      line({ model: 'm', message: { role: 'assistant', content: '', thinking: ' me' }, done: false }),
      line({ model: 'm', message: { role: 'assistant', content: 'Hi' }, done: false }),
      line({ model: 'm', message: { role: 'assistant', content: '' }, done: true, eval_count: 3 }),
    ],
  ],
  [
    'Ollama /api/generate, thinking then response',
    createOllamaNdjsonTap,
    [
      line({ model: 'm', response: '', done: false }),
      line({ model: 'm', response: '', thinking: 'Let', done: false }),
      line({ model: 'm', response: '', thinking: ' me', done: false }),
      line({ model: 'm', response: 'Hi', done: false }),
      line({ model: 'm', response: '', done: true, eval_count: 3 }),
    ],
  ],
];

describe('time to first answer token', () => {
  it.each(CASES)('%s: TTFT at the first reasoning token, the first answer token two chunks later', (_what, create, parts) => {
    const run = runTap(create, chunks(...parts));
    expect(run.problems).toEqual([]);
    expect(run.timeline.ttftMs).toBe(110);
    expect(run.timeline.ttftAnswerMs).toBe(130);
    expect(run.timeline.contentEvents).toBe(3);
  });

  it('is the TTFT for a stream without reasoning, on the fast path of plain content chunks', () => {
    const run = runTap(createOpenAISseTap, chunks(data(chatChunk({ role: 'assistant', content: '' })), data(chatChunk({ content: 'Hi' })), 'data: [DONE]\n\n'));
    expect(run.timeline.ttftMs).toBe(110);
    expect(run.timeline.ttftAnswerMs).toBe(110);
  });

  it('is unknown (NaN) for a stream that only reasoned', () => {
    const run = runTap(createOpenAISseTap, chunks(data(chatChunk({ reasoning_content: 'Let' })), data(chatChunk({}, {}, 'length')), 'data: [DONE]\n\n'));
    expect(run.timeline.ttftMs).toBe(100);
    expect(run.timeline.ttftAnswerMs).toBeNaN();
  });

  it('counts a chunk with both reasoning and content as the answer', () => {
    const run = runTap(createOpenAISseTap, chunks(data(chatChunk({ reasoning_content: 'so', content: 'Hi' })), 'data: [DONE]\n\n'));
    expect(run.timeline.ttftAnswerMs).toBe(100);
  });
});
