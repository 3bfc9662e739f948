import type { Meter } from '@opentelemetry/api';
import { BUILD_INFO } from './definitions.js';

export interface BuildInfo {
  readonly version: string;
  readonly nodeVersion: string;
  readonly commit: string;
}

/** tokentap_build_info{version, node_version, commit} 1, observed on every collection. */
export function registerBuildInfo(meter: Meter, info: BuildInfo): void {
  const attributes = { version: info.version, node_version: info.nodeVersion, commit: info.commit };
  meter
    .createObservableGauge(BUILD_INFO.otelName, { unit: BUILD_INFO.unit, description: BUILD_INFO.description })
    .addCallback((result) => result.observe(1, attributes));
}
