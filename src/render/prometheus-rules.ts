import type { Settings } from '../config/load.js';
import { absentMetricsAlert } from './absent-metrics-alert.js';
import { burnRateAlerts } from './burn-rate-alerts.js';
import { p99TtftAlerts } from './p99-ttft-alert.js';
import { latencyRecordingRules, sliRecordingRules, trafficRecordingRules } from './recording-rules.js';
import type { RenderOptions, RuleFile } from './rule-types.js';
import { watchdogAlert } from './watchdog-alert.js';

/**
 * Every rule group, in a fixed order. Each alert sits in the group of the recording rules it reads,
 * after them: Prometheus evaluates the rules of one group in order, but different groups
 * independently, so an alert in another group could compare against the previous evaluation's
 * value (and promtool's unit tests would see either, depending on the group order it picks).
 */
export function renderPrometheusRules(settings: Settings, options: RenderOptions): RuleFile {
  return {
    groups: [
      { name: 'tokentap-slo', rules: [...sliRecordingRules(settings, options), ...burnRateAlerts(settings, options)] },
      { name: 'tokentap-latency', rules: [...latencyRecordingRules(options), ...p99TtftAlerts(settings, options)] },
      { name: 'tokentap-traffic', rules: trafficRecordingRules(options) },
      { name: 'tokentap-meta', rules: [watchdogAlert(settings), absentMetricsAlert(settings, options)] },
    ],
  };
}
