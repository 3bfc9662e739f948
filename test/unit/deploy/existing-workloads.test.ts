import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseAllDocuments, stringify } from 'yaml';
import { describe, expect, it } from 'vitest';
import { find, podMonitorProblems, podOf, serviceProblems, SIDECAR, workloadProblems, type KubeObject } from './injection-checks.js';
import { defaultContainerProblems, graceProblems, restrictedProblems, scrapeJobProblems } from './pod-promises.js';
import { schemaProblems } from './kube-schema.js';
import { findKustomize, kustomizeBuild, NO_KUSTOMIZE, parseYamlFile, REPO } from './kustomize-tree.js';

/**
 * The tokentap Components on what teams already run (test/fixtures/kubernetes/, see its README):
 * vLLM's plain Deployment and Service from its Kubernetes guide, the Deployment and Service vLLM's
 * production-stack Helm chart renders (through the Helm post-renderer), and a KServe ServingRuntime
 * with an InferenceService. Each `kustomize build` output is checked against its input: the engine
 * untouched, the sidecar wired, the Service routed through it, both metrics endpoints scraped.
 */

const FIXTURES = path.join(REPO, 'test/fixtures/kubernetes');
const COMPONENTS = path.join(REPO, 'deploy/kubernetes/components');
const kustomize = findKustomize();
const build = (dir: string) => kustomizeBuild(kustomize as readonly string[], dir) as unknown as KubeObject[];
const input = (file: string) => parseYamlFile(path.join(FIXTURES, file)) as KubeObject[];
const configMaps = (objects: readonly KubeObject[]) => objects.filter((o) => o.kind === 'ConfigMap');

/** A kustomization in a temporary directory: `files` beside it, then the select component, then `component`. */
function overlay(files: Record<string, string>, component: string, select: string): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'tokentap-overlay-'));
  for (const [name, text] of Object.entries(files)) writeFileSync(path.join(dir, name), text);
  execFileSync('mkdir', ['-p', path.join(dir, 'select')]);
  writeFileSync(path.join(dir, 'select', 'kustomization.yaml'), select);
  // kustomize refuses an absolute path to a component.
  const relative = path.relative(dir, path.join(COMPONENTS, component));
  writeFileSync(path.join(dir, 'kustomization.yaml'), stringify({ apiVersion: 'kustomize.config.k8s.io/v1beta1', kind: 'Kustomization', namespace: 'default', resources: Object.keys(files), components: ['select', relative] }));
  return dir;
}

function plainWorkloadProblems(before: readonly KubeObject[], after: readonly KubeObject[], kind: string, name: string, serviceName: string, engine: string, native: boolean, where: string): string[] {
  const workloadBefore = find(before, kind, name) as KubeObject;
  const workloadAfter = find(after, kind, name);
  if (workloadAfter === undefined) return [`${where}: no ${kind}/${name} in the output`];
  return [
    ...after.flatMap((o) => schemaProblems(o, where)),
    ...workloadProblems(workloadBefore, workloadAfter, configMaps(after), { engine, native, where }),
    ...serviceProblems(find(before, 'Service', serviceName) as KubeObject, find(after, 'Service', serviceName) as KubeObject, workloadAfter, where),
    ...podMonitorProblems(find(after, 'PodMonitor'), workloadAfter, engine, where),
    ...promiseProblems(after, workloadAfter, engine, native, where),
  ];
}

/** Pod Security "restricted" for the sidecar, the engine still the default container, a grace period that outlasts the sidecar's stop, fixed scrape jobs. */
function promiseProblems(after: readonly KubeObject[], workload: KubeObject, engine: string, native: boolean, where: string): string[] {
  type Pod = Parameters<typeof restrictedProblems>[0];
  const pod = podOf(workload).pod as unknown as Pod;
  const sidecar = [...(pod.initContainers ?? []), ...pod.containers].find((c) => c.name === SIDECAR);
  if (sidecar === undefined) return [`${where}: no tokentap container`];
  const annotations = (workload.spec?.['template'] as { metadata?: { annotations?: Record<string, string> } } | undefined)?.metadata?.annotations;
  const endpoints = (find(after, 'PodMonitor')?.spec?.['podMetricsEndpoints'] ?? []) as Parameters<typeof scrapeJobProblems>[0];
  return [
    ...restrictedProblems(pod, sidecar, where),
    ...defaultContainerProblems(annotations, pod, engine, where),
    ...graceProblems(pod, sidecar, native, where),
    ...scrapeJobProblems(endpoints, where),
  ];
}

