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

  it('keeps a byte-order mark that opens a later line, or follows an empty first line, as part of its line (the ollama client cannot parse that line either)', () => {
    const bom = Buffer.from([0xef, 0xbb, 0xbf]);
    const later = expectSplitInvariant(Buffer.concat([Buffer.from('{"a":1}\n'), bom, Buffer.from('{"b":2}\n')]));
    expect(later.lines).toEqual(['{"a":1}', '\uFEFF{"b":2}']);
    expect(expectSplitInvariant(Buffer.concat([Buffer.from('\n'), bom, Buffer.from('{"b":2}\n')])).lines).toEqual(['\uFEFF{"b":2}']);
    // A body that opens with a byte-order mark alone on its line: an empty line, skipped.
    expect(expectSplitInvariant(Buffer.concat([bom, Buffer.from('\n{"b":2}\n')])).lines).toEqual(['{"b":2}']);
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

describe('NDJSON decoder size cap (an upstream that never ends its line)', () => {
  const DEFAULT_CAP = 1 << 20;
  /** A JSON line of exactly `bytes` bytes. */
  const lineOf = (bytes: number): string => `{"x":"${'x'.repeat(bytes - 8)}"}`;

  it('decodes a line of exactly 1 MiB and counts one of 1 MiB + 1 byte as oversized, with the default cap', () => {
    const atCap = lineOf(DEFAULT_CAP);
    expect(Buffer.byteLength(atCap)).toBe(DEFAULT_CAP);
    const overCap = lineOf(DEFAULT_CAP + 1);
    // Whole, and in 64 KiB chunks as a server writes them (the cap is then crossed while buffering).
    for (const chunkBytes of [Infinity, 64 * 1024]) {
      const bytes = Buffer.from(`{"a":1}\n${atCap}\n${overCap}\n{"b":2}\n`);
      const pieces: Buffer[] = [];
      for (let at = 0; at < bytes.length; at += Math.min(chunkBytes, bytes.length)) pieces.push(bytes.subarray(at, at + Math.min(chunkBytes, bytes.length)));
      const { lines, oversized } = decode(pieces);
      expect(lines.map((line) => line.length), `chunks of ${chunkBytes} bytes`).toEqual([7, DEFAULT_CAP, 7]);
      expect(oversized, `chunks of ${chunkBytes} bytes`).toBe(1);
    }
  });

  it('reports an endless line as soon as it passes the cap, before any line end arrives', () => {
    let oversized = 0;
    const decoder = new NdjsonDecoder(
      () => expect.unreachable('no line may be delivered'),
      () => oversized++,
      1000,
    );
    decoder.write(Buffer.alloc(1000, 0x78));
    expect(oversized).toBe(0);
    decoder.write(Buffer.from('x'));
    expect(oversized).toBe(1);
    decoder.write(Buffer.alloc(5000, 0x78));
    decoder.end();
    expect(oversized).toBe(1);
  });

  it('holds no more than the cap in memory while an upstream streams a 64 MiB line without a line end', () => {
    const chunk = Buffer.alloc(64 * 1024, 0x78);
    const lines: string[] = [];
    let oversized = 0;
    const decoder = new NdjsonDecoder(
      (line) => lines.push(line),
      () => oversized++,
    );
    const before = process.memoryUsage().arrayBuffers;
    for (let i = 0; i < 1024; i++) decoder.write(chunk);
    const grown = process.memoryUsage().arrayBuffers - before;
    // Copies of up to 1 MiB were held, then dropped (the GC may not have run): far below the 64 MiB
    // an unbounded buffer keeps.
    expect(grown).toBeLessThan(16 * 1024 * 1024);
    expect(oversized).toBe(1);
    expect(lines).toEqual([]);
    decoder.write(Buffer.from('\n{"after":1}\n'));
    decoder.end();
    expect(lines).toEqual(['{"after":1}']);
    expect(oversized).toBe(1);
  });
});

describe('NDJSON decoder state between lines and bodies', () => {
  it('decodes a line split across chunks right after an endless line was dropped past the cap', () => {
    expect(decode(['x'.repeat(300), 'x\n{"b"', ':2}\n{"c"', ':3}\n'], 256)).toEqual({ lines: ['{"b":2}', '{"c":3}'], oversized: 1 });
  });

  it('starts afresh after end(): a body that ended inside a partial or an oversized line leaves nothing to the next', () => {
    const lines: string[] = [];
    let oversized = 0;
    const decoder = new NdjsonDecoder(
      (line) => lines.push(line),
      () => oversized++,
      256,
    );
    decoder.write(Buffer.from('x'.repeat(300)));
    decoder.end();
    decoder.write(Buffer.from('{"a"'));
    decoder.write(Buffer.from(':1}\n'));
    decoder.end();
    expect({ lines, oversized }).toEqual({ lines: ['{"a":1}'], oversized: 1 });
  });
});

/*
 * Mutants Stryker reports as surviving here that change no behaviour (stryker run on
 * src/taps/ndjson-decoder.ts with this file and first-token.test.ts):
 * - write(): `start < chunk.length` -> `<=`: at start === length the loop finds no line end and
 *   keeps an empty part, which keep() ignores.
 * - write(): the conditions that refresh the cached next LF/CR (`lf !== -1 && lf < start`, and the
 *   CR one) made always true, `||` or `<=`: the refreshed position is the one cached (the first LF or
 *   CR at or after `start`), so only the number of indexOf calls changes.
 * - end(): `pendingBytes > 0 && !skipping` made true, `||`, `>= 0`: lineEnd() of an empty last
 *   line delivers nothing, and while skipping it only clears the flag end() clears next.
 * - keep(): `part.length === 0` -> false: write() never passes an empty part (a chunk with no line
 *   end left has at least one byte after `start`).
 * - lineEnd(): `pendingBytes === 0 ? last : concat` -> always concat: the same bytes, one copy more.
 */
