import { describe, expect, it } from 'vitest';
import { ResponseHeadError, ResponseHeadReader, bodyFraming, type ResponseHead } from '../../../src/proxy/http1/response-head.js';

/**
 * The upstream's response head, as the relay reads it to decide where the body ends (RFC 9112
 * section 6.3) and whether the connection may carry the next request. A head read wrongly makes the
 * relay forward too few or too many bytes, or pool a connection whose next bytes belong to this
 * response: each case pins one part of that decision.
 */

function read(head: string): { head: ResponseHead; headBytes: number } {
  const reader = new ResponseHeadReader();
  reader.begin();
  const result = reader.feed(Buffer.from(head, 'latin1'));
  reader.close();
  if (result === undefined) throw new Error('head not complete');
  return result;
}

const framing = (head: string, method = 'GET') => bodyFraming(read(head).head, method);

describe('reading an upstream response head', () => {
  it('stops right after the head, leaving the body to the caller', () => {
    const wire = 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok';
    expect(read(wire).headBytes).toBe(wire.length - 2);
  });

  it('returns undefined until the head is complete, and the head once its end arrives', () => {
    const reader = new ResponseHeadReader();
    reader.begin();
    expect(reader.feed(Buffer.from('HTTP/1.1 200 OK\r\nContent-Le'))).toBeUndefined();
    expect(reader.feed(Buffer.from('ngth: 2\r\n\r\n'))?.head.contentLength).toBe(2);
    reader.close();
  });

  it('keeps every field of a head with many fields, in order, though the parser hands them over in parts', () => {
    const fields = Array.from({ length: 70 }, (_, i) => [`X-Field-${i}`, `v${i}`]);
    const { head } = read(`HTTP/1.1 200 OK\r\n${fields.map(([n, v]) => `${n}: ${v}\r\n`).join('')}Content-Length: 0\r\n\r\n`);
    expect(head.rawHeaders).toEqual([...fields.flat(), 'Content-Length', '0']);
  });

  it('reads a second head on the same reader after begin(), without the first head\'s fields', () => {
    const reader = new ResponseHeadReader();
    reader.begin();
    const many = Array.from({ length: 70 }, (_, i) => `X-First-${i}: 1\r\n`).join('');
    reader.feed(Buffer.from(`HTTP/1.1 103 Early Hints\r\n${many}\r\n`));
    reader.begin();
    const second = reader.feed(Buffer.from('HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n'));
    expect(second?.head.rawHeaders).toEqual(['Content-Length', '0']);
    reader.close();
  });

  it('takes the first Content-Type, which the protocol taps read, when a head repeats it', () => {
    const head = 'HTTP/1.1 200 OK\r\nX-Request-Id: 7\r\nContent-Type: text/event-stream\r\nContent-Type: application/json\r\nContent-Length: 0\r\n\r\n';
    expect(read(head).head.contentType).toBe('text/event-stream');
  });

  it('keeps an HTTP/1.1 connection alive unless it says close, and never an HTTP/1.0 one', () => {
    expect(read('HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n').head.keepAlive).toBe(true);
    expect(read('HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n').head.keepAlive).toBe(false);
    expect(read('HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n').head.keepAlive).toBe(false);
  });

  it('names why a response cannot be framed: no coding, a coding other than chunked alone, chunked on HTTP/1.0, or a length past 2^53 - 1', () => {
    const problem = (head: string) => read(`${head}\r\n`).head;
    expect(problem('HTTP/1.1 200 OK\r\nTransfer-Encoding: ,\r\n')).toMatchObject({ framingProblem: 'Transfer-Encoding names no transfer coding', transferEncoded: true, chunked: false });
    expect(problem('HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n')).toMatchObject({ framingProblem: 'transfer coding "gzip" (tokentap relays chunked alone)', transferEncoded: true, chunked: false });
    expect(problem('HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n')).toMatchObject({
      framingProblem: 'transfer coding "gzip, chunked" (tokentap relays chunked alone)',
      chunked: false,
    });
    // Chunked twice: a reader that removes one layer reads the other as data, one that removes both does not.
    expect(problem('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, chunked\r\n')).toMatchObject({
      framingProblem: 'transfer coding "chunked, chunked" (tokentap relays chunked alone)',
      chunked: false,
    });
    expect(problem('HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n')).toMatchObject({ framingProblem: 'Transfer-Encoding in an HTTP/1.0 response', chunked: true });
    expect(problem('HTTP/1.1 200 OK\r\nTransfer-Encoding: , Chunked ,\r\n')).toMatchObject({ framingProblem: undefined, chunked: true, transferEncoded: true });
    expect(problem('HTTP/1.1 200 OK\r\nContent-Length: 3\r\n')).toMatchObject({ framingProblem: undefined, chunked: false, transferEncoded: false, contentLength: 3 });
    // A length a Number holds exactly is written as read; one past it would be written rounded.
    expect(problem('HTTP/1.1 200 OK\r\nContent-Length: 9007199254740991\r\n')).toMatchObject({ framingProblem: undefined, contentLength: 9007199254740991 });
    expect(problem('HTTP/1.1 200 OK\r\nContent-Length: 9007199254740992\r\n')).toMatchObject({ framingProblem: 'Content-Length larger than 2^53 - 1' });
  });

  it('quotes an upstream\'s coding in the problem (which reaches the log line) without C1 controls, and at most 64 characters of it', () => {
    const hostile = `x\u009b31m\u0085${'y'.repeat(12_000)}`;
    const problem = read(`HTTP/1.1 200 OK\r\nTransfer-Encoding: ${hostile}\r\n\r\n`).head.framingProblem as string;
    expect(problem).toBe(`transfer coding "x?31m?${'y'.repeat(58)}…" (tokentap relays chunked alone)`);
    // Exactly 64 characters are quoted whole, unmarked.
    const exact = read(`HTTP/1.1 200 OK\r\nTransfer-Encoding: ${'z'.repeat(64)}\r\n\r\n`).head.framingProblem as string;
    expect(exact).toBe(`transfer coding "${'z'.repeat(64)}" (tokentap relays chunked alone)`);
  });

  it('refuses a malformed head with the parser\'s code and reason', () => {
    expect(() => read('HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n')).toThrow(ResponseHeadError);
    try {
      read('HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n');
      expect.unreachable();
    } catch (error) {
      expect((error as ResponseHeadError).code).toBe('HPE_INVALID_CONTENT_LENGTH');
      expect((error as ResponseHeadError).message).toBe('HPE_INVALID_CONTENT_LENGTH: Invalid character in Content-Length');
    }
  });
});

