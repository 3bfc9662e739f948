import type { RuleFile } from './rule-types.js';

/**
 * The same rule groups as a prometheus-operator `PrometheusRule`
 * (https://prometheus-operator.dev/docs/api-reference/api/#monitoring.coreos.com/v1.PrometheusRule).
 * kube-prometheus-stack selects rules by its release label: add `release: <helm release>` to the
 * metadata (e.g. with kustomize) when the operator's ruleSelector asks for it.
 */
export function renderPrometheusRule(rules: RuleFile): object {
  return {
    apiVersion: 'monitoring.coreos.com/v1',
    kind: 'PrometheusRule',
    metadata: {
      name: 'tokentap',
      labels: { 'app.kubernetes.io/name': 'tokentap', 'app.kubernetes.io/component': 'alerting-rules' },
    },
    spec: rules,
  };
}
