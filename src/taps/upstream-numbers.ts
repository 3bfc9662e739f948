import type { TapContext } from './tap.js';

/**
 * Every number a tap takes from an upstream's response (token counts, engine durations) enters
 * through this module, and only inside the plausible range of its kind. A value outside it is
 * dropped, as if the upstream had not sent it, and counted once as the tap problem
 * `implausible_value` (`tokentap_tap_errors_total{reason="implausible_value"}`).
 *
 * Why: these numbers are added into counters and histogram sums that live for the process's
 * lifetime. One `1.7e308` from a broken or hostile upstream turns a sum into `+Inf` for good; one
 * `1e300` added to `tokentap_tokens_total` freezes it (every later `+ 30` is lost to rounding), and
 * a negative count makes a counter go down. The upper bounds are far above anything a real request
 * reaches and far below where a running sum loses whole units: at 10^7 tokens per request a counter
 * stays exact (below 2^53, about 9·10^15) for 9·10^8 such requests.
 *
 * | kind | accepted | why this bound |
 * |---|---|---|
 * | token count (usage, cumulative per-chunk counts) | integer, 0 ≤ n ≤ 10^7 | the largest context windows served today are 10^7 tokens (prompt and output together) |
 * | cached input tokens (prefix-cache hits) | a token count, and at most the input tokens of the same report | the cache serves part of the prompt, never more than all of it |
 * | duration (queue, load, prefill, decode, total) | finite, 0 ≤ d ≤ 1 day | a request that waited or ran a day is not a latency sample but a broken clock; 1 day is 8.64·10^7 ms |
 * | tokens in one content event (growth of a cumulative count, or content choices of one event) | 1 ≤ n ≤ 1024 | speculative decoding and stream intervals put a few to a few dozen tokens in one chunk; each token is one per-token ITL sample, so without this bound one 100-byte event could cost 10^7 histogram samples (seconds of CPU through the OTel SDK) |
 *
 * Absent values and values of another JSON type (null, a string) are not numbers the upstream
 * claimed and are skipped without a count, as before; a number that is not an integer where a count
 * is expected, negative, or beyond the bound is counted. JSON has no Infinity or NaN, but a literal
 * such as `1e400` parses to Infinity: it is beyond every bound.
 */
export const MAX_TOKENS_PER_REQUEST = 10_000_000;
export const MAX_DURATION_MS = 24 * 60 * 60 * 1000;
export const MAX_TOKENS_PER_EVENT = 1024;

/** A token count as the upstream reported it, or undefined when absent, not a number, or implausible (counted). */
export function tokenCount(value: unknown, context: TapContext): number | undefined {
  if (typeof value !== 'number') return undefined;
  if (Number.isInteger(value) && value >= 0 && value <= MAX_TOKENS_PER_REQUEST) return value;
  context.problem('implausible_value');
  return undefined;
}

/**
 * The tokens one content event carried, from the `growth` of a cumulative count since the previous
 * content event: the growth when plausible, else `fallback` (what the event counts without a
 * cumulative count), the implausible growth counted.
 */
export function eventTokens(growth: number, fallback: number, context: TapContext): number {
  if (growth <= MAX_TOKENS_PER_EVENT) return growth;
  context.problem('implausible_value');
  return fallback;
}

/**
 * A duration the upstream reported, in milliseconds (`unitMs`: milliseconds per reported unit, 1e-6
 * for Ollama's nanoseconds), or undefined when absent, not a number, or implausible (counted).
 */
export function durationMs(value: unknown, unitMs: number, context: TapContext): number | undefined {
  if (typeof value !== 'number') return undefined;
  const ms = value * unitMs;
  if (ms >= 0 && ms <= MAX_DURATION_MS) return ms;
  context.problem('implausible_value');
  return undefined;
}

/**
 * Prompt tokens served from the prefix cache, as a token count no larger than `inputTokens` (the
 * prompt of the same report, when it gave one): more than the whole prompt is no hit count but a
 * broken report, dropped and counted like any implausible number.
 */
export function cachedTokenCount(value: unknown, inputTokens: number | undefined, context: TapContext): number | undefined {
  const cached = tokenCount(value, context);
  if (cached === undefined || inputTokens === undefined || cached <= inputTokens) return cached;
  context.problem('implausible_value');
  return undefined;
}

/** `details.cached_tokens` of an OpenAI-format `prompt_tokens_details` or `input_tokens_details`, bounded as cachedTokenCount. */
export function detailsCachedTokens(details: unknown, inputTokens: number | undefined, context: TapContext): number | undefined {
  if (details === null || typeof details !== 'object') return undefined;
  return cachedTokenCount((details as { cached_tokens?: unknown }).cached_tokens, inputTokens, context);
}
