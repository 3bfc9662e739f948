import { createParser, type EventSourceMessage } from 'eventsource-parser';
import { describe, expect, it } from 'vitest';
import { SseDecoder } from '../../../src/taps/sse-decoder.js';

/** Decodes `pieces` in order; returns [event type, data] per event and the oversized count. */
function decode(pieces: readonly (string | Buffer)[], maxEventChars?: number) {
  const events: Array<[string | undefined, string]> = [];
  let oversized = 0;
  let errorFields = 0;
  const decoder = new SseDecoder(
    (event: EventSourceMessage) => events.push([event.event, event.data]),
    () => oversized++,
    maxEventChars,
    () => errorFields++,
  );
  for (const piece of pieces) decoder.write(typeof piece === 'string' ? Buffer.from(piece, 'utf8') : piece);
  decoder.end();
  return errorFields === 0 ? { events, oversized } : { events, oversized, errorFields };
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

  it("reports each `error:` line (llama.cpp's stream error), a field SSE ignores, once, however split, and dispatches no event for it", () => {
    const stream = Buffer.from('data: {"content":"a"}\n\nerror: {"code":500,"message":"slot died","type":"server_error"}\n\ndata: [DONE]\n\n');
    expect(expectSplitInvariant(stream)).toEqual({ events: [[undefined, '{"content":"a"}'], [undefined, '[DONE]']], oversized: 0, errorFields: 1 });
    // Other unknown fields, and `error` as an event type or inside data, are not it.
    expect(decode(['errors: x\n\nevent: error\ndata: x\n\ndata: error: x\n\n'])).toEqual({ events: [['error', 'x'], [undefined, 'error: x']], oversized: 0 });
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

describe('SSE decoder and the parser\'s errors', () => {
  it('gives the taps their stack traces (the parser runs without: see the limits test of ignored lines), passes their exceptions on, and leaves the limit as it was', () => {
    const limit = Error.stackTraceLimit;
    const stacks: string[] = [];
    const decoder = new SseDecoder(
      () => stacks.push(new Error('from a tap').stack ?? ''),
      () => {},
    );
    decoder.write(Buffer.from('x: ignored\nretry: soon\ndata: a\n'));
    expect(Error.stackTraceLimit).toBe(limit);
    decoder.write(Buffer.from('\n'));
    expect(stacks).toHaveLength(1);
    expect(stacks[0]).toMatch(/\n\s+at /);
    expect(() =>
      new SseDecoder(
        () => {
          throw new Error('a tap failed');
        },
        () => {},
      ).write(Buffer.from('x: 1\ndata: a\n\n')),
    ).toThrow('a tap failed');
    expect(Error.stackTraceLimit).toBe(limit);
  });

  it('holds a line without its end as bytes and decodes it whole once the end arrives, byte by byte up to the cap', () => {
    const line = `data: ${'é'.repeat(300)}`;
    const bytes = Buffer.from(`${line}\n\n`);
    expect(decode(Array.from(bytes, (byte) => Buffer.from([byte]))).events).toEqual([[undefined, 'é'.repeat(300)]]);
    // Past the cap (twice the event cap and 1,024 characters of slack) the held bytes go to the parser, which skips the event.
    const endless = Buffer.from(`data: ${'x'.repeat(2 * 64 + 1024 + 10)}`);
    expect(decode([...Array.from(endless, (byte) => Buffer.from([byte])), '\n\ndata: next\n\n'], 64)).toEqual({ events: [[undefined, 'next']], oversized: 1 });
  });
});

describe('SSE decoder paths a random stream seldom takes', () => {
  it('does not take a chunk that ends one data line and opens the next for a whole event (the shortcut needs the blank line)', () => {
    expect(decode(['data: a\n\n', 'data: b\nd', 'ata: c\n\n'])).toEqual({ events: [[undefined, 'a'], [undefined, 'b\nc']], oversized: 0 });
  });

  it('keeps a character whole when a chunk ends after a continuation byte 0x80 (… is E2 80 A6)', () => {
    expect(expectSplitInvariant(Buffer.from('data: a…b\n\n', 'utf8')).events).toEqual([[undefined, 'a…b']]);
  });

  it('delivers a 100 KiB event written in 4 KiB pieces under the default cap (the parser buffer holds twice the cap)', () => {
    const data = 'q'.repeat(100 * 1024);
    const body = `data: ${data}\n\ndata: after\n\n`;
    const pieces = Array.from({ length: Math.ceil(body.length / 4096) }, (_, i) => body.slice(i * 4096, (i + 1) * 4096));
    const result = decode(pieces);
    expect(result.events.map(([, d]) => d.length)).toEqual([data.length, 5]);
    expect(result.oversized).toBe(0);
  });

  it('keeps skipping an overflowed event across chunks that do not reach its end, and decodes the next event whole', () => {
    const endless = `data: ${'y'.repeat(2000)}`;
    expect(decode(['data: a\n\n', endless, 'y'.repeat(100), '\n\ndata: b\n\n'], 256)).toEqual({ events: [[undefined, 'a'], [undefined, 'b']], oversized: 1 });
  });

  it('reads an LF opening the chunk after an overflow as the end of the endless line, not as the blank line ending its event', () => {
    const endless = `data: ${'y'.repeat(2000)}`;
    expect(decode([endless, '\ndata: smuggled\n\ndata: b\n\n'], 256)).toEqual({ events: [[undefined, 'b']], oversized: 1 });
    expect(decode([`${endless}\n`, '\ndata: b\n\n'], 256)).toEqual({ events: [[undefined, 'b']], oversized: 1 });
  });
});

/**
 * When the whole-event shortcut (a chunk of exactly `data: …\n\n` dispatched without the parser) may
 * run: only when the parser holds nothing. Each case below is a chunking where taking the shortcut
 * would turn bytes that belong to another line or event into an event of their own.
 */
describe('SSE decoder: the whole-event shortcut only at an event boundary', () => {
  it('does not dispatch a whole-event chunk that arrives while the rest of an oversized event is being skipped (an upstream cannot smuggle an event through an oversized one)', () => {
    const endless = `data: ${'y'.repeat(2000)}`;
    // Straight after the chunk that overflowed the buffer cap: `data: smuggled` continues the endless line.
    expect(decode([endless, 'data: smuggled\n\n', 'data: b\n\n'], 256)).toEqual({ events: [[undefined, 'b']], oversized: 1 });
    // After a further chunk of the endless line that does not reach its end.
    expect(decode(['data: a\n\n', endless, 'y'.repeat(100), 'data: smuggled\n\n', 'data: b\n\n'], 256)).toEqual({
      events: [
        [undefined, 'a'],
        [undefined, 'b'],
      ],
      oversized: 1,
    });
  });

  it('joins a data line after a CR-ended line and a lone LF (its CRLF pair) to the same event, not to a new one', () => {
    expect(decode(['data: a\r', '\n', 'data: b\n\n', 'data: c\n\n'])).toEqual({
      events: [
        [undefined, 'a\nb'],
        [undefined, 'c'],
      ],
      oversized: 0,
    });
  });

  it('lets the next chunk complete the partial line of a chunk that opens with a blank line, rather than read it as a whole event', () => {
    // A server that writes each event's blank line at the start of its next write.
    expect(decode(['data: first', '\n\ndata: par', 'data: tial\n\n', 'data: c\n\n'])).toEqual({
      events: [
        [undefined, 'first'],
        [undefined, 'pardata: tial'],
        [undefined, 'c'],
      ],
      oversized: 0,
    });
  });
});

describe('SSE decoder at the end of the body', () => {
  it('counts an unterminated event as oversized when the replacement for a truncated last character takes it past the buffer cap, as decoding the body whole does', () => {
    // Cap 256: the parser's buffer holds 2 * 256 + 1024 = 1536 characters, which the line fills exactly.
    const line = `data: ${'y'.repeat(1536 - 6)}`;
    const truncatedSnowman = Buffer.from('☕').subarray(0, 1);
    const asWritten = decode([line, truncatedSnowman], 256);
    expect(asWritten).toEqual({ events: [], oversized: 1 });
    expect(asWritten).toEqual(decode([Buffer.concat([Buffer.from(line), truncatedSnowman])], 256));
    expect(asWritten).toEqual(decode([`${line}\uFFFD`], 256));
    expect(decode([line], 256)).toEqual({ events: [], oversized: 0 });
  });
});

/**
 * Differential check of every path through the decoder (the whole-event shortcut, Buffer's and the
 * streaming TextDecoder's conversions, CR handling across chunks, the size cap) against the
 * reference reading: the whole body decoded as UTF-8 at once (its byte-order mark dropped), CR and
 * CRLF read as LF, parsed by eventsource-parser in one piece, and events over the cap counted
 * instead of dispatched. Random streams from a fixed seed, each cut three ways.
 */
describe('SSE decoder against the reference reading of the whole body', () => {
  const CAP = 64;
  /** Park-Miller: the same streams on every run, so a failure names a reproducible case. */
  function random(seed: number): () => number {
    let state = seed;
    return () => {
      state = (state * 48271) % 2147483647;
      return state / 2147483647;
    };
  }

  function reference(bytes: Buffer) {
    const events: Array<[string | undefined, string]> = [];
    let oversized = 0;
    const parser = createParser({ onEvent: (event) => (event.data.length > CAP ? oversized++ : events.push([event.event, event.data])) });
    parser.feed(new TextDecoder('utf-8').decode(bytes).replace(/\r\n?/g, '\n'));
    return { events, oversized };
  }

  function randomStream(next: () => number): Buffer {
    const pick = <T,>(items: readonly T[]): T => items[Math.floor(next() * items.length)] as T;
    const eol = () => pick(['\n', '\n', '\r\n', '\r']);
    const text = (length: number) => Array.from({ length }, () => pick(['a', 'b', ' ', ':', '{', '"', 'é', '☕', '😀', '\uFEFF'])).join('');
    let body = next() < 0.2 ? '\uFEFF' : '';
    const events = 1 + Math.floor(next() * 8);
    for (let e = 0; e < events; e++) {
      if (next() < 0.2) body += `:${text(3)}${eol()}`;
      if (next() < 0.2) body += `event: ${pick(['a', 'message_delta'])}${eol()}`;
      const lines = next() < 0.7 ? 1 : 2 + Math.floor(next() * 2);
      const oversized = next() < 0.15;
      for (let l = 0; l < lines; l++) body += `${pick(['data: ', 'data:'])}${text(oversized ? 40 : Math.floor(next() * 12))}${eol()}`;
      body += eol();
    }
    if (next() < 0.2) body += `data: ${text(3)}`;
    return Buffer.from(body, 'utf8');
  }

  /** The body as a server might write it: one chunk per event, random cuts, or byte by byte. */
  function chunkings(bytes: Buffer, next: () => number): Buffer[][] {
    const perEvent = eventChunks(bytes.toString('latin1')).map((piece) => Buffer.from(piece, 'latin1'));
    const cuts = Array.from({ length: 1 + Math.floor(next() * 6) }, () => Math.floor(next() * bytes.length)).sort((a, b) => a - b);
    const randomCuts = [0, ...cuts, bytes.length].slice(1).map((end, i, ends) => bytes.subarray(i === 0 ? 0 : (ends[i - 1] as number), end));
    const byByte = Array.from(bytes, (byte) => Buffer.from([byte]));
    return [perEvent, randomCuts, byByte];
  }

  it('gives the reference events and oversized count for 400 random streams, however they are cut', () => {
    const next = random(28);
    for (let n = 0; n < 400; n++) {
      const bytes = randomStream(next);
      const expected = reference(bytes);
      for (const [k, pieces] of chunkings(bytes, next).entries()) {
        const got = decode(pieces, CAP);
        if (JSON.stringify(got) !== JSON.stringify(expected)) expect(got, `stream ${n}, chunking ${k}: ${JSON.stringify(bytes.toString('utf8'))}`).toEqual(expected);
      }
    }
  });
});

/*
 * Mutants of src/taps/sse-decoder.ts that change no behaviour: the 40 that Stryker 9.6.1 reports
 * surviving (`npm run mutate -- src/taps/sse-decoder.ts`), each also applied to the source by hand
 * with these tests passing.
 * - The path a chunk takes, not the events it gives (the reference test above checks the paths
 *   agree): `endsInAscii` false; `mayOpenWithMark` true, its `&&` as `||` or its mark test true;
 *   `decoderNeeded` true; the `!decoderNeeded` test false or its block emptied; the shortcut's call
 *   false; `atBodyStart` left true once the decoder is made (the decoder exists by then, so only later
 *   chunks opening with EF take it); the CR test true or searching '' (the replace finds no CR).
 * - wholeDataEvent() refusing more, so the chunk goes through the parser, which gives the same event:
 *   its body emptied; `lineEnd` past the end; its first test true; `lineEnd < DATA_FIELD_BYTES` as
 *   `<=`, `>=` or false (the `data: ` prefix check refuses a chunk under 8 bytes anyway);
 *   `chunk[lineEnd - 1]` for `chunk[lineEnd + 1]` (an LF there lies in the data, which the line-end
 *   check refuses); the cap test true, `>=` or adding DATA_FIELD_BYTES; `i <= DATA_FIELD_BYTES`; the
 *   prefix mismatch test true; the line-end test true or searching ''.
 * - The boundary flag after a parsed text never set (false), or set only while an LF may be owed
 *   (`this.swallowLF`): a shortcut chunk may then pass before that LF is swallowed, but the LF then
 *   opens a text at an event boundary, where a blank line dispatches nothing.
 * - Initial values overwritten before they are read: `dataOnlyEvent`'s data, or the literal `{}` (data
 *   is set before each dispatch; the absent `event` and `id` read as undefined); `atEventBoundary`
 *   false (the first chunk goes through the parser, which holds nothing); `skipAtLineStart` true;
 *   `decoderHolds` true (the first chunk takes the decoder, made at the body start so it still drops a
 *   mark); `swallowLF` true (the first text fed clears it, and an LF opening that text, the parser
 *   holding nothing, is a blank line with no event).
 * - write()'s empty-chunk return dropped: an empty chunk makes the decoder (made at the body start, it
 *   still drops the mark of the next chunk: an empty input is not the stream's first character) and
 *   feeds no text.
 * - The swallow's `text.length > 0` true or `>= 0`: an empty text comes only from the bytes of an
 *   unfinished character, so the next text opens with that character or U+FFFD, never with the LF.
 * - feed()'s two empty-text returns dropped (at the start, and after a skipped event's end): the
 *   parser is fed '' and the boundary flag stays false.
 * - DATA_FIELD's 'latin1' emptied: `data: ` is ASCII, the same bytes in UTF-8.
 */
