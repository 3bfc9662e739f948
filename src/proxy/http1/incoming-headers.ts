import type { IncomingHttpHeaders } from 'node:http';

/** Fields whose repeats Node drops (the first one counts), as node:http's IncomingMessage does. */
const SINGLE_VALUED = new Set([
  'age', 'authorization', 'content-length', 'content-type', 'etag', 'expires', 'from', 'host', 'if-modified-since',
  'if-unmodified-since', 'last-modified', 'location', 'max-forwards', 'proxy-authorization', 'referer', 'retry-after',
  'server', 'user-agent',
]);

/**
 * The request's headers as node:http presents them (lower-case names; repeats joined with ", ",
 * cookies with "; ", set-cookie kept as a list, single-valued fields first-wins), so workload
 * matching and tracing read the same values they did when the proxy ran on node:http.
 */
export function incomingHeaders(rawHeaders: readonly string[]): IncomingHttpHeaders {
  const headers: Record<string, string | string[]> = {};
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = (rawHeaders[i] as string).toLowerCase();
    const value = rawHeaders[i + 1] as string;
    const before = headers[name];
    if (before === undefined) headers[name] = name === 'set-cookie' ? [value] : value;
    else if (name === 'set-cookie') (before as string[]).push(value);
    else if (!SINGLE_VALUED.has(name)) headers[name] = `${before as string}${name === 'cookie' ? '; ' : ', '}${value}`;
  }
  return headers;
}
