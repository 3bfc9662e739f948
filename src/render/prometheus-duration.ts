/**
 * Prometheus duration strings for rule windows and `for:` clauses: the largest units first, as
 * Prometheus itself prints them ("5m", "1d", "43m12s", "3s500ms"). Compound durations parse since
 * Prometheus 2.21, so this works on the 2.42 we test with.
 */
const UNITS: readonly (readonly [suffix: string, ms: number])[] = [
  ['d', 86_400_000],
  ['h', 3_600_000],
  ['m', 60_000],
  ['s', 1000],
  ['ms', 1],
];

export function formatPromDuration(ms: number): string {
  if (!Number.isInteger(ms) || ms <= 0) throw new RangeError(`a rule duration must be a positive whole number of milliseconds, got ${ms}`);
  let rest = ms;
  let text = '';
  for (const [suffix, unitMs] of UNITS) {
    const count = Math.floor(rest / unitMs);
    if (count > 0) {
      text += `${count}${suffix}`;
      rest -= count * unitMs;
    }
  }
  return text;
}
