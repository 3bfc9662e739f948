/** An export asked of a window that holds nothing to export; the admin route answers 404 with its message. */
export class ExportRefused extends Error {}

/**
 * `value` with at most `digits` decimals and no trailing zeros, never in exponent notation: the
 * tools parse these with regular expressions (AIPerf sequence_distribution_parser.py: `\d+(?:\.\d+)?`)
 * or as command-line floats.
 */
export function formatDecimal(value: number, digits: number): string {
  const fixed = value.toFixed(digits);
  return fixed.includes('.') ? fixed.replace(/\.?0+$/, '') : fixed;
}
