/**
 * `text` with every C0 control but the line feed, DEL and every C1 control (U+0080-U+009F, which
 * an 8-bit terminal reads as CSI, OSC...) replaced by "?": what the CLI prints from a file or a
 * network answer then cannot move the cursor, clear the screen or retitle the window, whatever a
 * name, a label or a number-shaped field held. JSON.stringify is not enough: it escapes C0 but
 * leaves DEL and C1 as they are.
 */
export function terminalText(text: string): string {
  return text.replace(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/g, '?');
}
