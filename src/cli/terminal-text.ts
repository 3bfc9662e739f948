/**
 * `text` with every C0 control but the line feed, DEL and every C1 control (U+0080-U+009F, which
 * an 8-bit terminal reads as CSI, OSC...) replaced by "?": what the CLI prints from a file or a
 * network answer then cannot move the cursor, clear the screen or retitle the window, whatever a
 * name, a label or a number-shaped field held. JSON.stringify is not enough: it escapes C0 but
 * leaves DEL and C1 as they are. So are the bidirectional controls (U+200E/F, U+202A-E,
 * U+2066-9), which reorder what is shown after them, and the line and paragraph separators
 * (U+2028/9), which some terminals break lines at.
 */
export function terminalText(text: string): string {
  return text.replace(UNPRINTABLE, '?');
}

const UNPRINTABLE = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

/** A field of a network answer printed inside a line: terminalText, and a line feed as "?" too (it would start a line of its own). */
export function fieldText(value: unknown): string {
  return terminalText(String(value)).replace(/\n/g, '?');
}
