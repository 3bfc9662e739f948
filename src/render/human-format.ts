/** Numbers in alert texts as people write them. */

/** A threshold in seconds as people write it: "200ms", "3s", "1.5s". */
export function humanSeconds(seconds: number): string {
  return seconds < 1 ? `${Number((seconds * 1000).toPrecision(12))}ms` : `${Number(seconds.toPrecision(12))}s`;
}

/** An objective as a percentage: 0.99 -> "99%", 0.995 -> "99.5%". */
export function percent(ratio: number): string {
  return `${Number((ratio * 100).toPrecision(12))}%`;
}