describe('where the body of a response ends', () => {
  it('has no body for HEAD, 1xx, 204 and 304, whatever the head announces (RFC 9110 sections 9.3.2, 15.2, 15.3.5, 15.4.5)', () => {
    expect(framing('HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n', 'HEAD')).toBe('none');
    expect(framing('HTTP/1.1 100 Continue\r\n\r\n')).toBe('none');
    expect(framing('HTTP/1.1 199 Something\r\nContent-Length: 5\r\n\r\n')).toBe('none');
    expect(framing('HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n')).toBe('none');
    expect(framing('HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\n')).toBe('none');
  });

  it('follows chunked, then Content-Length (0 is no body), and reads to the close without either', () => {
    expect(framing('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n')).toBe('chunked');
    expect(framing('HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n')).toBe('length');
    expect(framing('HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n')).toBe('none');
    expect(framing('HTTP/1.1 200 OK\r\n\r\n')).toBe('close');
    expect(framing('HTTP/1.1 205 Reset Content\r\nContent-Length: 5\r\n\r\n')).toBe('length');
  });

  it('reads the body of a status below 100 (which the parser accepts) to the close, not as an interim response without one', () => {
    expect(framing('HTTP/1.1 099 Odd\r\n\r\n')).toBe('close');
  });
});

// Equivalent mutants of src/proxy/http1/response-head.ts: the fields kept from parts of a long head
// (`flushedHeaders`) start empty again at every begin(), which the relay calls before each head, so
// their initial value, the reset after joining them and the `length > 0` test before joining change
// nothing; close() frees the native parser at once, which garbage collection does later without it
// (no byte or decision differs).