describe.skipIf(kustomize === undefined)(`the tokentap Components, built with ${kustomize?.join(' ') ?? NO_KUSTOMIZE}`, () => {
  it("vLLM's own Deployment and Service (its Kubernetes guide): native sidecar, Service through it, both metrics scraped", () => {
    const before = input('vllm-docs/vllm.yaml');
    const after = build(path.join(FIXTURES, 'vllm-docs'));
    expect(after.map((o) => o.kind).sort()).toEqual(['ConfigMap', 'Deployment', 'PodMonitor', 'Service']);
    expect(plainWorkloadProblems(before, after, 'Deployment', 'mistral-7b', 'mistral-7b', 'mistral-7b', true, 'vllm-docs')).toEqual([]);
    expect(new Set(after.map((o) => o.metadata.namespace))).toEqual(new Set(['default']));
  });

  it('the same workload as a StatefulSet, and as a plain second container', () => {
    const text = readFileSync(path.join(FIXTURES, 'vllm-docs/vllm.yaml'), 'utf8');
    const select = readFileSync(path.join(FIXTURES, 'vllm-docs/select/kustomization.yaml'), 'utf8');
    const statefulText = text.replace('kind: Deployment', 'kind: StatefulSet').replace('  replicas: 1\n', '  replicas: 1\n  serviceName: mistral-7b\n');
    const statefulSelect = select.replace('kind: Deployment, name', 'kind: StatefulSet, name').replace('"kind": "Deployment"', '"kind": "StatefulSet"');
    const stateful = build(overlay({ 'vllm.yaml': statefulText }, 'tokentap-sidecar', statefulSelect));
    expect(plainWorkloadProblems(parseYamlFile(path.join(FIXTURES, 'vllm-docs/vllm.yaml')).map((o) => (o as KubeObject).kind === 'Deployment' ? { ...(o as KubeObject), kind: 'StatefulSet' } : o) as KubeObject[], stateful, 'StatefulSet', 'mistral-7b', 'mistral-7b', 'mistral-7b', true, 'statefulset')).toEqual([]);

    const second = build(overlay({ 'vllm.yaml': text }, 'tokentap-second-container', select));
    expect(plainWorkloadProblems(input('vllm-docs/vllm.yaml'), second, 'Deployment', 'mistral-7b', 'mistral-7b', 'mistral-7b', false, 'second-container')).toEqual([]);
    const sidecar = (find(second, 'Deployment')?.spec as { template: { spec: { containers: { name: string; lifecycle?: unknown }[] } } }).template.spec.containers.find((c) => c.name === 'tokentap');
    expect(sidecar?.lifecycle).toEqual({ preStop: { exec: { command: ['sleep', '10'] } } });
  });

  it('leaves workloads that are not annotated alone', () => {
    const text = readFileSync(path.join(FIXTURES, 'vllm-docs/vllm.yaml'), 'utf8');
    const select = readFileSync(path.join(FIXTURES, 'vllm-docs/select/kustomization.yaml'), 'utf8').replaceAll('"tokentap.io/inject": "true"', '"tokentap.io/inject": "false"');
    const after = build(overlay({ 'vllm.yaml': text }, 'tokentap-sidecar', select));
    const withoutAnnotation = (o: KubeObject | undefined) => ({ ...o, metadata: { ...o?.metadata, annotations: undefined } });
    expect(withoutAnnotation(find(after, 'Deployment'))).toEqual(withoutAnnotation(find(input('vllm-docs/vllm.yaml'), 'Deployment')));
    expect(withoutAnnotation(find(after, 'Service'))).toEqual(withoutAnnotation(find(input('vllm-docs/vllm.yaml'), 'Service')));
  });

  it("vLLM's production-stack chart: its rendered Deployment and Service through the Helm post-renderer", () => {
    const rendered = readFileSync(path.join(FIXTURES, 'production-stack/rendered.yaml'), 'utf8');
    const output = execFileSync(path.join(REPO, 'deploy/helm/tokentap-post-renderer'), { input: rendered, encoding: 'utf8', timeout: 60_000 });
    const after = parseAllDocuments(output).map((d) => d.toJS() as KubeObject);
    const before = input('production-stack/rendered.yaml');
    expect(plainWorkloadProblems(before, after, 'Deployment', 'vllm-opt125m-deployment-vllm', 'vllm-opt125m-engine-service', 'vllm', true, 'production-stack')).toEqual([]);
    // The router finds engines by pod IP and port, past the Service: the values send it to the sidecar.
    const values = parseYamlFile(path.join(FIXTURES, 'production-stack/values.yaml'))[0] as { routerSpec: { extraArgs: string[] } };
    const args = values.routerSpec.extraArgs;
    expect(args[args.indexOf('--k8s-port') + 1]).toBe('8080');
  });

  it('the post-renderer picks the second-container variant by TOKENTAP_COMPONENT and refuses an unknown one', () => {
    const rendered = readFileSync(path.join(FIXTURES, 'production-stack/rendered.yaml'), 'utf8');
    const run = (component: string) => execFileSync(path.join(REPO, 'deploy/helm/tokentap-post-renderer'), { input: rendered, encoding: 'utf8', timeout: 60_000, env: { ...process.env, TOKENTAP_COMPONENT: component }, stdio: ['pipe', 'pipe', 'pipe'] });
    const after = parseAllDocuments(run('tokentap-second-container')).map((d) => d.toJS() as KubeObject);
    expect(plainWorkloadProblems(input('production-stack/rendered.yaml'), after, 'Deployment', 'vllm-opt125m-deployment-vllm', 'vllm-opt125m-engine-service', 'vllm', false, 'post-renderer')).toEqual([]);
    expect(() => run('tokentap-nope')).toThrow(/TOKENTAP_COMPONENT=tokentap-nope is not a directory/);
  });

  it('KServe: the runtime gets tokentap as a second container, the InferenceService is untouched', () => {
    const before = input('kserve/vllm-runtime.yaml');
    const after = build(path.join(FIXTURES, 'kserve'));
    expect(after.map((o) => o.kind).sort()).toEqual(['ConfigMap', 'InferenceService', 'PodMonitor', 'ServingRuntime']);
    expect(find(after, 'InferenceService')).toEqual({ ...find(before, 'InferenceService') });
    const runtime = find(after, 'ServingRuntime') as KubeObject;
    const runtimeBefore = find(before, 'ServingRuntime') as KubeObject;
    // The runtime's container, checked like a Deployment's: wrapped in one for the schema.
    const asDeployment = (r: KubeObject): KubeObject => ({ apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: r.metadata.name }, spec: { selector: { matchLabels: { a: 'b' } }, template: { metadata: { labels: { a: 'b', ...((r.spec?.['labels'] as object) ?? {}) } }, spec: { containers: r.spec?.['containers'], volumes: r.spec?.['volumes'] } } } });
    expect(schemaProblems(asDeployment(runtime), 'kserve')).toEqual([]);
    expect([...schemaProblems(find(after, 'PodMonitor'), 'kserve'), ...schemaProblems(find(after, 'ConfigMap'), 'kserve')]).toEqual([]);
    expect(workloadProblems(runtimeBefore, runtime, configMaps(after), { engine: 'kserve-container', native: false, where: 'kserve' })).toEqual([]);
    expect(podMonitorProblems(find(after, 'PodMonitor'), runtime, 'kserve-container', 'kserve')).toEqual([]);
    // KServe builds the pod from the runtime (its grace period is KServe's: docs/kubernetes.md, Path 3).
    const runtimePod = runtime.spec as unknown as Parameters<typeof restrictedProblems>[0];
    const runtimeSidecar = runtimePod.containers.find((c) => c.name === SIDECAR);
    expect(runtimeSidecar && [...restrictedProblems(runtimePod, runtimeSidecar, 'kserve'), ...defaultContainerProblems(undefined, runtimePod, 'kserve-container', 'kserve')]).toEqual([]);
    expect(scrapeJobProblems(find(after, 'PodMonitor')?.spec?.['podMetricsEndpoints'] as Parameters<typeof scrapeJobProblems>[0], 'kserve')).toEqual([]);
    const { spec: _spec, ...restBefore } = runtimeBefore;
    const { spec, metadata, ...restAfter } = runtime;
    expect({ ...restAfter, metadata: { ...metadata, annotations: undefined } }).toEqual({ ...restBefore, metadata: { ...runtimeBefore.metadata, annotations: undefined } });
    expect(Object.keys(spec ?? {}).sort()).toEqual([...Object.keys(runtimeBefore.spec ?? {}), 'labels'].sort());
  });

  it('the checks catch a broken output: engine edited, Service not routed, engine metrics not scraped, sidecar not native', () => {
    const before = input('vllm-docs/vllm.yaml');
    const after = build(path.join(FIXTURES, 'vllm-docs'));
    const broken = JSON.parse(JSON.stringify(after)) as KubeObject[];
    const deployment = find(broken, 'Deployment') as { spec: { template: { spec: { containers: { args: string[] }[]; initContainers: { restartPolicy?: string }[] } } } } & KubeObject;
    (deployment.spec.template.spec.containers[0] as { args: string[] }).args = ['vllm serve x --port 8001'];
    delete deployment.spec.template.spec.initContainers[0]?.restartPolicy;
    const service = find(broken, 'Service') as unknown as { spec: { ports: { targetPort: number }[] } };
    (service.spec.ports[0] as { targetPort: number }).targetPort = 8000;
    (find(broken, 'PodMonitor') as unknown as { spec: { podMetricsEndpoints: unknown[] } }).spec.podMetricsEndpoints.pop();
    const problems = plainWorkloadProblems(before, broken, 'Deployment', 'mistral-7b', 'mistral-7b', 'mistral-7b', true, 'broken');
    expect(problems).toEqual([
      'broken: Deployment/mistral-7b: container mistral-7b changed (or is gone); the engine must stay exactly as it was',
      'broken: Deployment/mistral-7b: the native sidecar needs restartPolicy: Always, or the pod waits for it to exit before starting the engine',
      'broken: Deployment/mistral-7b: tokentap forwards to 127.0.0.1:8000, the engine listens on 0.0.0.0:8001',
      'broken: Service mistral-7b port http-mistral-7b targets 8000, not the sidecar\'s proxy port tokentap-http',
      'broken: the PodMonitor does not scrape the engine\'s own /metrics on port 8001',
      'broken: no container declares the engine\'s port 8001, so Prometheus finds no target to scrape it on',
      'broken: expected exactly two PodMonitor endpoints, found 1',
    ]);
  });
});

