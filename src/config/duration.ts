const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
const DURATION = /^(\d+(?:\.\d+)?)(ms|s|m|h)$/;

/** Parses "200ms", "3s", "1.5m", "2h" into milliseconds; undefined when it is not a duration. */
export function parseDurationMs(text: string): number | undefined {
  const match = DURATION.exec(text.trim());
  if (!match) return undefined;
  return Number(match[1]) * (UNIT_MS[match[2] as string] as number);
}

/** The inverse, for messages and rendered artefacts: the shortest exact form ("200ms", "3s"). */
export function formatDurationMs(ms: number): string {
  if (ms >= 3_600_000 && ms % 3_600_000 === 0) return `${ms / 3_600_000}h`;
  if (ms >= 60_000 && ms % 60_000 === 0) return `${ms / 60_000}m`;
  if (ms >= 1000 && ms % 1000 === 0) return `${ms / 1000}s`;
  return `${ms}ms`;
}
