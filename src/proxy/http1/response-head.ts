import { HTTPParser, STOP_AFTER_HEAD, isParseError, parserResource, type NativeHttpParser } from './node-http-parser.js';

/** How a response's body is delimited on the wire (RFC 9112 section 6.3). */
export type BodyFraming = 'none' | 'chunked' | 'length' | 'close';

export interface ResponseHead {
  readonly status: number;
  readonly statusMessage: string;
  /** Flat [name, value, ...] as received, original case and order. */
  readonly rawHeaders: string[];
  /** HTTP/1.1 without `Connection: close`: the connection may carry the next request. */
  readonly keepAlive: boolean;
  readonly contentType: string | undefined;
  /** Every Content-Encoding line, joined with ", " (RFC 9110 section 5.3), or undefined: the taps read no coded body. */
  readonly contentEncoding: string | undefined;
  /** The Content-Length value (validated by the parser), or -1. */
  readonly contentLength: number;
  readonly chunked: boolean;
  /** A Transfer-Encoding header is present (chunked or not). */
  readonly transferEncoded: boolean;
  /**
   * Why tokentap cannot frame this response for the client, or undefined: a transfer coding other
   * than chunked alone (tokentap would have to forward a coding it does not decode, or drop it and
   * alter the body), an empty Transfer-Encoding (llhttp lets it through beside a Content-Length,
   * and the body's end is then unknowable), or Transfer-Encoding on HTTP/1.0 (RFC 9112 section 6.1:
   * faulty framing).
   */
  readonly framingProblem: string | undefined;
}

export class ResponseHeadError extends Error {
  constructor(readonly code: string, message: string) {
    super(message);
  }
}

/**
 * Reads an upstream response head with Node's parser and stops right after it, leaving the body's
 * bytes to the caller. One reader per upstream connection, begun again for each response.
 */
export class ResponseHeadReader {
  private readonly parser: NativeHttpParser = new HTTPParser();
  private flushedHeaders: string[] = [];
  private head: ResponseHead | undefined;

  constructor() {
    this.parser[HTTPParser.kOnHeaders] = (headers: string[]) => {
      // Heads with many fields reach JavaScript in parts: kept until the head completes.
      for (const value of headers) this.flushedHeaders.push(value);
    };
    this.parser[HTTPParser.kOnHeadersComplete] = (
      _major: number,
      minor: number,
      headers: string[] | undefined,
      _method: unknown,
      _url: unknown,
      status: number,
      statusMessage: string,
      _upgrade: boolean,
      keepAlive: boolean,
    ) => {
      let rawHeaders = headers ?? [];
      if (this.flushedHeaders.length > 0) {
        rawHeaders = this.flushedHeaders.concat(rawHeaders);
        this.flushedHeaders = [];
      }
      this.head = describe(status, statusMessage, rawHeaders, keepAlive && minor >= 1, minor);
      return STOP_AFTER_HEAD;
    };
    this.parser[HTTPParser.kOnBody] = () => {};
    this.parser[HTTPParser.kOnMessageComplete] = () => {};
  }

  /** Starts reading a new head (each response, and again after an interim 1xx one). */
  begin(): void {
    this.parser.initialize(HTTPParser.RESPONSE, parserResource(), 0, HTTPParser.kLenientNone);
    this.flushedHeaders = [];
    this.head = undefined;
  }

  /**
   * Feeds bytes of the head. Returns the head and how many of `buffer`'s bytes it took, or
   * undefined when the head continues in the next buffer. Throws ResponseHeadError on a malformed head.
   */
  feed(buffer: Buffer): { head: ResponseHead; headBytes: number } | undefined {
    const result = this.parser.execute(buffer);
    if (isParseError(result)) throw new ResponseHeadError(result.code, `${result.code}: ${result.reason ?? result.message}`);
    if (this.head === undefined) return undefined;
    return { head: this.head, headBytes: result };
  }

  close(): void {
    this.parser.close();
  }
}

function describe(status: number, statusMessage: string, rawHeaders: string[], keepAlive: boolean, minor: number): ResponseHead {
  let contentType: string | undefined;
  let contentLength = -1;
  let transferEncoding: string | undefined;
  let contentEncoding: string | undefined;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = (rawHeaders[i] as string).toLowerCase();
    if (name === 'content-type') contentType ??= rawHeaders[i + 1];
    else if (name === 'content-length') contentLength = Number(rawHeaders[i + 1]);
    else if (name === 'transfer-encoding') transferEncoding = transferEncoding === undefined ? rawHeaders[i + 1] : `${transferEncoding}, ${rawHeaders[i + 1]}`;
    else if (name === 'content-encoding') contentEncoding = contentEncoding === undefined ? rawHeaders[i + 1] : `${contentEncoding}, ${rawHeaders[i + 1]}`;
  }
  let chunked = false;
  let framingProblem: string | undefined;
  // As for requests (request-rules.ts): the length written to the client must be the one llhttp counts.
  if (contentLength > Number.MAX_SAFE_INTEGER) framingProblem = 'Content-Length larger than 2^53 - 1';
  if (transferEncoding !== undefined) {
    // Empty list elements are ignored (RFC 9110 section 5.6.1).
    const codings = transferEncoding.toLowerCase().split(',').map((coding) => coding.trim()).filter((coding) => coding !== '');
    chunked = codings.length === 1 && codings[0] === 'chunked';
    if (codings.length === 0) framingProblem = 'Transfer-Encoding names no transfer coding';
    else if (!chunked) framingProblem = `transfer coding "${shown(codings.join(', '))}" (tokentap relays chunked alone)`;
    else if (minor === 0) framingProblem = 'Transfer-Encoding in an HTTP/1.0 response';
  }
  return { status, statusMessage, rawHeaders, keepAlive, contentType, contentEncoding, contentLength, chunked, transferEncoded: transferEncoding !== undefined, framingProblem };
}

/** The most of an upstream's header value a problem quotes. */
const MAX_QUOTED_CHARS = 64;

/**
 * An upstream's header value as a problem quotes it (the problem reaches the request's log line):
 * llhttp passes bytes above 0x7F in a response's header values, read as Latin-1, so C1 controls
 * (U+0080-U+009F: CSI, NEL, which some log shippers take for a line end) become `?`; at most
 * MAX_QUOTED_CHARS characters, the rest marked `…`.
 */
function shown(value: string): string {
  const printable = value.replace(/[\u0000-\u001f\u007f-\u009f]/g, '?');
  return printable.length > MAX_QUOTED_CHARS ? `${printable.slice(0, MAX_QUOTED_CHARS)}…` : printable;
}

/** How the body of `head`, answering a `method` request, is delimited. */
export function bodyFraming(head: ResponseHead, method: string): BodyFraming {
  const status = head.status;
  if (method === 'HEAD' || (status >= 100 && status < 200) || status === 204 || status === 304) return 'none';
  // A head with framingProblem never gets here (the exchange answers 502 first).
  if (head.chunked) return 'chunked';
  if (head.contentLength >= 0) return head.contentLength === 0 ? 'none' : 'length';
  return 'close';
}
