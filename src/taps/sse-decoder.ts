import { createParser, type EventSourceMessage, type EventSourceParser } from 'eventsource-parser';
import { GrowableBytes } from '../bytes/growable-bytes.js';

/**
 * Server-sent events from response bytes, shared by every SSE tap.
 *
 * Framing is parsed by eventsource-parser 3.1.1 (a well-kept, spec-following parser: `:` comments,
 * multi-line `data`, `event` types, LF line ends); CR and CRLF are turned into LF before it (see
 * feed()). Chunks that may end inside a character, or open the body with a byte-order mark, go
 * through a streaming TextDecoder, so a multi-byte character split across chunks stays whole and
 * the mark (even split) is dropped; the others take Buffer's cheaper conversion (write() says
 * when). The library was kept because measurement does not call for a hand-written parser: on the
 * 128-event llama.cpp capture (about 240 bytes per event) decoding took 0.5-2 µs per event on the
 * shared 2-core machine, against about 4 µs for the JSON.parse each tap then does; and DESIGN.md
 * section 9 puts the proxy path's cost in stream machinery and GC, not in event parsing.
 *
 * Size cap: an event whose data is longer than `maxEventChars` (UTF-16 code units, at most the same
 * number of bytes) is reported once through `onOversized` and skipped; the events after it are
 * decoded as usual. Two checks make that independent of how the bytes were chunked: a complete
 * event is checked when dispatched, and the parser's buffer cap (twice the limit plus a line's
 * slack, so an event within the limit can never trip it: its buffer is its data plus at most its
 * current line) stops an endless event from growing memory, after which its rest is skipped up to
 * the blank line that ends it. The parser only signals that overflow, so the skipping is done here.
 *
 * One shortcut past the library (wholeDataEvent): a chunk that is exactly one `data: …` line and
 * its blank line, arriving when the parser holds nothing, is dispatched straight from the bytes.
 * That is nearly every chunk of a token stream (servers write each event whole). In a tight loop
 * the library costs 0.2 µs per event, but inside the proxy, where each chunk's code and data have
 * left the cache since the last one, observation's time per chunk went from 5.4 to 4.3 µs with this
 * shortcut (timed in place around RequestMonitor.body under the benchmark's 64 streams); checking
 * the bytes with Buffer.compare/indexOf instead of in JS gained nothing, each being a call into C++.
 * Every other chunk, and every chunk after one that left the parser mid-line or mid-event, goes
 * through the library.
 *
 * What an upstream can make the library cost is bounded here, not in it. A chunk with no line end
 * is held as bytes (one growing buffer) until one arrives: the library keeps each unfinished piece
 * as its own string, so a line sent a byte at a time cost an object per byte. And each line with a
 * field the spec ignores (`x`, a `retry` that is not a number) makes the library build an Error,
 * whose stack trace cost about 3 ms per KB of such lines: the library runs with no stack traces
 * (an event handed to a tap gets them back).
 */

/** Default event size cap: 1 Mi characters, far above any token event (a few hundred bytes). */
const MAX_EVENT_CHARS = 1 << 20;

/** Room in the parser's buffer for the field names and line ends around an event's data. */
const BUFFER_SLACK_CHARS = 1024;

const LF = 10;
const CR = 13;
/** A UTF-8 byte-order mark is EF BB BF. */
const BOM_FIRST_BYTE = 0xef;
/** `data: ` as bytes: the field name, its colon and the one space the spec strips. */
const DATA_FIELD = Buffer.from('data: ', 'latin1');
const DATA_FIELD_BYTES = DATA_FIELD.length;
const CR_OR_CRLF = /\r\n?/g;
/** Shared by every decode call: an options literal there would be one allocation per chunk. */
const STREAMING = Object.freeze({ stream: true });

/** Whether `chunk` holds a line end (LF or CR). */
function hasLineEnd(chunk: Buffer): boolean {
  return chunk.indexOf(LF) !== -1 || chunk.indexOf(CR) !== -1;
}

