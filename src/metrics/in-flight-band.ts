/**
 * Capacity at SLO: the sidecar's requests in flight when a request started (itself included),
 * folded into a bounded `in_flight` label of power-of-two bands, so TTFT and ITL can be read
 * against concurrency per pod without a series per count. Ten values at most.
 */
export const IN_FLIGHT_BANDS = ['1', '2', '3-4', '5-8', '9-16', '17-32', '33-64', '65-128', '129-256', '257+'] as const;
export type InFlightBand = (typeof IN_FLIGHT_BANDS)[number];

/** The band of `inFlight` (>= 1): 1, 2, then (2^(k-1), 2^k] up to 256, then 257+. */
export function inFlightBand(inFlight: number): InFlightBand {
  if (inFlight <= 1) return '1';
  if (inFlight > 256) return '257+';
  // ceil(log2(n)) without floating point: the bit length of n - 1.
  return IN_FLIGHT_BANDS[32 - Math.clz32(inFlight - 1)] as InFlightBand;
}

/** Counts the sidecar's requests in flight; one per sidecar, shared by every request monitor. */
export class InFlightTracker {
  private inFlight = 0;
  private highest = 0;

  /** A request started: the band of the count including it. */
  started(): InFlightBand {
    this.inFlight += 1;
    if (this.inFlight > this.highest) this.highest = this.inFlight;
    return inFlightBand(this.inFlight);
  }

  /** The most requests in flight at once since start: the pod's observed peak (status page, capacity at SLO). */
  get peak(): number {
    return this.highest;
  }

  finished(): void {
    this.inFlight -= 1;
  }
}
