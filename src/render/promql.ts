import { ATTR } from '../metrics/definitions.js';

/**
 * Small PromQL building blocks shared by the rule renderers, so label names and literals are
 * spelled one way everywhere.
 */

/** The Prometheus label name of an OpenTelemetry attribute (`gen_ai.token.type` -> `gen_ai_token_type`). */
export function promLabel(attribute: string): string {
  return attribute.replace(/\./g, '_');
}

export const LABEL = {
  workload: promLabel(ATTR.workload),
  slo: promLabel(ATTR.slo),
  sloResult: promLabel(ATTR.sloResult),
  outcome: promLabel(ATTR.outcome),
  tokenType: promLabel(ATTR.tokenType),
} as const;

/**
 * The target label of the Kubernetes namespace (a PodMonitor sets it, as does the usual
 * kubernetes_sd relabelling). It is not an attribute tokentap emits, but every rule keeps it, so two
 * deployments with the same workload names scraped by one Prometheus (staging and prod) get
 * separate SLIs and alerts. Series without it (a plain static scrape) have it empty on both sides
 * of every grouping and match, and the rules then behave as if it did not exist.
 */
export const NAMESPACE_LABEL = 'namespace';

/**
 * The matcher that keeps generation requests of tokentap_requests_total (definitions.ts,
 * Operation): health checks and model listings are not traffic an SLO or RPS panel is about.
 * `!="other"` rather than `="generation"`, so series from before the label existed still count.
 */
export const GENERATIONS_ONLY = `${promLabel(ATTR.operation)}!="other"`;

/** The labels that identify one workload's series: namespace and workload name. */
export const WORKLOAD_KEY: readonly string[] = [NAMESPACE_LABEL, LABEL.workload];

/** `a, b, c`: the label list of a `by (…)` or `on (…)` clause. */
export function labelList(...labels: readonly string[]): string {
  return labels.join(', ');
}

/** A PromQL string literal: Go-style double-quoted, so `\` and `"` are escaped. */
export function quote(value: string): string {
  return JSON.stringify(value);
}

/** `metric{a="x", b="y"}`, or the bare metric name without matchers. */
export function selector(metric: string, matchers: Readonly<Record<string, string>> = {}): string {
  const parts = Object.entries(matchers).map(([name, value]) => `${name}=${quote(value)}`);
  return parts.length === 0 ? metric : `${metric}{${parts.join(', ')}}`;
}

/**
 * A number as a PromQL literal with at most 12 significant digits, so float noise such as
 * 1 - 0.99 = 0.010000000000000009 renders as 0.01.
 */
export function promNumber(value: number): string {
  return String(Number(value.toPrecision(12)));
}
