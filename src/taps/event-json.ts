import type { TapContext } from './tap.js';

/**
 * One event's JSON payload as an object, or undefined after counting it as `malformed_event`:
 * a tap skips what it cannot read and goes on with the next event, never throwing into the stream.
 */
export function parseEventObject<T extends object>(text: string, context: TapContext): T | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    context.problem('malformed_event');
    return undefined;
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    context.problem('malformed_event');
    return undefined;
  }
  return value as T;
}

export function nonEmptyString(value: unknown): boolean {
  return typeof value === 'string' && value.length > 0;
}

/** Whether `text` parses as JSON at all (of any type): for the rare event parseEventObject refused, never per token. */
export function isJsonText(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}
