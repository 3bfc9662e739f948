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

/**
 * The ITL guard: at least `minimum` requests of the workload with a token over the ITL threshold
 * in `range`. ITL has one event per token, so one long slow stream on a quiet workload can be most
 * of the hour's bad share: 3,000 tokens 60 ms apart among 120 requests of 100 fast tokens made 20 %
 * bad over the hour and paged. Several slow requests are an incident; one is one request.
 */
export function itlSlowRequestsGuard(workload: string, range: string, minimum: number): string {
  const key = labelList(...WORKLOAD_KEY);
  const slow = `${METRICS.itlSlowRequests.promName}{${LABEL.workload}=${quote(workload)}}`;
  const requests = `${METRICS.requests.promName}{${LABEL.workload}=${quote(workload)}}`;
  // Sidecars from before the counter serve the workload's requests but not it: for them the guard
  // steps aside (the alert as it was) rather than silence every ITL page until they are upgraded.
  return `(sum by (${key}) (increase(${slow}[${range}])) >= ${promNumber(minimum)} or (sum by (${key}) (${requests}) unless on (${key}) sum by (${key}) (${slow})))`;
}
