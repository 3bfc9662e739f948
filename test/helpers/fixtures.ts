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