export class SseDecoder {
  /**
   * Both made on first need: a stream whose every chunk is a whole `data:` event of complete
   * characters (an OpenAI-compatible stream, typically) never needs either, and a TextDecoder is a
   * native converter the GC must finalise.
   */
  private decoder: InstanceType<typeof TextDecoder> | undefined;
  private parser: EventSourceParser | undefined;
  private readonly onEvent: (event: EventSourceMessage) => void;
  private readonly onOversized: () => void;
  private readonly maxEventChars: number;
  /**
   * The event handed out by the shortcut, reused: every tap reads an event during its onEvent call
   * and keeps nothing of it. It has no `event` type (a `data`-only event has none) and no `id`
   * (which no tap reads).
   */
  private readonly dataOnlyEvent: EventSourceMessage = { data: '', event: undefined, id: undefined };
  /** Everything fed so far ended with a blank line (or nothing was), so the parser holds no partial line or event: a whole event may skip it. */
  private atEventBoundary = true;
  private overflowed = false;
  /** Discarding the rest of an oversized event until its blank line. */
  private skipping = false;
  /** While skipping: the last character seen ended a line (so another line end is the blank line). */
  private skipAtLineStart = false;
  /** The last text ended in a CR, handed to the parser as LF: an LF opening the next text is its CRLF pair. */
  private swallowLF = false;
  /** The TextDecoder holds bytes of an unfinished character. */
  private decoderHolds = false;
  /** No byte has arrived yet: the body may open with a byte-order mark. */
  private atBodyStart = true;
  /** The process's stack trace depth while the parser runs without one (feed()). */
  private stackTraceLimit = 10;
  /** Bytes of a line not yet ended, held back from the parser (see the class comment), at most `maxHeldBytes`. */
  private readonly heldLine: GrowableBytes;
  /** The parser's own buffer cap in characters, as bytes (a character is at least a byte). */
  private readonly maxHeldBytes: number;

  /**
   * A line whose field is `error`, which SSE does not define (the parser ignores it, as every SSE
   * client does): llama.cpp writes an error in the middle of a stream so, `error: {...}`, and then
   * ends the stream (with `data: [DONE]` on its OpenAI routes). Called once per such line.
   */
  private readonly onErrorField: (() => void) | undefined;

  constructor(onEvent: (event: EventSourceMessage) => void, onOversized: () => void, maxEventChars = MAX_EVENT_CHARS, onErrorField?: () => void) {
    this.onEvent = onEvent;
    this.onOversized = onOversized;
    this.onErrorField = onErrorField;
    this.maxEventChars = maxEventChars;
    this.maxHeldBytes = 2 * maxEventChars + BUFFER_SLACK_CHARS;
    this.heldLine = new GrowableBytes(this.maxHeldBytes);
  }

  write(chunk: Buffer): void {
    if (chunk.length === 0) return;
    const last = chunk[chunk.length - 1] as number;
    // A chunk that ends a line, with nothing held: nearly every chunk, and no search.
    if ((last === LF || last === CR) && this.heldLine.length === 0) {
      this.decode(chunk);
      return;
    }
    const held = this.heldLine;
    if (!hasLineEnd(chunk) && held.length + chunk.length <= this.maxHeldBytes) {
      held.append(chunk);
      this.atEventBoundary = false;
      return;
    }
    if (held.length === 0) {
      this.decode(chunk);
      return;
    }
    held.append(chunk);
    // decode() reads the view before anything can append to it again.
    this.decode(held.view());
    held.clear();
  }

  /** The body ended: flushes a trailing partial character. An unterminated last event is not dispatched (SSE spec). */
  end(): void {
    if (this.heldLine.length > 0) {
      this.decode(this.heldLine.view());
      this.heldLine.clear();
    }
    if (this.decoder !== undefined) this.feed(this.decoder.decode());
  }

  private decode(chunk: Buffer): void {
    // A chunk ending in an ASCII byte leaves no character unfinished. When the decoder holds nothing
    // either, Buffer's own UTF-8 conversion gives the same text (U+FFFD for invalid bytes alike:
    // checked on 300,000 random byte strings) at a third of the cost: 0.09 against 0.3 µs for a
    // 180-byte token event. SSE servers end their writes with the event's blank line, so this is
    // nearly every chunk; the rest go through the streaming decoder, and so does a body's first
    // chunk when it may open with a byte-order mark (its first byte is the mark's first).
    const endsInAscii = (chunk[chunk.length - 1] as number) < 0x80;
    const mayOpenWithMark = this.atBodyStart && chunk[0] === BOM_FIRST_BYTE;
    const decoderNeeded = this.decoderHolds || mayOpenWithMark || !endsInAscii;
    if (!decoderNeeded) {
      this.atBodyStart = false;
      if (this.atEventBoundary && this.wholeDataEvent(chunk)) return;
      this.feed(chunk.toString('utf8'));
      return;
    }
    // Made at the body's start, it drops a byte-order mark there; made later, a U+FEFF is text.
    this.decoder ??= new TextDecoder('utf-8', { ignoreBOM: !this.atBodyStart });
    this.atBodyStart = false;
    this.feed(this.decoder.decode(chunk, STREAMING));
    this.decoderHolds = !endsInAscii;
  }

