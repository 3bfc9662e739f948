/**
 * What the relay decides from a request head that Node's parser (strict llhttp) accepted, before a
 * byte of it goes upstream: how its body is framed, which target and Host go upstream, and which
 * heads are refused. llhttp already refuses Content-Length with Transfer-Encoding, a request
 * Transfer-Encoding whose last coding is not chunked, duplicate or non-numeric Content-Length,
 * obs-fold, bare CR/LF and bad header bytes (test/security/ pins each); it accepts, and this refuses,
 * what nginx refuses on top: no Host or two, `*` outside OPTIONS, HTTP/0.9 and 2.0 text, an empty
 * Transfer-Encoding beside a Content-Length, transfer codings tokentap does not implement.
 *
 * Runs once per request head; nothing here is per chunk.
 */

export type RequestBodyFraming = 'none' | 'length' | 'chunked';

export interface AcceptedRequest {
  readonly ok: true;
  readonly framing: RequestBodyFraming;
  /** The Content-Length llhttp validated (framing 'length'), else -1. */
  readonly contentLength: number;
  /** What goes upstream as the request target: origin-form (path and query), or `*` for OPTIONS. */
  readonly target: string;
  /**
   * The Host to send upstream in place of the client's: the authority of an absolute-form target
   * (RFC 9112 section 3.2.2: it wins over the Host field), or undefined to keep the client's.
   */
  readonly host: string | undefined;
  /** The client sent no Host field (HTTP/1.0): the upstream gets one (RFC 9112 section 3.2, a client MUST send it). */
  readonly hostMissing: boolean;
}

export interface RefusedRequest {
  readonly ok: false;
  readonly status: 400 | 501 | 505;
  /** For the client and the log line: names the problem, never echoes the target (it may hold credentials). */
  readonly reason: string;
}

/** The path of a request target, without query, userinfo or authority: what is logged, routed and matched. */
export function targetPath(target: string): string {
  let path = target;
  const scheme = /^[a-z][a-z0-9+.-]*:\/\//i.exec(path);
  if (scheme !== null) {
    const slash = path.indexOf('/', scheme[0].length);
    path = slash === -1 ? '/' : path.slice(slash);
  }
  const query = path.indexOf('?');
  return query === -1 ? path : path.slice(0, query);
}

