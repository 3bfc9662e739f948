import type { Attributes, Meter, ObservableResult } from '@opentelemetry/api';
import { ATTR, RELAY_METRICS } from './definitions.js';

/** The `limit` label of tokentap_limit_exceeded_total: one per key of `limits:` that can trip, and `fds`. */
export type LimitName =
  | 'connections'
  | 'connections_per_client'
  | 'connections_fair_share'
  | 'fds'
  | 'request_head_timeout'
  | 'request_body_idle_timeout'
  | 'response_send_timeout'
  | 'sniffed_body_bytes'
  | 'rewritten_body_bytes'
  | 'held_body_bytes'
  | 'pipelined_requests'
  | 'min_request_chunk_bytes'
  | 'interim_responses'
  | 'interim_response_bytes'
  | 'log_buffer_bytes'
  | 'otlp_span_queue'
  | 'model_listing_bytes'
  | 'model_listing_timeout'
  | 'profile_time_share'
  | 'admin_connections'
  | 'admin_request_refused'
  | 'admin_pipelined_requests'
  | 'admin_send_timeout'
  | 'h2_max_header_list_bytes'
  | 'h2_client_resets_per_second'
  | 'h2_invalid_frames'
  | 'h2_continuation_frames'
  | 'h2_flood';

/** The `reason` label of tokentap_upstream_requests_not_retried_total (src/proxy/exchange.ts). */
export type NotRetriedReason = 'request_sent' | 'retry_body_limit';

/**
 * tokentap_limit_exceeded_total, kept as plain numbers and observed at collection: a limit trips on
 * the relay's error paths, where an SDK `add()` per event (attribute hashing, clock) would be paid
 * exactly when the process is under attack. A limit's series appears once it has tripped. The same
 * for tokentap_upstream_requests_not_retried_total, a relay error path too.
 */
export class LimitCounters {
  private readonly counts = new Map<LimitName, number>();
  private readonly sources = new Map<LimitName, () => number>();
  private readonly attributes = new Map<LimitName, Attributes>();
  private readonly notRetriedCounts = new Map<NotRetriedReason, number>();

  tripped(limit: LimitName): void {
    this.counts.set(limit, (this.counts.get(limit) ?? 0) + 1);
  }

  /** A request lost on a reused upstream connection was answered 502 rather than sent again. */
  notRetried(reason: NotRetriedReason): void {
    this.notRetriedCounts.set(reason, (this.notRetriedCounts.get(reason) ?? 0) + 1);
  }

  notRetriedCount(reason: NotRetriedReason): number {
    return this.notRetriedCounts.get(reason) ?? 0;
  }

  /** A count kept elsewhere (the logger's dropped lines), read at each collection. */
  addSource(limit: LimitName, read: () => number): void {
    this.sources.set(limit, read);
  }

  count(limit: LimitName): number {
    return (this.counts.get(limit) ?? 0) + (this.sources.get(limit)?.() ?? 0);
  }

  register(meter: Meter): void {
    const def = RELAY_METRICS.limitExceeded;
    meter.createObservableCounter(def.otelName, { unit: def.unit, description: def.description }).addCallback((result: ObservableResult) => {
      const names = new Set<LimitName>([...this.counts.keys(), ...this.sources.keys()]);
      for (const limit of names) {
        const value = this.count(limit);
        if (value > 0) result.observe(value, this.attributesOf(limit));
      }
    });
    const notRetried = RELAY_METRICS.upstreamNotRetried;
    meter.createObservableCounter(notRetried.otelName, { unit: notRetried.unit, description: notRetried.description }).addCallback((result: ObservableResult) => {
      for (const [reason, value] of this.notRetriedCounts) result.observe(value, { [ATTR.reason]: reason });
    });
  }

  private attributesOf(limit: LimitName): Attributes {
    let attributes = this.attributes.get(limit);
    if (attributes === undefined) {
      attributes = Object.freeze({ [ATTR.limit]: limit });
      this.attributes.set(limit, attributes);
    }
    return attributes;
  }
}
