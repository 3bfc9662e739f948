/**
 * A string as a JSON value, with the bytes pino 10.4.0 writes for a string field (its
 * lib/tools.js `asString`), so that a line built here is the line pino would write. pino is not
 * JSON.stringify everywhere: before Node 25, a string of at most 100 characters without a control
 * character (below 0x20) only has `"` and `\` escaped, so a lone surrogate (U+D800 to U+DFFF
 * unpaired) stays raw (the destination's UTF-8 encoding then writes U+FFFD), where JSON.stringify
 * writes `\ud800`. Longer strings, strings holding a control character, and every string from
 * Node 25 on go through JSON.stringify, which escapes every control character, so a field never
 * breaks the line. test/unit/log/request-line.test.ts compares the bytes with pino's own.
 */
export const jsonString: (value: string) => string = Number(process.versions.node.split('.')[0]) >= 25 ? (value) => JSON.stringify(value) : shortJsonString;

const LONGEST_SHORT_STRING = 100;
const CONTROL_CHARACTER = /[\u0000-\u001f]/;
const QUOTE_OR_BACKSLASH = /["\\]/g;

function shortJsonString(value: string): string {
  if (value.length > LONGEST_SHORT_STRING || CONTROL_CHARACTER.test(value)) return JSON.stringify(value);
  return `"${value.replace(QUOTE_OR_BACKSLASH, '\\$&')}"`;
}
