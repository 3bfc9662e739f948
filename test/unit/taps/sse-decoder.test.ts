import type { EventSourceMessage } from 'eventsource-parser';
import { describe, expect, it } from 'vitest';
import { SseDecoder } from '../../../src/taps/sse-decoder.js';

/** Decodes `pieces` in order; returns [event type, data] per event and the oversized count. */
function decode(pieces: readonly (string | Buffer)[], maxEventChars?: number) {
  const events: Array<[string | undefined, string]> = [];
  let oversized = 0;
  const decoder = new SseDecoder(
    (event: EventSourceMessage) => events.push([event.event, event.data]),
    () => oversized++,
    maxEventChars,
  );
  for (const piece of pieces) decoder.write(typeof piece === 'string' ? Buffer.from(piece, 'utf8') : piece);
  decoder.end();
  return { events, oversized };
}

/** Every two-piece split of `bytes` decodes like the whole. */
function expectSplitInvariant(bytes: Buffer, maxEventChars?: number) {
  const whole = decode([bytes], maxEventChars);
  for (let cut = 1; cut < bytes.length; cut++) {
    const split = decode([bytes.subarray(0, cut), bytes.subarray(cut)], maxEventChars);
    if (JSON.stringify(split) !== JSON.stringify(whole)) expect(split, `cut at byte ${cut}`).toEqual(whole);
  }
  return whole;
}

describe('SSE decoder', () => {
  it('ends lines at LF, CRLF and CR alike, also when a CRLF is split across chunks', () => {
    for (const eol of ['\n', '\r\n', '\r']) {
      const stream = Buffer.from(`event: a${eol}data: 1${eol}${eol}data: 2${eol}data: 3${eol}${eol}`);
      const whole = expectSplitInvariant(stream);
      expect(whole.events, JSON.stringify(eol)).toEqual([
        ['a', '1'],
        [undefined, '2\n3'],
      ]);
    }
  });

  it('keeps a multi-byte character whole when its bytes are split across chunks', () => {
    const stream = Buffer.from('data: {"t":"é☕😀"}\n\n', 'utf8');
    const whole = expectSplitInvariant(stream);
    expect(whole.events).toEqual([[undefined, '{"t":"é☕😀"}']]);
  });

  it('drops a byte-order mark at the start, even split byte by byte', () => {
    const stream = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('data: x\n\n')]);
    expect(decode([stream.subarray(0, 1), stream.subarray(1, 2), stream.subarray(2)]).events).toEqual([[undefined, 'x']]);
    expect(expectSplitInvariant(stream).events).toEqual([[undefined, 'x']]);
  });

  it('skips comments and keep-alive lines', () => {
    const whole = expectSplitInvariant(Buffer.from(':\n\n: ping\n\ndata: a\n: inside an event\n\n'));
    expect(whole.events).toEqual([[undefined, 'a']]);
  });

  it('does not dispatch an unterminated last event (SSE spec)', () => {
    expect(decode(['data: a\n\ndata: b']).events).toEqual([[undefined, 'a']]);
  });

  it('counts an oversized event once, skips it and decodes the next, however the bytes are split', () => {
    const big = 'x'.repeat(300);
    const stream = Buffer.from(`data: a\n\ndata: ${big}\ndata: ${big}\n\ndata: b\n\n`);
    const whole = expectSplitInvariant(stream, 256);
    expect(whole).toEqual({ events: [[undefined, 'a'], [undefined, 'b']], oversized: 1 });
  });

  it('skips an endless event past the buffer cap up to its blank line, whatever the line ends', () => {
    for (const eol of ['\n', '\r\n', '\r']) {
      const pieces = ['data: a', eol, eol, 'data: ', ...Array.from({ length: 20 }, () => 'y'.repeat(100)), eol, eol, 'data: b', eol, eol];
      expect(decode(pieces, 256), JSON.stringify(eol)).toEqual({ events: [[undefined, 'a'], [undefined, 'b']], oversized: 1 });
    }
  });

  it('decodes an event exactly at the limit', () => {
    const data = 'z'.repeat(256);
    expect(expectSplitInvariant(Buffer.from(`data: ${data}\n\n`), 256)).toEqual({ events: [[undefined, data]], oversized: 0 });
  });
});
