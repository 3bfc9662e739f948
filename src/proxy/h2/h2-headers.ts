import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http2';

/**
 * Connection-specific fields (RFC 9113 section 8.2.2): an HTTP/2 message that carries one is
 * malformed, so none is forwarded on either side, whatever the peer sent. `host` is dropped too:
 * the request's authority travels in `:authority` (section 8.3.1), rebuilt below. `content-length`
 * is dropped: HTTP/2 frames a body by END_STREAM, and tokentap frames what it forwards (DESIGN.md
 * section 10), so a length the peer declared is never copied through to disagree with the bytes.
 */
const NOT_FORWARDED: ReadonlySet<string> = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade', 'http2-settings', 'host', 'content-length']);

/**
 * The end-to-end fields of a request or response, as a flat list (name, value, ...) from Node's raw
 * header list, in order: pseudo-header fields are left out (they are rebuilt, never copied) and so
 * are the connection-specific ones; `te` passes only as `trailers`, the one value HTTP/2 allows
 * (section 8.2.2), which gRPC requires end to end.
 */
export function endToEndFields(rawHeaders: readonly string[]): string[] {
  const kept: string[] = [];
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = (rawHeaders[i] as string).toLowerCase();
    if (name.startsWith(':') || NOT_FORWARDED.has(name)) continue;
    const value = rawHeaders[i + 1] as string;
    if (name === 'te' && value.trim().toLowerCase() !== 'trailers') continue;
    kept.push(name, value);
  }
  return kept;
}

/** A flat field list as node:http2 takes it: one entry per name, repeated fields as arrays, in order. */
export function fieldObject(fields: readonly string[], into: OutgoingHttpHeaders = {}): OutgoingHttpHeaders {
  for (let i = 0; i < fields.length; i += 2) {
    const name = fields[i] as string;
    const value = fields[i + 1] as string;
    const previous = into[name];
    if (previous === undefined) into[name] = value;
    else if (Array.isArray(previous)) previous.push(value);
    else into[name] = [previous as string, value];
  }
  return into;
}

/** The request that goes upstream: its pseudo-header fields rebuilt from the client's, then the end-to-end fields. */
export function upstreamRequestHeaders(client: IncomingHttpHeaders, fields: readonly string[]): OutgoingHttpHeaders {
  const headers: OutgoingHttpHeaders = {
    ':method': client[':method'],
    ':scheme': 'http',
    ':path': client[':path'],
    ':authority': client[':authority'] ?? client.host,
  };
  return fieldObject(fields, headers);
}

/** Node's trailer or header object as a flat list, for endToEndFields. */
export function flatFields(headers: IncomingHttpHeaders): string[] {
  const flat: string[] = [];
  for (const name of Object.keys(headers)) {
    const value = headers[name];
    if (value === undefined) continue;
    if (Array.isArray(value)) for (const one of value) flat.push(name, one);
    else flat.push(name, String(value));
  }
  return flat;
}
