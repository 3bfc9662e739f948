import { describe, expect, it } from 'vitest';
import { NdjsonDecoder } from '../../../src/taps/ndjson-decoder.js';

function decode(pieces: readonly (string | Buffer)[], maxLineBytes?: number) {
  const lines: string[] = [];
  let oversized = 0;
  const decoder = new NdjsonDecoder(
    (line) => lines.push(line),
    () => oversized++,
    maxLineBytes,
  );
  for (const piece of pieces) decoder.write(typeof piece === 'string' ? Buffer.from(piece, 'utf8') : piece);
  decoder.end();
  return { lines, oversized };
}

function expectSplitInvariant(bytes: Buffer, maxLineBytes?: number) {
  const whole = decode([bytes], maxLineBytes);
  for (let cut = 1; cut < bytes.length; cut++) {
    const split = decode([bytes.subarray(0, cut), bytes.subarray(cut)], maxLineBytes);
    if (JSON.stringify(split) !== JSON.stringify(whole)) expect(split, `cut at byte ${cut}`).toEqual(whole);
  }
  return whole;
}

describe('NDJSON decoder', () => {
  it('ends lines at LF, CRLF and CR, skipping empty lines, also with a CRLF split across chunks', () => {
    for (const eol of ['\n', '\r\n', '\r']) {
      const whole = expectSplitInvariant(Buffer.from(`{"a":1}${eol}${eol}{"b":2}${eol}`));
      expect(whole.lines, JSON.stringify(eol)).toEqual(['{"a":1}', '{"b":2}']);
    }
  });

  it('keeps a multi-byte character whole when its bytes are split across chunks', () => {
    expect(expectSplitInvariant(Buffer.from('{"t":"é☕😀"}\n', 'utf8')).lines).toEqual(['{"t":"é☕😀"}']);
  });

  it('drops a byte-order mark at the start, even split', () => {
    const stream = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{"a":1}\n')]);
    expect(expectSplitInvariant(stream).lines).toEqual(['{"a":1}']);
    expect(JSON.parse(decode([stream.subarray(0, 2), stream.subarray(2)]).lines[0] as string)).toEqual({ a: 1 });
  });

  it('delivers a last line without a line end when the body ends', () => {
    expect(decode(['{"a":1}\n{"b"', ':2}']).lines).toEqual(['{"a":1}', '{"b":2}']);
  });

  it('counts an oversized line once, skips it and decodes the next, however the bytes are split', () => {
    const stream = Buffer.from(`{"a":1}\n{"x":"${'x'.repeat(300)}"}\n{"b":2}\n`);
    expect(expectSplitInvariant(stream, 256)).toEqual({ lines: ['{"a":1}', '{"b":2}'], oversized: 1 });
  });

  it('decodes a line exactly at the limit', () => {
    const line = `{"x":"${'x'.repeat(250)}"}`;
    expect(line.length).toBe(258);
    expect(expectSplitInvariant(Buffer.from(`${line}\n`), 258)).toEqual({ lines: [line], oversized: 0 });
  });
});
