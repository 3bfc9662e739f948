const UNIT_MS: Record<string, bigint> = { ms: 1n, s: 1000n, m: 60_000n, h: 3_600_000n };
const DURATION = /^(\d+)(?:\.(\d+))?(ms|s|m|h)$/;

/** Parses "200ms", "3s", "1.5m", "2h" into milliseconds; undefined when it is not a duration. */
export function parseDurationMs(text: string): number | undefined {
  return parseDuration(text, 0);
}

/**
 * Parses a duration into seconds, the unit of histogram boundaries and SLO thresholds:
 * "4.2ms" is 0.0042, the number the same decimal written in seconds gives.
 */
export function parseDurationSeconds(text: string): number | undefined {
  return parseDuration(text, 3);
}

/**
 * The duration in milliseconds divided by 10^`shift`, rounded once: the nearest number to the
 * decimal the text means. Multiplying and dividing floats rounds at each step (4.2 / 1000 is
 * 0.004200000000000001, 4.1 * 60 is 245.99999999999997), and a threshold off by one ulp becomes a
 * bucket bound `le="245.99999999999997"` that no rule's or user's `le="246"` selects.
 */
function parseDuration(text: string, shift: number): number | undefined {
  const match = DURATION.exec(text.trim());
  if (!match) return undefined;
  const fraction = match[2] ?? '';
  const scaled = BigInt(`${match[1]}${fraction}`) * (UNIT_MS[match[3] as string] as bigint);
  return Number(`${scaled}e-${fraction.length + shift}`);
}
