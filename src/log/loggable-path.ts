/**
 * Longest path a log line or span carries. A request target may be as long as the header limits
 * allow (16 KiB on HTTP/1.1, `h2_max_header_list_bytes` on HTTP/2), and a client sending such
 * targets would make every log line and span that large; the routes tokentap observes are under
 * 30 characters.
 */
export const MAX_LOGGED_PATH_LENGTH = 1024;

/** Where a path stops being a plain path: a parameter (`;jsessionid=`), a fragment, or a percent-encoded `?`. */
const HIDDEN_TAIL = /[;#]|%3f/i;

/**
 * A request path (already without its `?query`) as tokentap logs and traces it: from a `;`
 * (path parameters, where servlet containers put session ids), a `#` (a fragment, which no client
 * should send and whose content is never meant for a server) or a `%3F` (a query encoded by
 * mistake, still holding its `key=` tokens) on, it is replaced by that delimiter and `***`, as
 * redactUrl marks a query; past MAX_LOGGED_PATH_LENGTH it is cut, marked `…`. Routing still uses
 * the path as sent.
 */
export function loggablePath(path: string): string {
  const hidden = path.search(HIDDEN_TAIL);
  const shown = hidden === -1 ? path : `${path.slice(0, hidden)}${path[hidden] === '%' ? '%3F' : path[hidden]}***`;
  return shown.length > MAX_LOGGED_PATH_LENGTH ? `${shown.slice(0, MAX_LOGGED_PATH_LENGTH)}…` : shown;
}
