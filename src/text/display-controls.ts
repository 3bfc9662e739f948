/**
 * Characters that change how the text around them is shown: the C0 and C1 controls and DEL (ESC
 * starts a terminal sequence, CR rewrites a line), the bidirectional controls (U+061C, U+200E/F,
 * U+202A-E, U+2066-9: a right-to-left override shows what follows reversed, "a\u202Egnp.evil"
 * reads "alive.png") and the line and paragraph separators (U+2028/9). No model name, GPU label or
 * other name tokentap shows holds one legitimately.
 */
const DISPLAY_CONTROL_RANGES = '\\u0000-\\u001f\\u007f-\\u009f\\u061c\\u200e\\u200f\\u2028\\u2029\\u202a-\\u202e\\u2066-\\u2069';

/** Tests for one display control. */
export const DISPLAY_CONTROL = new RegExp(`[${DISPLAY_CONTROL_RANGES}]`, 'u');

/** Every display control, for replacing. */
export const DISPLAY_CONTROLS = new RegExp(`[${DISPLAY_CONTROL_RANGES}]`, 'gu');
