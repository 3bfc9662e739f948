import { METRICS } from '../metrics/definitions.js';
import { LABEL, promNumber, selector } from './promql.js';

/**
 * The traffic guard: the workload's request rate averaged over `range`, in requests per hour, at
 * least the configured minimum. Requests, not SLO events: ITL has one event per token, so one slow
 * request on a quiet workload would pass an event-count guard.
 */
export function trafficGuard(workload: string, range: string, minRequestsPerHour: number): string {
  return `sum by (${LABEL.workload}) (rate(${selector(METRICS.requests.promName, { [LABEL.workload]: workload })}[${range}])) * 3600 >= ${promNumber(minRequestsPerHour)}`;
}