/** RFC 3986 section 3.2.2 host (reg-name, IPv4, or bracketed IP literal), then an optional port. */
const AUTHORITY = /^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9\-._~!$&'()*+;=%]*)(?::[0-9]*)?$/;
const ABSOLUTE_FORM = /^(https?):\/\/([^/?#]*)([^#]*)$/i;

export function checkRequestHead(major: number, minor: number, method: string, target: string, rawHeaders: readonly string[]): AcceptedRequest | RefusedRequest {
  // llhttp reads `GET /` (no version) as 0.9 and parses any digit pair; a 0.9 client cannot read a
  // status line, and text HTTP/2 is not HTTP/2 (RFC 9112 section 2.3): as nginx, 400 and 505.
  if (major === 0) return refused(400, 'HTTP/0.9 requests are not supported');
  if (major !== 1) return refused(505, `HTTP/${major}.${minor} is not supported`);
  let hosts = 0;
  let hostValue = '';
  let transferEncoding: string | undefined;
  let contentLength = -1;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = (rawHeaders[i] as string).toLowerCase();
    if (name === 'host') {
      hosts++;
      hostValue = rawHeaders[i + 1] as string;
    } else if (name === 'transfer-encoding') {
      transferEncoding = transferEncoding === undefined ? (rawHeaders[i + 1] as string) : `${transferEncoding}, ${rawHeaders[i + 1] as string}`;
    } else if (name === 'content-length') {
      // llhttp allows one Content-Length of digits only (a repeat is HPE_UNEXPECTED_CONTENT_LENGTH).
      contentLength = Number(rawHeaders[i + 1]);
    }
  }
  // RFC 9112 section 3.2: a server MUST respond 400 to an HTTP/1.1 request without Host, and to
  // more than one Host field.
  if (hosts > 1) return refused(400, 'more than one Host header');
  if (hosts === 0 && minor >= 1) return refused(400, 'no Host header in an HTTP/1.1 request');
  if (hosts === 1 && !AUTHORITY.test(hostValue)) return refused(400, 'the Host header is not a host[:port]');
  // llhttp takes any length below 2^64; a Number holds integers exactly only to 2^53, and the length
  // tokentap writes upstream must be the one llhttp counts (9007199254740993 went upstream as ...992).
  if (contentLength > Number.MAX_SAFE_INTEGER) return refused(400, 'Content-Length is larger than 2^53 - 1');

  let forwardTarget = target;
  let host: string | undefined;
  // RFC 9112 section 3.2: a request target carries no fragment (section 3: an invalid request line
  // SHOULD get 400). Servers differ on it: Node's takes `#x` as part of the path (a 404 from any
  // route), uvicorn's parser drops it and serves the route, where tokentap's routes and workload
  // matchers would not see it: refused, whatever the form (the absolute form's pattern excludes it).
  if (target.includes('#')) return refused(400, 'the request target carries a fragment (#...), which clients do not send');
  if (target === '*') {
    // RFC 9112 section 3.2.4: the asterisk form is for OPTIONS only.
    if (method !== 'OPTIONS') return refused(400, `the target * is only valid for OPTIONS, not ${method}`);
  } else if (target.charCodeAt(0) !== 0x2f /* '/' */) {
    const absolute = ABSOLUTE_FORM.exec(target);
    if (absolute === null) return refused(400, 'the request target is neither a path nor an http(s) URL');
    const authority = absolute[2] as string;
    // RFC 9110 section 4.2.4: userinfo in an http(s) URI SHOULD be treated as an error; nginx
    // answers 400. Refused, and never logged (the reason does not quote the target).
    if (authority.includes('@')) return refused(400, 'the request target carries userinfo (user:password@)');
    if (authority === '' || !AUTHORITY.test(authority)) return refused(400, 'the request target has no valid host');
    const rest = absolute[3] as string;
    forwardTarget = rest === '' ? '/' : rest.charCodeAt(0) === 0x3f /* '?' */ ? `/${rest}` : rest;
    host = authority;
  }

  let framing: RequestBodyFraming = contentLength >= 0 ? 'length' : 'none';
  if (transferEncoding !== undefined) {
    // RFC 9112 section 6.1: an HTTP/1.0 message with Transfer-Encoding has faulty framing.
    if (minor === 0) return refused(400, 'Transfer-Encoding in an HTTP/1.0 request');
    // Empty list elements are ignored (RFC 9110 section 5.6.1).
    const codings = transferEncoding.split(',').map((coding) => coding.trim().toLowerCase()).filter((coding) => coding !== '');
    // RFC 9112 section 6.3 (4): chunked not last (here: no coding at all, which llhttp lets through
    // beside a Content-Length) means the length cannot be known: 400, and close.
    if (codings.length === 0) return refused(400, 'Transfer-Encoding names no transfer coding');
    if (codings[codings.length - 1] !== 'chunked') return refused(400, 'Transfer-Encoding does not end with chunked');
    // RFC 9112 section 6.1: a coding the server does not understand SHOULD get 501 (nginx does so
    // for `gzip, chunked`). Forwarding would hand the upstream a coding inference servers do not
    // decode; dropping it would alter the body.
    if (codings.length > 1) return refused(501, `transfer coding "${codings.slice(0, -1).join(', ')}" is not supported (only chunked)`);
    framing = 'chunked';
    contentLength = -1;
  }
  return { ok: true, framing, contentLength, target: forwardTarget, host, hostMissing: hosts === 0 };
}

function refused(status: 400 | 501 | 505, reason: string): RefusedRequest {
  return { ok: false, status, reason };
}
