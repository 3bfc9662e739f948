import { NAMESPACE_LABEL } from './promql.js';

/**
 * Annotation text (Go templates, expanded by Prometheus per alert) that names the alert's namespace
 * only when its series have one. `with` skips its body for the empty string a missing label gives,
 * so alerts from a plain static scrape read exactly as they would without namespaces.
 */

/** ` in namespace prod`, or nothing. */
export const IN_NAMESPACE = `{{ with $labels.${NAMESPACE_LABEL} }} in namespace {{ . }}{{ end }}`;

/** `&var-namespace=prod` for a dashboard URL that already has a query, or nothing. */
export const NAMESPACE_URL_PARAMETER = `{{ with $labels.${NAMESPACE_LABEL} }}&var-namespace={{ . | urlquery }}{{ end }}`;
