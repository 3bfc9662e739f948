import { readFileSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** Captures from real servers (see test/fixtures/README.md). */
const FIXTURES = join(dirname(fileURLToPath(import.meta.url)), '..', 'fixtures');

export function llamacppStream(name: string): Buffer {
  return readFileSync(join(FIXTURES, 'streams', 'llamacpp', name));
}

export function llamacppStreamNames(): string[] {
  return readdirSync(join(FIXTURES, 'streams', 'llamacpp')).filter((n) => n.endsWith('.sse'));
}

/** The SSE events of a stream, each with its terminating blank line, as the server wrote them one per chunk. */
export function splitEvents(stream: Buffer): Buffer[] {
  const text = stream.toString('latin1');
  const events: Buffer[] = [];
  let start = 0;
  for (let i = text.indexOf('\n\n'); i !== -1; i = text.indexOf('\n\n', start)) {
    events.push(Buffer.from(text.slice(start, i + 2), 'latin1'));
    start = i + 2;
  }
  if (start < text.length) events.push(Buffer.from(text.slice(start), 'latin1'));
  return events;
}

/** Deterministic pseudo-random cut points, so a failing split can be reproduced from its seed. */
export function randomChunks(data: Buffer, seed: number, maxChunk = 97): Buffer[] {
  let state = seed >>> 0 || 1;
  const next = (): number => {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    return (state >>> 0) / 0x100000000;
  };
  const chunks: Buffer[] = [];
  for (let offset = 0; offset < data.length; ) {
    const size = 1 + Math.floor(next() * maxChunk);
    chunks.push(data.subarray(offset, offset + size));
    offset += size;
  }
  return chunks;
}

export function vllmStream(name: string): Buffer {
  return readFileSync(join(FIXTURES, 'streams', 'vllm', name));
}

/**
 * `stream` (a vLLM chat stream captured without usage options) as vLLM sends it with
 * `stream_options: {include_usage: true, continuous_usage_stats: true}`: every chunk carries the
 * cumulative `usage`, the prelude with 0 completion tokens, each later chunk one token more (one
 * chunk per generated token, empty deltas included: vLLM's serving_chat.py adds the engine's
 * running count to every chunk), then a usage-only chunk (`"choices": []`) before `[DONE]`.
 * Compare fixtures/streams/vllm/chat-continuous-usage.sse, captured with those options.
 */
export function withContinuousUsage(stream: Buffer, promptTokens: number): Buffer {
  let completion = 0;
  let last: Record<string, unknown> | undefined;
  const out: string[] = [];
  for (const event of splitEvents(stream)) {
    const data = event.toString('utf8').replace(/^data: /, '').trim();
    if (data === '[DONE]') {
      const usageOnly = { id: last?.id, object: last?.object, created: last?.created, model: last?.model, choices: [], usage: usage(promptTokens, completion) };
      out.push(`data: ${JSON.stringify(usageOnly)}\n\n`, 'data: [DONE]\n\n');
      continue;
    }
    const chunk = JSON.parse(data) as Record<string, unknown>;
    const prelude = (chunk.choices as Array<{ delta?: { role?: string } }>)[0]?.delta?.role !== undefined;
    if (!prelude) completion++;
    out.push(`data: ${JSON.stringify({ ...chunk, usage: usage(promptTokens, completion) })}\n\n`);
    last = chunk;
  }
  return Buffer.from(out.join(''), 'utf8');
}

function usage(prompt: number, completion: number) {
  return { prompt_tokens: prompt, total_tokens: prompt + completion, completion_tokens: completion };
}
