/**
 * Headers that describe one connection, not the message (RFC 9110 section 7.6.1): a proxy must not
 * forward them, plus any header the `Connection` header names. Everything else passes unchanged,
 * in its original order and case.
 */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade']);

/**
 * Fields a `Connection` header cannot take away. RFC 9110 section 7.6.1 lets a sender nominate only
 * fields about the connection, and RFC 9112 section 6 makes Content-Length and Transfer-Encoding
 * the message's framing: a relay that drops them while still forwarding the body lets the client
 * choose where the upstream thinks the next request starts (issue 13: `Connection: Content-Length`
 * smuggled a request and took the next client's credentials). Host routes the message (RFC 9112
 * section 3.2). The tokens are ignored, not refused, as nginx and Envoy ignore them: nginx 1.22
 * forwards `Connection: Content-Length` requests with their length (measured), and tokentap writes
 * the framing itself anyway (`Content-Length` below).
 */
const NOT_NOMINABLE = new Set(['content-length', 'transfer-encoding', 'host']);

/**
 * Filters Node's flat `rawHeaders` ([name, value, name, value...]) into the list tokentap forwards:
 * end-to-end fields only, and without Content-Length, which tokentap writes itself from its own
 * framing decision (the value its parser validated), never copied through.
 */
export function endToEndHeaders(rawHeaders: readonly string[]): string[] {
  let named: Set<string> | undefined;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    if ((rawHeaders[i] as string).toLowerCase() === 'connection') {
      named ??= new Set();
      for (const token of (rawHeaders[i + 1] as string).split(',')) {
        const nominated = token.trim().toLowerCase();
        if (!NOT_NOMINABLE.has(nominated)) named.add(nominated);
      }
    }
  }
  const kept: string[] = [];
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = (rawHeaders[i] as string).toLowerCase();
    if (HOP_BY_HOP.has(name) || name === 'content-length' || named?.has(name)) continue;
    kept.push(rawHeaders[i] as string, rawHeaders[i + 1] as string);
  }
  return kept;
}

/** A flat header list without the fields named `lowerCaseName` (any case), everything else in order. */
export function withoutHeader(headers: readonly string[], lowerCaseName: string): string[] {
  const kept: string[] = [];
  for (let i = 0; i < headers.length; i += 2) {
    if ((headers[i] as string).toLowerCase() !== lowerCaseName) kept.push(headers[i] as string, headers[i + 1] as string);
  }
  return kept;
}

/** `headers` with Host set to `host`: in the place of the first Host field (later ones dropped), or first when there is none. */
export function withHost(headers: readonly string[], host: string): string[] {
  const kept: string[] = [];
  let placed = false;
  for (let i = 0; i < headers.length; i += 2) {
    if ((headers[i] as string).toLowerCase() !== 'host') kept.push(headers[i] as string, headers[i + 1] as string);
    else if (!placed) {
      kept.push(headers[i] as string, host);
      placed = true;
    }
  }
  if (!placed) kept.unshift('Host', host);
  return kept;
}
