/**
 * A string as a JSON value, exactly as pino 10.4.0 writes a string field (lib/tools.js `asString`),
 * so that a line built here has the bytes pino would write. pino is not JSON.stringify everywhere:
 * before Node 25, a string of at most 100 characters with no control character below 0x20 only
 * gets `"` and `\` escaped, and a lone surrogate (U+D800 to U+DFFF unpaired) is left raw (the
 * destination's UTF-8 encoding then writes U+FFFD), where JSON.stringify writes `\ud800`. Longer
 * strings, strings holding a control character, and every string from Node 25 on go through
 * JSON.stringify, which escapes every control character below 0x20, so a field never breaks the line.
 */
export const jsonString: (value: string) => string = Number(process.versions.node.split('.')[0]) >= 25 ? (value) => JSON.stringify(value) : shortJsonString;

const QUOTE = 34;
const BACKSLASH = 92;
const FIRST_PRINTABLE = 32;
const LONGEST_SHORT_STRING = 100;

/** pino's `_asString`, the same scan: up to the first control character, escaping quotes and backslashes on the way. */
function shortJsonString(value: string): string {
  const length = value.length;
  if (length > LONGEST_SHORT_STRING) return JSON.stringify(value);
  let escaped = '';
  let last = 0;
  let point = 255;
  for (let i = 0; i < length && point >= FIRST_PRINTABLE; i++) {
    point = value.charCodeAt(i);
    if (point === QUOTE || point === BACKSLASH) {
      escaped += value.slice(last, i) + '\\';
      last = i;
    }
  }
  if (point < FIRST_PRINTABLE) return JSON.stringify(value);
  return '"' + escaped + value.slice(last) + '"';
}
