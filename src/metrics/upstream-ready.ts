import type { Meter } from '@opentelemetry/api';
import { UPSTREAM_READY } from './definitions.js';

/**
 * tokentap_upstream_ready: what the last readiness probe found, observed on every collection;
 * nothing before the first probe. `lastAnswer` is read at collection time, so the series follows
 * the probes the kubelet sends (every 5 s in deploy/kubernetes/) without a probe of its own.
 */
export function registerUpstreamReady(meter: Meter, lastAnswer: () => boolean | undefined): void {
  meter
    .createObservableGauge(UPSTREAM_READY.otelName, { unit: UPSTREAM_READY.unit, description: UPSTREAM_READY.description })
    .addCallback((result) => {
      const ready = lastAnswer();
      if (ready !== undefined) result.observe(ready ? 1 : 0);
    });
}
