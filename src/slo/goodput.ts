import type { Workload } from '../config/load.js';
import { e2eResult, ttftResult, type FinishedRequestFacts } from './slo-events.js';

/**
 * Goodput (`tokentap_goodput_requests_total`): whether one finished generation request met every
 * SLO its workload defines, the joint view of RPS, TTFT and ITL. "Met" means, for each SLO the
 * workload configures:
 * - the request completed (outcome `completed`): a failed, truncated, cancelled or refused request
 *   is never goodput, whatever its latencies;
 * - TTFT: its TTFT event (slo-events.ts, measured to the token `ttft_on` names) is good, or it has
 *   none because TTFT does not apply (a non-streamed answer, a stream without any token);
 * - e2e: its e2e event is good (finished within the threshold);
 * - ITL: at least `itl_percentile` of its per-token gaps are within the threshold, i.e. its
 *   nearest-rank `itl_percentile` per-token gap is within it: at most floor((1 - p) x n) of its n
 *   ITL tokens are bad. A request with no ITL token (one token, or not streamed) meets it.
 * A workload without an SLO has no goodput series.
 */
export function metEverySlo(
  slo: NonNullable<Workload['slo']>,
  facts: FinishedRequestFacts,
  itlTokens: number,
  itlBadTokens: number,
): boolean {
  if (facts.outcome !== 'completed') return false;
  const { ttft, e2e, itl } = slo.thresholdsS;
  if (ttft !== undefined && ttftResult(ttft, facts) === 'bad') return false;
  if (e2e !== undefined && e2eResult(e2e, facts) !== 'good') return false;
  if (itl !== undefined && itlTokens > 0) {
    // The nearest rank ceil(p x n); the epsilon keeps a product like 0.07 x 100 =
    // 7.000000000000001 (floating point) from raising the rank to 8.
    const goodNeeded = Math.ceil(slo.itlPercentile * itlTokens - 1e-9);
    if (itlTokens - itlBadTokens < goodNeeded) return false;
  }
  return true;
}
