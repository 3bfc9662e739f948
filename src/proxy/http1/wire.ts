/**
 * The heads the relay writes. Every name and value came through Node's parser (or is tokentap's
 * own), so none holds CR or LF; they are written as latin1, the encoding the parser read them in,
 * so every byte of a header goes out as it came in.
 */

const CRLF = '\r\n';

/** Appends `name: value` lines for a flat [name, value, ...] list. */
export function headerLines(headers: readonly string[]): string {
  let lines = '';
  for (let i = 0; i < headers.length; i += 2) lines += `${headers[i] as string}: ${headers[i + 1] as string}${CRLF}`;
  return lines;
}

export function requestHead(method: string, target: string, headers: readonly string[], framing: string): string {
  return `${method} ${target} HTTP/1.1${CRLF}${headerLines(headers)}${framing}${CRLF}`;
}

export function responseHead(status: number, statusMessage: string, headers: readonly string[], extra: string): string {
  return `HTTP/1.1 ${status} ${statusMessage}${CRLF}${headerLines(headers)}${extra}${CRLF}`;
}

/** A chunk frame's size line for `bytes` of data; the data and a CRLF follow it. */
export function chunkSizeLine(bytes: number): string {
  return `${bytes.toString(16)}${CRLF}`;
}

export const CHUNK_END = CRLF;
export const LAST_CHUNK = `0${CRLF}${CRLF}`;

/** A complete response the relay itself answers with (an error), with its body. */
export function simpleResponse(status: number, statusMessage: string, contentType: string, body: string, close: boolean): string {
  const connection = close ? `Connection: close${CRLF}` : '';
  return `HTTP/1.1 ${status} ${statusMessage}${CRLF}Content-Type: ${contentType}${CRLF}Content-Length: ${Buffer.byteLength(body)}${CRLF}${connection}${CRLF}${body}`;
}
