import type { Settings } from '../config/load.js';
import { absentMetricsAlerts } from './absent-metrics-alert.js';
import { burnRateAlerts } from './burn-rate-alerts.js';
import { capacityHeadroomAlert } from './capacity-alert.js';
import { CAPACITY_GROUP_INTERVAL_MS, capacityRecordingRules } from './capacity-rules.js';
import { formatPromDuration } from './prometheus-duration.js';
import { costRecordingRules } from './cost-rules.js';
import { p99TtftAlerts } from './p99-ttft-alert.js';
import { nativeLatencyRecordingRules } from './native-recording-rules.js';
import { latencyRecordingRules, sliRecordingRules, trafficRecordingRules } from './recording-rules.js';
import { scaledMs, type RenderOptions, type RuleFile } from './rule-types.js';
import { targetDownAlert } from './target-down-alert.js';
import { sloNotInRulesAlert } from './slo-not-in-rules-alert.js';
import { upstreamDownAlert } from './upstream-down-alert.js';
import { watchdogAlert } from './watchdog-alert.js';

/**
 * Every rule group, in a fixed order. Each alert sits in the group of the recording rules it reads,
 * after them: Prometheus evaluates the rules of one group in order, but different groups
 * independently, so an alert in another group could compare against the previous evaluation's
 * value (and promtool's unit tests would see either, depending on the group order it picks).
 */
export function renderPrometheusRules(settings: Settings, options: RenderOptions): RuleFile {
  // Native: the quantiles from native histograms under the same record names (native-recording-rules.ts);
  // the SLIs read tokentap_slo_events_total either way (native-recording-rules.ts says why).
  const latency = options.histograms === 'native' ? nativeLatencyRecordingRules(options) : latencyRecordingRules(options);
  return {
    groups: [
      { name: 'tokentap-slo', rules: [...sliRecordingRules(settings, options), ...burnRateAlerts(settings, options)] },
      { name: 'tokentap-latency', rules: [...latency, ...p99TtftAlerts(settings, options)] },
      { name: 'tokentap-traffic', rules: trafficRecordingRules(options) },
      {
        name: 'tokentap-capacity',
        interval: formatPromDuration(scaledMs(CAPACITY_GROUP_INTERVAL_MS, options)),
        rules: [...capacityRecordingRules(settings, options), capacityHeadroomAlert(settings, options)],
      },
      // Only with `cost:` configured (cost-rules.ts says why).
      ...(settings.cost === undefined ? [] : [{ name: 'tokentap-cost', rules: costRecordingRules(settings, options) }]),
      { name: 'tokentap-meta', rules: [watchdogAlert(settings), targetDownAlert(settings, options), upstreamDownAlert(settings, options), ...absentMetricsAlerts(settings, options), sloNotInRulesAlert(settings, options)] },
    ],
  };
}
