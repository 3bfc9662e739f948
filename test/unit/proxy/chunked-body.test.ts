import { describe, expect, it } from 'vitest';
import { ChunkedBody, ChunkedBodyError } from '../../../src/proxy/http1/chunked-body.js';
import { llamacppStream, randomChunks, splitEvents } from '../../helpers/fixtures.js';

/** Frames `parts` as a chunked body, as an upstream would (with optional extensions and trailers). */
function frame(parts: readonly Buffer[], trailer = ''): Buffer {
  const pieces: Buffer[] = [];
  parts.forEach((part, i) => pieces.push(Buffer.from(`${part.length.toString(16)}${i % 3 === 1 ? ';ext=1' : ''}\r\n`), part, Buffer.from('\r\n')));
  pieces.push(Buffer.from(`0\r\n${trailer}\r\n`));
  return Buffer.concat(pieces);
}

/** Feeds `wire` in the given pieces; returns the data found and where the message ended. */
function follow(wire: readonly Buffer[]): { data: Buffer; endedAt: number | undefined; reads: number } {
  const reader = new ChunkedBody();
  const data: Buffer[] = [];
  let endedAt: number | undefined;
  wire.forEach((buffer, index) => {
    const end = reader.feed(buffer, 0);
    for (let k = 0; k < reader.pieces; k++) data.push(buffer.subarray(reader.pieceStarts[k], reader.pieceEnds[k]));
    if (end !== -1) endedAt = index;
  });
  return { data: Buffer.concat(data), endedAt, reads: wire.length };
}

describe('chunked body framing', () => {
  const stream = llamacppStream('chat-completions.sse');
  const wire = frame(splitEvents(stream), 'X-Trailer: 1\r\n');

  it('finds exactly the data of a real stream, cut at every kind of boundary, and its end in the last read', () => {
    for (let seed = 1; seed <= 200; seed++) {
      const reads = randomChunks(wire, seed, 1 + (seed % 40));
      const result = follow(reads);
      expect(result.data.equals(stream), `seed ${seed}`).toBe(true);
      expect(result.endedAt, `seed ${seed}`).toBe(reads.length - 1);
    }
  });

  it('reads byte by byte', () => {
    const result = follow([...wire].map((b) => Buffer.of(b)));
    expect(result.data.equals(stream)).toBe(true);
    expect(result.endedAt).toBe(wire.length - 1);
  });

  it('returns the offset just past the end, leaving bytes after it to the caller', () => {
    const reader = new ChunkedBody();
    expect(reader.feed(Buffer.from('2\r\nok\r\n0\r\n'), 0)).toBe(-1);
    expect(reader.done).toBe(false);
    const buffer = Buffer.from('\r\nHTTP/1.1 200');
    expect(reader.feed(buffer, 0)).toBe(2);
    expect(reader.done).toBe(true);
    expect(() => reader.feed(Buffer.from('x'), 0)).toThrow(ChunkedBodyError);
    expect(() => reader.feed(Buffer.from('x'), 0)).toThrow(/bytes after the end of the chunked body/);
  });

  it('starts at the given offset (the body after the head, in the same read)', () => {
    const reader = new ChunkedBody();
    const buffer = Buffer.from('HEAD\r\n\r\n3\r\nabc\r\n');
    expect(reader.feed(buffer, 8)).toBe(-1);
    expect([reader.pieces, reader.pieceStarts[0], reader.pieceEnds[0]]).toEqual([1, 11, 14]);
  });

  it.each([
    ['a size that is not hex', 'zz\r\n', /chunk size expected/],
    ['data longer than its size', '2\r\nabc\r\n', /not followed by CRLF/],
    ['a size line ended by LF alone', '2\nab\r\n', /invalid byte 0xa/],
    ['a size beyond 2^52', 'fffffffffffffff\r\n', /too many digits/],
    ['an endless extension', `1;${'x'.repeat(17_000)}`, /extension too long/],
    ['a size line whose CR is followed by another byte than LF', '2\rXok\r\n', /chunk size line not ended by CRLF/],
    ['data followed by another byte than CR (data longer than its size)', '2\r\nokX\n', /chunk data not followed by CRLF/],
    ['data followed by CR and another byte than LF', '2\r\nok\rX', /chunk data not followed by CRLF/],
    ['a bare LF in a chunk extension', '2;a\nb\r\n', /bare LF in a chunk size line or trailer line/],
    ['a bare LF in a trailer line', '0\r\nX-T: a\n', /bare LF in a chunk size line or trailer line/],
    ['a trailer line whose CR is followed by another byte than LF', '0\r\nX-T: a\rZ', /trailer line not ended by CRLF/],
    ['an endless trailer field', `0\r\nX-T: ${'x'.repeat(17_000)}`, /trailer field too long/],
  ])('refuses %s', (_what, body, message) => {
    expect(() => new ChunkedBody().feed(Buffer.from(body), 0)).toThrow(message);
  });

  // The limits bound what one response makes tokentap scan: a size past 2^52 would lose digits in
  // a Number (the relay would skip the wrong number of bytes and fall out of step with the
  // upstream), and an endless extension or trailer line would be read forever. Each holds exactly
  // at its bound, so a server's legitimate framing up to it passes.
  it('accepts a 13-digit chunk size (2^52 - 1 is the largest) and refuses a 14th digit, even a leading zero', () => {
    const reader = new ChunkedBody();
    expect(reader.feed(Buffer.from('fffffffffffff\r\nab'), 0)).toBe(-1);
    expect([reader.pieces, reader.pieceStarts[0], reader.pieceEnds[0]]).toEqual([1, 15, 17]);
    expect(() => new ChunkedBody().feed(Buffer.from('00000000000002\r\n'), 0)).toThrow(/too many digits/);
  });

  it('accepts a chunk extension and a trailer field of exactly 16 KiB and refuses one byte more', () => {
    const line = 'x'.repeat(16 * 1024);
    expect(follow([Buffer.from(`2;${line}\r\nok\r\n0\r\n${line}\r\n\r\n`)])).toMatchObject({ endedAt: 0 });
    expect(() => new ChunkedBody().feed(Buffer.from(`2;${line}x`), 0)).toThrow(/chunk extension too long/);
    expect(() => new ChunkedBody().feed(Buffer.from(`0\r\n${line}x`), 0)).toThrow(/trailer field too long/);
  });

  it('accepts whitespace before a chunk extension or the line end (BWS, RFC 9112 section 7.1.1), as servers send it', () => {
    for (const sizeLine of ['2 ', '2\t', '2 ;a=b', '2\t;a=b']) {
      const result = follow([Buffer.from(`${sizeLine}\r\nok\r\n0\r\n\r\n`)]);
      expect([result.data.toString(), result.endedAt], JSON.stringify(sizeLine)).toEqual(['ok', 0]);
    }
  });

  // Equivalent mutants: pieceStarts and pieceEnds start empty, and a mutant that starts them with an
  // element changes nothing, since feed() writes each place before `pieces` counts it and callers
  // read only the first `pieces`.
});
