/** The Prometheus rule file format (https://prometheus.io/docs/prometheus/latest/configuration/recording_rules/). */

export interface RecordingRule {
  readonly record: string;
  readonly expr: string;
  readonly labels?: Readonly<Record<string, string>>;
}

export interface AlertingRule {
  readonly alert: string;
  readonly expr: string;
  /** Prometheus duration; omitted when the alert fires on the first evaluation that matches. */
  readonly for?: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly annotations: Readonly<Record<string, string>>;
}

export interface RuleGroup {
  readonly name: string;
  /** Prometheus duration; omitted for the global evaluation interval. */
  readonly interval?: string;
  readonly rules: readonly (RecordingRule | AlertingRule)[];
}

export interface RuleFile {
  readonly groups: readonly RuleGroup[];
}

export interface RenderOptions {
  /**
   * Multiplies every rule window and `for:` duration. 1 renders the real rules; tests use e.g. 0.01
   * so that a 1h window is 36 s and an alert can fire within a minute. Recording rule names keep
   * their nominal window (`rate1h`), so dashboards and alerts read the same series either way.
   */
  readonly windowScale: number;
  /**
   * Which histograms the quantile, P99 guard, capacity and cost rules read: `classic` (the
   * `_bucket`, `_count` and `_sum` series; the default) or `native` (Prometheus native histograms,
   * native-recording-rules.ts). The SLIs read tokentap_slo_events_total either way.
   */
  readonly histograms?: 'classic' | 'native';
}

/** A nominal duration scaled by the render options, in whole milliseconds (at least 1). */
export function scaledMs(ms: number, options: RenderOptions): number {
  return Math.max(1, Math.round(ms * options.windowScale));
}
