import type { Settings } from '../config/load.js';
import { absentMetricsAlerts } from './absent-metrics-alert.js';
import { burnRateAlerts } from './burn-rate-alerts.js';
import { capacityHeadroomAlert } from './capacity-alert.js';
import { CAPACITY_GROUP_INTERVAL_MS, capacityRecordingRules } from './capacity-rules.js';
import { formatPromDuration } from './prometheus-duration.js';
import { p99TtftAlerts } from './p99-ttft-alert.js';
import { nativeLatencyRecordingRules, nativeSliRecordingRules } from './native-recording-rules.js';
import { latencyRecordingRules, sliRecordingRules, trafficRecordingRules } from './recording-rules.js';
import { scaledMs, type RenderOptions, type RuleFile } from './rule-types.js';
import { targetDownAlert } from './target-down-alert.js';
import { watchdogAlert } from './watchdog-alert.js';

/**
 * Every rule group, in a fixed order. Each alert sits in the group of the recording rules it reads,
 * after them: Prometheus evaluates the rules of one group in order, but different groups
 * independently, so an alert in another group could compare against the previous evaluation's
 * value (and promtool's unit tests would see either, depending on the group order it picks).
 */
export function renderPrometheusRules(settings: Settings, options: RenderOptions): RuleFile {
  // Native: the same record names from native histograms (native-recording-rules.ts); the alerts read either.
  const native = options.histograms === 'native';
  const sli = native ? nativeSliRecordingRules(settings, options) : sliRecordingRules(settings, options);
  const latency = native ? nativeLatencyRecordingRules(options) : latencyRecordingRules(options);
  return {
    groups: [
      { name: 'tokentap-slo', rules: [...sli, ...burnRateAlerts(settings, options)] },
      { name: 'tokentap-latency', rules: [...latency, ...p99TtftAlerts(settings, options)] },
      { name: 'tokentap-traffic', rules: trafficRecordingRules(options) },
      {
        name: 'tokentap-capacity',
        interval: formatPromDuration(scaledMs(CAPACITY_GROUP_INTERVAL_MS, options)),
        rules: [...capacityRecordingRules(settings, options), capacityHeadroomAlert(settings, options)],
      },
      { name: 'tokentap-meta', rules: [watchdogAlert(settings), targetDownAlert(settings, options), ...absentMetricsAlerts(settings, options)] },
    ],
  };
}
