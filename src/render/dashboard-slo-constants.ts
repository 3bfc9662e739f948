import type { SloKind, Workload } from '../config/load.js';
import { LABEL, promNumber, quote } from './promql.js';

/**
 * The configuration's per-workload SLO numbers as PromQL constants, for the panels of the rows
 * Grafana repeats per workload: one panel serves every workload, so a workload's own objective or
 * threshold cannot be a literal in it. Each is a `{workload}` series per workload that has the
 * number (`label_replace(vector(0.2), "workload", "chat", "", "")`, joined with `or`), which a
 * query joins `on (workload)` to the workload's own series.
 *
 * Written into the dashboard rather than read from the recording rules' `tokentap:slo_*`
 * constants, so the dashboard needs no rule loaded in the Prometheus it reads; both come from the
 * same configuration in the same `tokentap render`.
 */

/** `undefined` when no workload has the number (no SLO anywhere, or no threshold of that kind). */
function perWorkload(workloads: readonly Workload[], value: (workload: Workload) => number | undefined): string | undefined {
  const terms = workloads.flatMap((workload) => {
    const number = value(workload);
    return number === undefined ? [] : [`label_replace(vector(${promNumber(number)}), ${quote(LABEL.workload)}, ${quote(workload.name)}, "", "")`];
  });
  return terms.length === 0 ? undefined : terms.join(' or ');
}

/** Each workload's objective, e.g. 0.99. */
export function objectives(workloads: readonly Workload[]): string | undefined {
  return perWorkload(workloads, (w) => w.slo?.objective);
}

/** Each workload's error budget ratio, 1 - objective (objectives are below 1, so never zero). */
export function errorBudgetRatios(workloads: readonly Workload[]): string | undefined {
  return perWorkload(workloads, (w) => (w.slo === undefined ? undefined : 1 - w.slo.objective));
}

/** Each workload's threshold of one SLO kind, in seconds. */
export function thresholds(workloads: readonly Workload[], kind: SloKind): string | undefined {
  return perWorkload(workloads, (w) => w.slo?.thresholdsS[kind]);
}
