import { METRICS } from '../metrics/definitions.js';
import { GENERATIONS_ONLY, LABEL, WORKLOAD_KEY, labelList, promNumber, quote } from './promql.js';

/**
 * The traffic guard: the workload's request rate averaged over `range`, in requests per hour, at
 * least the configured minimum. Requests, not SLO events: ITL has one event per token, so one slow
 * request on a quiet workload would pass an event-count guard. Per namespace and workload: a busy
 * prod must not lift a quiet staging over the guard. Alerts join it with `GUARD_MATCH`.
 */
export const GUARD_MATCH = `and on (${labelList(...WORKLOAD_KEY)})`;

export function trafficGuard(workload: string, range: string, minRequestsPerHour: number): string {
  // Client errors burn no SLO (slo-events.ts), so they do not count as traffic either: a client
  // sending bad requests must not lift a quiet workload over the guard. Nor do requests that are not
  // generations (health checks, model listings).
  const requests = `${METRICS.requests.promName}{${LABEL.workload}=${quote(workload)}, ${GENERATIONS_ONLY}, ${LABEL.outcome}!="client_error"}`;
  return `sum by (${labelList(...WORKLOAD_KEY)}) (rate(${requests}[${range}])) * 3600 >= ${promNumber(minRequestsPerHour)}`;
}