describe.skipIf(kustomize === undefined)(`the second container's promises, built with ${kustomize?.join(' ') ?? NO_KUSTOMIZE}`, () => {
  const text = readFileSync(path.join(FIXTURES, 'vllm-docs/vllm.yaml'), 'utf8');
  const select = readFileSync(path.join(FIXTURES, 'vllm-docs/select/kustomization.yaml'), 'utf8');
  type Pod = { containers: { name: string; securityContext?: Record<string, unknown> }[]; terminationGracePeriodSeconds?: number };
  const podOfDeployment = (objects: KubeObject[]) => (find(objects, 'Deployment')?.spec as { template: { spec: Pod } }).template.spec;

  it('outlasts the sidecar\'s preStop and drain with its grace period, passes Pod Security "restricted", keeps the engine the default container', () => {
    const after = build(overlay({ 'vllm.yaml': text }, 'tokentap-second-container', select));
    const pod = podOfDeployment(after);
    // Reproduction (issue 22): the Component left Kubernetes' 30 s, killing the 10 s preStop + 70 s drain.
    expect(pod.terminationGracePeriodSeconds).toBeGreaterThanOrEqual(10 + 70 + 10);
    expect(pod.containers.map((c) => c.name)).toEqual(['mistral-7b', 'tokentap']);
    expect(promiseProblems(after, find(after, 'Deployment') as KubeObject, 'mistral-7b', false, 'second-container')).toEqual([]);
  });

  it('the checks catch a short grace period, a sidecar first in the pod, no seccomp profile and the default scrape job', () => {
    const broken = build(overlay({ 'vllm.yaml': text }, 'tokentap-second-container', select));
    const pod = podOfDeployment(broken);
    pod.terminationGracePeriodSeconds = 30;
    pod.containers.reverse();
    delete pod.containers[0]?.securityContext?.['seccompProfile'];
    for (const endpoint of (find(broken, 'PodMonitor')?.spec as { podMetricsEndpoints: { relabelings?: unknown }[] }).podMetricsEndpoints) delete endpoint.relabelings;
    expect(promiseProblems(broken, find(broken, 'Deployment') as KubeObject, 'mistral-7b', false, 'broken')).toEqual([
      'broken: container tokentap needs seccompProfile RuntimeDefault (or Localhost), on the container or the pod; has none',
      'broken: kubectl would pick container tokentap without -c (the first container), not the engine mistral-7b',
      'broken: terminationGracePeriodSeconds 30 < 90 s the sidecar needs to stop (preStop + drain 70 s + final export): its drain would be killed',
      'broken: the PodMonitor endpoint metrics gives job=<namespace>/<PodMonitor name> (the default), not tokentap',
      'broken: the PodMonitor endpoint 8000 gives job=<namespace>/<PodMonitor name> (the default), not tokentap-engine',
    ]);
  });
});

