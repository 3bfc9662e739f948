/**
 * Whether a response's Content-Encoding names a coding other than `identity` (RFC 9110 section
 * 8.4.1; empty list elements ignored, section 5.6.1): its body is then bytes no tap or stripper
 * can read as events, only relay. Undefined (no header) is not coded.
 */
export function isCoded(contentEncoding: string | undefined): boolean {
  if (contentEncoding === undefined) return false;
  for (const coding of contentEncoding.split(',')) {
    const name = coding.trim().toLowerCase();
    if (name !== '' && name !== 'identity') return true;
  }
  return false;
}
