/**
 * Headers that describe one connection, not the message (RFC 9110 section 7.6.1): a proxy must not
 * forward them, plus any header the `Connection` header names. Everything else passes unchanged,
 * in its original order and case.
 */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade']);

/** Filters Node's flat `rawHeaders` ([name, value, name, value...]) into a new flat list. */
export function endToEndHeaders(rawHeaders: readonly string[]): string[] {
  let named: Set<string> | undefined;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    if ((rawHeaders[i] as string).toLowerCase() === 'connection') {
      named ??= new Set();
      for (const token of (rawHeaders[i + 1] as string).split(',')) named.add(token.trim().toLowerCase());
    }
  }
  const kept: string[] = [];
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = (rawHeaders[i] as string).toLowerCase();
    if (HOP_BY_HOP.has(name) || named?.has(name)) continue;
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