  /**
   * Dispatches `chunk` if it is exactly `data: <text>\n\n` with no other line end in it (the caller
   * knows it ends a whole UTF-8 text and that the parser holds nothing); false, with nothing done,
   * for anything else. The text is what the parser would give for it: one data line, its one
   * leading space removed, no CR to normalise, within the size cap.
   */
  private wholeDataEvent(chunk: Buffer): boolean {
    const lineEnd = chunk.length - 2;
    if (lineEnd < DATA_FIELD_BYTES || chunk[lineEnd] !== LF || chunk[lineEnd + 1] !== LF) return false;
    if (lineEnd - DATA_FIELD_BYTES > this.maxEventChars) return false;
    // Byte by byte, not Buffer.compare/indexOf: each of those is a call into C++, which inside the
    // proxy cost more than the checks themselves. The line-end checks run on the decoded text (V8's
    // own string search), which is then dropped in the rare case it fails.
    for (let i = 0; i < DATA_FIELD_BYTES; i++) if (chunk[i] !== DATA_FIELD[i]) return false;
    const data = chunk.toString('utf8', DATA_FIELD_BYTES, lineEnd);
    if (data.indexOf('\n') !== -1 || data.indexOf('\r') !== -1) return false;
    const event = this.dataOnlyEvent;
    event.data = data;
    this.onEvent(event);
    return true;
  }

  private feed(text: string): void {
    this.atEventBoundary = false;
    if (this.swallowLF && text.length > 0) {
      this.swallowLF = false;
      if (text.charCodeAt(0) === LF) text = text.slice(1);
    }
    if (text.length === 0) return;
    if (text.indexOf('\r') !== -1) {
      // CR, LF and CRLF are equivalent line ends, so CR and CRLF become LF here. The parser would
      // hold a chunk's trailing CR until the next chunk shows whether an LF follows (delaying that
      // event), and loses it if the next chunk overflows; here a trailing CR ends its line at once
      // and an LF opening the next chunk is swallowed as its pair. LF-only streams skip this.
      if (text.charCodeAt(text.length - 1) === CR) this.swallowLF = true;
      text = text.replace(CR_OR_CRLF, '\n');
    }
    if (this.skipping) {
      const resume = this.skipToEventEnd(text);
      if (resume === -1) return;
      text = text.slice(resume);
      if (text.length === 0) return;
    }
    const parser = (this.parser ??= this.createParser());
    this.stackTraceLimit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    try {
      parser.feed(text);
    } finally {
      Error.stackTraceLimit = this.stackTraceLimit;
    }
    // A text ending in a blank line leaves the parser holding nothing (a CR-ended one may still owe
    // its LF, and the overflow below starts skipping: neither is a boundary).
    this.atEventBoundary = !this.swallowLF && text.endsWith('\n\n');
    if (this.overflowed) {
      // The parser dropped what it had buffered of this event and stopped; skip the event's rest.
      this.overflowed = false;
      this.onOversized();
      parser.reset();
      this.skipping = true;
      this.atEventBoundary = false;
      const last = text.charCodeAt(text.length - 1);
      this.skipAtLineStart = last === LF;
    }
  }

  private createParser(): EventSourceParser {
    const maxEventChars = this.maxEventChars;
    return createParser({
      onEvent: (event) => {
        // The taps run with stack traces: an exception there is logged with its stack.
        Error.stackTraceLimit = this.stackTraceLimit;
        try {
          if (event.data.length > maxEventChars) this.onOversized();
          else this.onEvent(event);
        } finally {
          Error.stackTraceLimit = 0;
        }
      },
      onError: (error) => {
        if (error.type === 'max-buffer-size-exceeded') this.overflowed = true;
        else if (error.type === 'unknown-field' && error.field === 'error') this.onErrorField?.();
      },
      maxBufferSize: 2 * maxEventChars + BUFFER_SLACK_CHARS,
    });
  }

  /** Index just past the blank line that ends the skipped event, or -1 if `text` does not reach it. */
  private skipToEventEnd(text: string): number {
    for (let i = 0; i < text.length; i++) {
      if (text.charCodeAt(i) === LF) {
        if (this.skipAtLineStart) {
          this.skipping = false;
          return i + 1;
        }
        this.skipAtLineStart = true;
      } else {
        this.skipAtLineStart = false;
      }
    }
    return -1;
  }
}
