import { describe, expect, it } from 'vitest';
import { HTTPParser, METHODS, STOP_AFTER_HEAD, isParseError, parserResource } from '../../../src/proxy/http1/node-http-parser.js';
import { bodyFraming, ResponseHeadReader } from '../../../src/proxy/http1/response-head.js';

/**
 * Pins what the relay relies on in Node's internal parser (`_http_common`): the callback slots and
 * their arguments, and that returning STOP_AFTER_HEAD stops right after a head. A Node upgrade that
 * changed them fails here, not in production.
 */
describe("Node's HTTP parser, as the relay uses it", () => {
  it('reports a request head, its body and its end, with the method as an index into METHODS', () => {
    const parser = new HTTPParser();
    parser.initialize(HTTPParser.REQUEST, parserResource(), 0, HTTPParser.kLenientNone);
    const events: unknown[] = [];
    parser[HTTPParser.kOnMessageBegin] = () => events.push('begin');
    parser[HTTPParser.kOnHeadersComplete] = (major: number, minor: number, headers: string[], method: number, url: string, _s: unknown, _m: unknown, upgrade: boolean, keepAlive: boolean) => {
      events.push({ major, minor, headers, method: METHODS[method], url, upgrade, keepAlive });
      return 0;
    };
    parser[HTTPParser.kOnBody] = (chunk: Buffer) => events.push(chunk.toString());
    parser[HTTPParser.kOnMessageComplete] = () => events.push('end');
    const consumed = parser.execute(Buffer.from('POST /v1/x?q=1 HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n'));
    expect(isParseError(consumed)).toBe(false);
    expect(events).toEqual([
      'begin',
      { major: 1, minor: 1, headers: ['Host', 'a', 'Transfer-Encoding', 'chunked'], method: 'POST', url: '/v1/x?q=1', upgrade: false, keepAlive: true },
      'abc',
      'end',
    ]);
    parser.close();
  });

  it('returns an error naming the problem for a malformed request', () => {
    const parser = new HTTPParser();
    parser.initialize(HTTPParser.REQUEST, parserResource(), 0, HTTPParser.kLenientNone);
    const result = parser.execute(Buffer.from('GET / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n'));
    expect(isParseError(result) && result.code).toBe('HPE_INVALID_TRANSFER_ENCODING');
    parser.close();
  });

  it('stops after a response head when told to, and the body stays with the caller', () => {
    expect(STOP_AFTER_HEAD).toBe(2);
    const reader = new ResponseHeadReader();
    reader.begin();
    const head = 'HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n';
    expect(reader.feed(Buffer.from(head.slice(0, 20)))).toBeUndefined();
    const read = reader.feed(Buffer.from(`${head.slice(20)}5\r\nhello\r\n`));
    expect(read?.headBytes).toBe(head.length - 20);
    expect(read?.head).toMatchObject({ status: 200, statusMessage: 'OK', contentType: 'text/event-stream', chunked: true, keepAlive: true });
    expect(bodyFraming(read!.head, 'POST')).toBe('chunked');
    expect(bodyFraming(read!.head, 'HEAD')).toBe('none');
    reader.close();
  });

  it('refuses a response head with both Content-Length and Transfer-Encoding', () => {
    const reader = new ResponseHeadReader();
    reader.begin();
    expect(() => reader.feed(Buffer.from('HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n'))).toThrow(/HPE_INVALID_TRANSFER_ENCODING/);
    reader.close();
  });

  it('says a body without length or chunking runs to the close, and an HTTP/1.0 answer does not keep the connection', () => {
    const reader = new ResponseHeadReader();
    reader.begin();
    const read = reader.feed(Buffer.from('HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\n'));
    expect(bodyFraming(read!.head, 'GET')).toBe('close');
    expect(read!.head.keepAlive).toBe(false);
    reader.close();
  });
});
