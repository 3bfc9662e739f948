import type { Workload } from '../config/load.js';

/**
 * The multiwindow, multi-burn-rate alerting policy of the Google SRE Workbook, chapter 5 ("Alerting
 * on SLOs", table 5-8), for a 30-day SLO period: an alert fires when both the long and the short
 * window burn the error budget faster than `factor` times the rate that would use it up in exactly
 * 30 days. The long window gives significance, the short one makes the alert resolve soon after the
 * burn stops.
 *
 *   page:   1h and 5m above 14.4x (2 % of the budget in an hour), or 6h and 30m above 6x (5 % in 6 hours)
 *   ticket: 1d and 2h above 3x (10 % in a day), or 3d and 6h above 1x (10 % in 3 days)
 */

/** The SLI windows recorded for every workload and SLO (`tokentap:slo_error_ratio:rate<name>`). */
export const SLI_WINDOWS = [
  { name: '5m', ms: 5 * 60_000 },
  { name: '30m', ms: 30 * 60_000 },
  { name: '1h', ms: 3_600_000 },
  { name: '2h', ms: 2 * 3_600_000 },
  { name: '6h', ms: 6 * 3_600_000 },
  { name: '1d', ms: 86_400_000 },
  { name: '3d', ms: 3 * 86_400_000 },
] as const;

export type SliWindowName = (typeof SLI_WINDOWS)[number]['name'];

export interface BurnRateCondition {
  readonly long: SliWindowName;
  readonly short: SliWindowName;
  /** Multiple of the budget rate (1 - objective) both windows must exceed. */
  readonly factor: number;
}

export interface BurnRatePolicy {
  readonly severity: 'page' | 'ticket';
  /** The alert fires when any one condition holds. */
  readonly conditions: readonly BurnRateCondition[];
}

export const BURN_RATE_POLICIES: readonly BurnRatePolicy[] = [
  {
    severity: 'page',
    conditions: [
      { long: '1h', short: '5m', factor: 14.4 },
      { long: '6h', short: '30m', factor: 6 },
    ],
  },
  {
    severity: 'ticket',
    conditions: [
      { long: '1d', short: '2h', factor: 3 },
      { long: '3d', short: '6h', factor: 1 },
    ],
  },
];

export function windowMs(name: SliWindowName): number {
  return (SLI_WINDOWS.find((w) => w.name === name) as (typeof SLI_WINDOWS)[number]).ms;
}

/**
 * A burn-rate condition needs a bad share above `factor × (1 − objective)`; at or above 100 % it can
 * never hold, so a low objective silently loses its fastest pages (0.93 and below: no 14.4x page;
 * 0.83 and below: no page at all). Valid, but worth saying before it is relied on: `check` and
 * `render` print one warning per such condition, `FILE: warning: ...`.
 */
export function unreachableBurnConditions(workloads: readonly Workload[], file: string | undefined): string[] {
  const where = file === undefined ? '' : `${file}: `;
  const warnings: string[] = [];
  for (const workload of workloads) {
    const slo = workload.slo;
    if (slo === undefined) continue;
    for (const policy of BURN_RATE_POLICIES) {
      for (const condition of policy.conditions) {
        const needed = condition.factor * (1 - slo.objective);
        if (needed >= 1) {
          warnings.push(
            `${where}warning: workload "${workload.name}": objective ${slo.objective} makes the ${policy.severity} condition ` +
              `"${condition.long} and ${condition.short} above ${condition.factor}x the budget" unreachable (it needs more than ${Math.round(needed * 100)} % bad events)`,
          );
        }
      }
    }
  }
  return warnings;
}
