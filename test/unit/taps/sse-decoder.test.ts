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

/** `text` written as a server does: the first piece, then one chunk per event (cut after each blank line). */
function eventChunks(text: string): string[] {
  const pieces: string[] = [];
  let from = 0;
  for (let at = text.indexOf('\n\n'); at !== -1; at = text.indexOf('\n\n', from)) {
    pieces.push(text.slice(from, at + 2));
    from = at + 2;
  }
  if (from < text.length) pieces.push(text.slice(from));
  return pieces;
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

  it('keeps a U+FEFF after the body start as text, whichever chunk first needs the decoder', () => {
    const stream = Buffer.from('data: a\n\ndata: \uFEFFx☕\n\n', 'utf8');
    expect(expectSplitInvariant(stream).events).toEqual([
      [undefined, 'a'],
      [undefined, '\uFEFFx☕'],
    ]);
    // Between events it opens the next line's field name ("\uFEFFdata"), which the spec ignores: it was not dropped.
    const mark = Buffer.from('\uFEFF', 'utf8');
    expect(decode(['data: a\n\n', mark.subarray(0, 1), mark.subarray(1), 'data: b\n\ndata: c\n\n']).events).toEqual([
      [undefined, 'a'],
      [undefined, 'c'],
    ]);
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

  it('dispatches nothing from the rest of an event that overflowed the buffer cap: a data line after the endless one is part of the skipped event, not an event of its own', () => {
    for (const eol of ['\n', '\r\n', '\r']) {
      const endless = ['data: ', ...Array.from({ length: 20 }, () => 'y'.repeat(100))];
      const tail = ['more', eol, 'data: [DONE]', eol, 'data: {"choices":[{"delta":{"content":"smuggled"}}]}', eol, eol];
      const result = decode(['data: a', eol, eol, ...endless, ...tail, 'data: b', eol, eol], 256);
      expect(result, JSON.stringify(eol)).toEqual({ events: [[undefined, 'a'], [undefined, 'b']], oversized: 1 });
    }
  });

  it('decodes an event exactly at the limit', () => {
    const data = 'z'.repeat(256);
    expect(expectSplitInvariant(Buffer.from(`data: ${data}\n\n`), 256)).toEqual({ events: [[undefined, data]], oversized: 0 });
  });

  it('decodes whole-event chunks (the shortcut past the parser) exactly as the parser decodes the whole text', () => {
    const streams = [
      'data: {"a":1}\n\ndata: {"b":"é☕😀"}\n\ndata: [DONE]\n\n',
      'event: message_start\ndata: {"x":1}\n\ndata: after-typed\n\nevent: e\ndata: 2\n\n',
      'data:no-space\n\ndata:  two-spaces\n\ndata: \n\ndata\n\ndata: last\n\n',
      'id: 7\ndata: with-id\n\ndata: next\n\n: comment\n\ndata: a\ndata: b\n\ndata: c\n\n',
      'retry: 10\n\ndata: x\n\nfoo: bar\ndata: y\n\ndata: z\n\n',
    ];
    for (const text of streams) {
      const whole = decode([text]);
      expect(decode(eventChunks(text)), text).toEqual(whole);
      expect(decode(['data: first\n\n', ...eventChunks(text)]).events.slice(1), text).toEqual(whole.events);
    }
  });

  it('does not take a whole-event chunk past the parser while the parser holds part of a line or an event', () => {
    // An event whose first data line came in the previous chunk: the next line joins it.
    expect(decode(['data: first\n\n', 'data: a\n', 'data: b\n\n', 'data: c\n\n']).events).toEqual([
      [undefined, 'first'],
      [undefined, 'a\nb'],
      [undefined, 'c'],
    ]);
    // An event type set in the previous chunk applies to the data that follows.
    expect(decode(['data: first\n\n', 'event: typed\n', 'data: x\n\n', 'data: y\n\n']).events).toEqual([
      [undefined, 'first'],
      ['typed', 'x'],
      [undefined, 'y'],
    ]);
    // A partial line: the chunk completes it rather than starting an event.
    expect(decode(['data: first\n\n', 'data: par', 'data: tial\n\n']).events).toEqual([
      [undefined, 'first'],
      [undefined, 'pardata: tial'],
    ]);
    // A CR-ended chunk may owe an LF: the next chunk's LF is its pair, not a blank line.
    expect(decode(['data: first\r\r', '\ndata: x\n\n', 'data: y\n\n']).events).toEqual([
      [undefined, 'first'],
      [undefined, 'x'],
      [undefined, 'y'],
    ]);
    // A multi-byte character split across chunks: the chunk finishing it goes through the decoder.
    const snowman = Buffer.from('data: ☕\n\n');
    expect(decode([Buffer.from('data: first\n\n'), snowman.subarray(0, 7), snowman.subarray(7), Buffer.from('data: z\n\n')]).events).toEqual([
      [undefined, 'first'],
      [undefined, '☕'],
      [undefined, 'z'],
    ]);
  });

  it('applies the size cap to whole-event chunks too', () => {
    const big = 'q'.repeat(300);
    expect(decode(['data: a\n\n', `data: ${big}\n\n`, 'data: b\n\n'], 256)).toEqual({ events: [[undefined, 'a'], [undefined, 'b']], oversized: 1 });
    const atLimit = 'z'.repeat(256);
    expect(decode(['data: a\n\n', `data: ${atLimit}\n\n`], 256)).toEqual({ events: [[undefined, 'a'], [undefined, atLimit]], oversized: 0 });
  });
});
