import { Model } from '@kubernetes-models/base';
import { PodMonitor, PrometheusRule } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1';
import { AlertmanagerConfig } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1alpha1';
import { Deployment } from 'kubernetes-models/apps/v1';
import { ConfigMap, Service } from 'kubernetes-models/v1';

/**
 * Schema validation of Kubernetes and prometheus-operator objects with kubernetes-models (the
 * OpenAPI schemas of Kubernetes and of the prometheus-operator CRDs, compiled with ajv).
 *
 * The schemas do not forbid unknown fields (Kubernetes' OpenAPI never sets additionalProperties:
 * false; the API server rejects unknown fields at apply time, kubectl's default --validate=strict).
 * So a misspelt `restartPolicys` or `terminationGracePeriodSecond` would pass `.validate()` here and
 * fail only against a cluster. `unknownFields` closes that gap: it runs the same compiled validator
 * over a proxy that records which properties the validator reads. The validator reads every
 * property its schema declares, and enumerates the keys of maps (labels, resources.limits...);
 * a key it never reads on an object it never enumerates is not in the schema.
 */

type ModelClass = new (data: Record<string, unknown>) => Model<unknown>;

/** The kinds the manifests may contain, by `apiVersion/kind`; anything else is an error. */
const MODELS: Readonly<Record<string, ModelClass>> = {
  'apps/v1/Deployment': Deployment as unknown as ModelClass,
  'v1/Service': Service as unknown as ModelClass,
  'v1/ConfigMap': ConfigMap as unknown as ModelClass,
  'monitoring.coreos.com/v1/PodMonitor': PodMonitor as unknown as ModelClass,
  'monitoring.coreos.com/v1/PrometheusRule': PrometheusRule as unknown as ModelClass,
  'monitoring.coreos.com/v1alpha1/AlertmanagerConfig': AlertmanagerConfig as unknown as ModelClass,
};

export interface KubeObject {
  readonly apiVersion: string;
  readonly kind: string;
  readonly metadata: { readonly name: string; readonly namespace?: string; readonly labels?: Record<string, string> };
  readonly [key: string]: unknown;
}

/** Every schema problem of one object, each naming the object and the path in it; [] when valid. */
export function schemaProblems(object: unknown, where: string): string[] {
  if (typeof object !== 'object' || object === null || Array.isArray(object)) return [`${where}: expected a Kubernetes object (a mapping)`];
  const { apiVersion, kind } = object as { apiVersion?: unknown; kind?: unknown };
  const name = (object as { metadata?: { name?: unknown } }).metadata?.name;
  const label = `${where}: ${String(kind)}/${String(name)}`;
  const ModelClass = MODELS[`${String(apiVersion)}/${String(kind)}`];
  if (ModelClass === undefined) {
    return [`${label}: unknown kind ${String(apiVersion)}/${String(kind)}; known: ${Object.keys(MODELS).join(', ')}`];
  }
  const problems: string[] = [];
  try {
    new ModelClass(object as Record<string, unknown>).validate();
  } catch (error) {
    problems.push(`${label}: ${(error as Error).message}`);
  }
  for (const path of unknownFields(ModelClass, object)) problems.push(`${label}: unknown field ${path}`);
  return problems;
}

/** JSON-pointer-like paths (`/spec/template/spec/restartPolicys`) of fields the schema does not declare. */
export function unknownFields(ModelClass: ModelClass, object: object): string[] {
  const reads = new WeakMap<object, { keys: Set<string>; enumerated: boolean }>();
  const recordOf = (target: object) => {
    let record = reads.get(target);
    if (record === undefined) {
      record = { keys: new Set(), enumerated: false };
      reads.set(target, record);
    }
    return record;
  };
  const wrap = (value: unknown): unknown => {
    if (typeof value !== 'object' || value === null) return value;
    return new Proxy(value, {
      get(target, key, receiver) {
        if (typeof key === 'string') recordOf(target).keys.add(key);
        return wrap(Reflect.get(target, key, receiver));
      },
      ownKeys(target) {
        recordOf(target).enumerated = true;
        return Reflect.ownKeys(target);
      },
    });
  };
  try {
    // The model's own validate, run with the proxy as the model instance.
    ModelClass.prototype.validate.call(wrap(object));
  } catch {
    // Schema errors are reported by schemaProblems; here only the reads matter.
  }
  const unknown: string[] = [];
  const walk = (value: unknown, path: string) => {
    if (typeof value !== 'object' || value === null) return;
    if (Array.isArray(value)) {
      value.forEach((item, i) => walk(item, `${path}/${i}`));
      return;
    }
    const record = reads.get(value);
    for (const [key, child] of Object.entries(value)) {
      if (record !== undefined && !record.enumerated && !record.keys.has(key)) {
        unknown.push(`${path}/${key}`);
        continue;
      }
      walk(child, `${path}/${key}`);
    }
  };
  walk(object, '');
  return unknown;
}
