import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { PromptFingerprinter } from '../../../src/profile/prompt-fingerprint.js';
import { SeededRandom } from '../../helpers/seeded-random.js';

const KEY = Buffer.alloc(32, 7);
const FIELDS = ['system', 'instructions', 'tools', 'messages', 'prompt', 'input', 'inputs', 'text_input'];

/**
 * The fingerprint as first written: every fragment of the prompt text measured by its own
 * Buffer.byteLength, the kept text always encoded. The sidecar's measures the fragments kept whole
 * in one call and skips the encoding below one block; both must give the same hashes and bytes.
 */
function reference(body: Record<string, unknown>, blockBytes: number, maxBlocks: number): { hashes: number[]; promptBytes: number } | undefined {
  const keepChars = maxBlocks * blockBytes;
  const parts: string[] = [];
  let bytes = 0;
  let chars = 0;
  const add = (text: string): void => {
    bytes += Buffer.byteLength(text, 'utf8');
    if (chars >= keepChars) return;
    const kept = text.length > keepChars - chars ? text.slice(0, keepChars - chars) : text;
    parts.push(kept);
    chars += kept.length;
  };
  const value = (v: unknown, depth: number): void => {
    if (typeof v === 'string') add(v);
    else if (typeof v === 'number' || typeof v === 'boolean') add(String(v));
    else if (typeof v === 'object' && v !== null && depth < 32) {
      if (Array.isArray(v)) for (const item of v) value(item, depth + 1);
      else
        for (const [key, item] of Object.entries(v)) {
          add(key);
          add(':');
          value(item, depth + 1);
        }
    }
    add('\n');
  };
  let found = false;
  for (const field of FIELDS) {
    const v = body[field];
    if (v === undefined || v === null) continue;
    found = true;
    add(field);
    add('\n');
    value(v, 0);
  }
  if (!found) return undefined;
  const complete = Math.min(maxBlocks, Math.floor(bytes / blockBytes));
  const hashed = Buffer.from(parts.join(''), 'utf8');
  const hashes: number[] = [];
  let previous: Buffer | undefined;
  for (let k = 0; k < complete; k++) {
    const hmac = createHmac('sha256', KEY);
    if (previous !== undefined) hmac.update(previous);
    previous = hmac.update(hashed.subarray(k * blockBytes, (k + 1) * blockBytes)).digest();
    hashes.push(previous.readUIntBE(0, 6));
  }
  return { hashes, promptBytes: bytes };
}

/** Text with what makes byte counts differ from character counts: multi-byte characters, pairs, lone halves. */
const PIECES = ['a', 'say ', 'é', '€', '日本', '😀', '\ud83d', '\ude00', '\n', ' ', 'x'.repeat(40)];

function text(random: SeededRandom): string {
  let out = '';
  const n = Math.floor(random.next() * 12);
  for (let i = 0; i < n; i++) out += PIECES[Math.floor(random.next() * PIECES.length)];
  return out;
}

function value(random: SeededRandom, depth: number): unknown {
  const r = random.next();
  if (depth > 3 || r < 0.45) return text(random);
  if (r < 0.55) return Math.floor(random.next() * 1000) / 8;
  if (r < 0.6) return random.next() < 0.5;
  if (r < 0.65) return null;
  if (r < 0.8) return Array.from({ length: Math.floor(random.next() * 4) }, () => value(random, depth + 1));
  const object: Record<string, unknown> = {};
  for (let i = Math.floor(random.next() * 4); i > 0; i--) object[text(random) || 'k'] = value(random, depth + 1);
  return object;
}

describe('the prompt fingerprint', () => {
  it('gives the hashes and byte count of the per-fragment reference for generated prompts, cut at every kind of place', () => {
    const random = new SeededRandom(2712);
    const fingerprinter = new PromptFingerprinter(KEY);
    let hashed = 0;
    let cut = 0;
    for (let i = 0; i < 20_000; i++) {
      const body: Record<string, unknown> = {};
      for (const field of FIELDS) if (random.next() < 0.3) body[field] = value(random, 0);
      if (random.next() < 0.5) body.messages = [{ role: 'user', content: text(random) }, { role: 'assistant', content: text(random) }];
      const blockBytes = 1 + Math.floor(random.next() * 48);
      const maxBlocks = Math.floor(random.next() * 6);
      const expected = reference(body, blockBytes, maxBlocks);
      expect(fingerprinter.blocks(body, blockBytes, maxBlocks), `case ${i}`).toEqual(expected);
      if (expected !== undefined && expected.hashes.length > 0) hashed++;
      if (expected !== undefined && expected.promptBytes > maxBlocks * blockBytes) cut++;
    }
    // The cases reach both sides of every branch: prompts hashed, and prompts longer than what is kept.
    expect(hashed).toBeGreaterThan(2_000);
    expect(cut).toBeGreaterThan(2_000);
  });
});