describe('the Helm values snippet in docs/kubernetes.md', () => {
  it('is the one the production-stack fixture was rendered with, and annotates what the Component selects', () => {
    const docs = readFileSync(path.join(REPO, 'docs/kubernetes.md'), 'utf8');
    const helm = docs.slice(docs.indexOf('### Path 2'), docs.indexOf('### Path 3'));
    const block = /```yaml\n([\s\S]*?)```/.exec(helm)?.[1];
    expect(block).toBeDefined();
    type Values = { servingEngineSpec: { modelSpec: { name: string; annotations: Record<string, string>; serviceAnnotations: Record<string, string> }[] }; routerSpec: { extraArgs: string[] } };
    const snippet = parseAllDocuments(block as string)[0]?.toJS() as Values;
    const fixture = parseYamlFile(path.join(FIXTURES, 'production-stack/values.yaml'))[0] as Values;
    const [docModel] = snippet.servingEngineSpec.modelSpec;
    const [fixtureModel] = fixture.servingEngineSpec.modelSpec;
    expect([docModel?.name, docModel?.annotations, docModel?.serviceAnnotations]).toEqual([fixtureModel?.name, fixtureModel?.annotations, fixtureModel?.serviceAnnotations]);
    expect(docModel?.annotations).toEqual({ 'tokentap.io/inject': 'true' });
    expect(snippet.routerSpec).toEqual(fixture.routerSpec);
    const rendered = input('production-stack/rendered.yaml');
    expect(find(rendered, 'Deployment')?.metadata.annotations).toEqual(fixtureModel?.annotations);
    expect(find(rendered, 'Service')?.metadata.annotations).toEqual(fixtureModel?.serviceAnnotations);
  });
});
