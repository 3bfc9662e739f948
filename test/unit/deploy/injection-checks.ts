import { isDeepStrictEqual } from 'node:util';
import { loadSettings } from '../../../src/config/load.js';
import { flagValue, resolvedEnv, type Container, type PodSpec } from './pod-wiring.js';

/**
 * Checks of what the tokentap Components (deploy/kubernetes/components/) make of a team's existing
 * workload: the input objects before, the `kustomize build` output after. Each returns the problems
 * it found ([] when right), so a test can also show that a broken output is caught.
 */

export const SIDECAR = 'tokentap';
export const PROXY_PORT_NAME = 'tokentap-http';
export const ADMIN_PORT_NAME = 'metrics';
/** What the Component adds to the pod template, so the PodMonitor can select the pods. */
export const POD_LABEL = ['tokentap.io/sidecar', 'true'] as const;

export interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  spec?: Record<string, unknown>;
  data?: Record<string, string>;
}

export interface PodHolder {
  /** The pod spec the engine runs in (a workload's template, or a KServe runtime's spec). */
  readonly pod: PodSpec;
  /** Labels of the pods it makes, as far as the manifests say. */
  readonly podLabels: Readonly<Record<string, string>>;
}

export function find(objects: readonly KubeObject[], kind: string, name?: string): KubeObject | undefined {
  return objects.find((o) => o.kind === kind && (name === undefined || o.metadata.name === name));
}

/** A Deployment's or StatefulSet's pod template; a KServe runtime's spec, whose `labels` go onto the pods. */
export function podOf(object: KubeObject): PodHolder {
  const spec = object.spec as Record<string, unknown>;
  if (object.kind === 'ServingRuntime' || object.kind === 'ClusterServingRuntime') {
    return { pod: spec as unknown as PodSpec, podLabels: (spec['labels'] as Record<string, string> | undefined) ?? {} };
  }
  const template = spec['template'] as { metadata?: { labels?: Record<string, string> }; spec: PodSpec };
  return { pod: template.spec, podLabels: template.metadata?.labels ?? {} };
}

function portNumber(container: Container, port: number | string): number | undefined {
  return typeof port === 'number' ? port : container.ports?.find((p) => p.name === port)?.containerPort;
}

/** Where the engine listens, from its command line (vLLM: `--port`, default 8000), and whether on loopback only. */
export function engineListen(container: Container): { port: number; host: string } {
  const words = [...(container.command ?? []), ...(container.args ?? [])].flatMap((arg) => arg.split(/\s+/)).filter((w) => w !== '');
  return { port: Number(flagValue(words, 'port') ?? 8000), host: flagValue(words, 'host') ?? '0.0.0.0' };
}

/**
 * The port KServe's Standard (RawDeployment) Service sends the predictor's traffic to: the first port
 * the pod's first container (kserve-container) declares, else 8080 (kserve/kserve,
 * pkg/controller/v1beta1/inferenceservice/reconcilers/service/service_reconciler.go, createDefaultSvc).
 */
export function kserveServiceTarget(pod: PodSpec): number {
  return pod.containers[0]?.ports?.[0]?.containerPort ?? 8080;
}

export interface InjectionExpectation {
  /** The engine's container name in the input. */
  readonly engine: string;
  /** How tokentap was added: native sidecar (init container) or plain second container. */
  readonly native: boolean;
  /**
   * A KServe runtime: the Service is KServe's, targeting the engine container's first declared port,
   * so that port (the only change allowed to the engine's container) must be tokentap's proxy port.
   */
  readonly kserve?: boolean;
  readonly where: string;
}

/**
 * The workload after the Component, against before: the engine's containers exactly as they were,
 * the sidecar placed as asked, ports unique across the pod, the sidecar's probes on its admin port,
 * its config (the generated ConfigMap, through tokentap's own loadSettings) listening on its declared
 * ports and forwarding to where the engine listens, and nothing else of the workload changed beyond
 * the sidecar, its volume and the pod label.
 */
export function workloadProblems(before: KubeObject, after: KubeObject, configMaps: readonly KubeObject[], expect: InjectionExpectation): string[] {
  const problems: string[] = [];
  const where = `${expect.where}: ${after.kind}/${after.metadata.name}`;
  const old = podOf(before);
  const now = podOf(after);

  for (const container of old.pod.containers) {
    const same = now.pod.containers.find((c) => c.name === container.name);
    const declaresProxyPort = expect.kserve === true && container.name === expect.engine;
    if (declaresProxyPort && container.ports !== undefined) problems.push(`${where}: container ${container.name} declares ports, so KServe's Service targets ${container.ports[0]?.containerPort} and not tokentap`);
    const unchanged = declaresProxyPort ? isDeepStrictEqual({ ...same, ports: undefined }, { ...container, ports: undefined }) : isDeepStrictEqual(same, container);
    if (!unchanged) problems.push(`${where}: container ${container.name} changed (or is gone); the engine must stay exactly as it was`);
  }
  for (const container of old.pod.initContainers ?? []) {
    if (!isDeepStrictEqual(now.pod.initContainers?.find((c) => c.name === container.name), container)) problems.push(`${where}: init container ${container.name} changed`);
  }
  const init = now.pod.initContainers?.find((c) => c.name === SIDECAR);
  const plain = now.pod.containers.find((c) => c.name === SIDECAR);
  const sidecar = expect.native ? init : plain;
  if (sidecar === undefined || (expect.native ? plain : init) !== undefined) {
    problems.push(`${where}: expected tokentap as ${expect.native ? 'a native sidecar (init container)' : 'a plain second container'} only`);
    return problems;
  }
  if (expect.native && sidecar.restartPolicy !== 'Always') problems.push(`${where}: the native sidecar needs restartPolicy: Always, or the pod waits for it to exit before starting the engine`);
  if (!expect.native && sidecar.restartPolicy !== undefined) problems.push(`${where}: restartPolicy is only allowed on init containers`);
  if (expect.native && sidecar.startupProbe?.httpGet?.path === '/readyz') problems.push(`${where}: the native sidecar's startupProbe waits for the engine, which starts only after it`);
  if (!isDeepStrictEqual(now.podLabels, { ...old.podLabels, [POD_LABEL[0]]: POD_LABEL[1] })) problems.push(`${where}: pod labels should be the workload's own plus ${POD_LABEL.join('=')}`);

  // Ports: names and numbers unique across the pod's network namespace.
  const names = new Set<string>();
  const numbers = new Set<number>();
  for (const container of [...(now.pod.initContainers ?? []), ...now.pod.containers]) {
    for (const port of container.ports ?? []) {
      if (port.name !== undefined && names.has(port.name)) problems.push(`${where}: port name ${port.name} declared twice`);
      if (numbers.has(port.containerPort)) problems.push(`${where}: port ${port.containerPort} declared twice`);
      if (port.name !== undefined) names.add(port.name);
      numbers.add(port.containerPort);
    }
  }
  const proxyPort = expect.kserve === true ? kserveServiceTarget(now.pod) : portNumber(sidecar, PROXY_PORT_NAME);
  const adminPort = portNumber(sidecar, ADMIN_PORT_NAME);
  if (proxyPort === undefined || adminPort === undefined) problems.push(`${where}: the sidecar must declare ports ${expect.kserve === true ? '' : `${PROXY_PORT_NAME} and `}${ADMIN_PORT_NAME}`);
  for (const [kind, path] of [['startupProbe', '/healthz'], ['livenessProbe', '/healthz'], ['readinessProbe', '/readyz']] as const) {
    const probe = sidecar[kind]?.httpGet;
    if (probe?.path !== path || portNumber(sidecar, probe.port) !== adminPort) problems.push(`${where}: the sidecar's ${kind} must ask ${path} on its ${ADMIN_PORT_NAME} port`);
  }

  // Volumes: every mount declared, the config volume the generated ConfigMap.
  const volumes = new Map((now.pod.volumes ?? []).map((v) => [v.name, v]));
  for (const container of [...(now.pod.initContainers ?? []), ...now.pod.containers]) {
    for (const mount of container.volumeMounts ?? []) if (!volumes.has(mount.name)) problems.push(`${where}: container ${container.name} mounts undeclared volume ${mount.name}`);
  }
  const oldVolumes = (old.pod.volumes ?? []).map((v) => v.name);
  const added = [...volumes.keys()].filter((name) => !oldVolumes.includes(name));
  if (!isDeepStrictEqual(added, ['tokentap-config'])) problems.push(`${where}: expected exactly one added volume, tokentap-config; added ${JSON.stringify(added)}`);
  for (const name of oldVolumes) if (!isDeepStrictEqual(volumes.get(name), old.pod.volumes?.find((v) => v.name === name))) problems.push(`${where}: volume ${name} changed`);

  // The sidecar's settings as it would load them in the pod.
  const env = resolvedEnv(sidecar, problems, where);
  const configPath = env['TOKENTAP_CONFIG'] ?? '';
  const mount = sidecar.volumeMounts?.find((m) => configPath.startsWith(`${m.mountPath}/`));
  const configMapName = mount === undefined ? undefined : volumes.get(mount.name)?.configMap?.name;
  const configMap = configMaps.find((c) => c.metadata.name === configMapName);
  const text = configMap?.data?.[configPath.slice((mount?.mountPath.length ?? 0) + 1)];
  if (text === undefined) {
    problems.push(`${where}: TOKENTAP_CONFIG=${configPath} is not a key of a generated ConfigMap mounted there (volume refers to ${configMapName})`);
    return problems;
  }
  try {
    const settings = loadSettings({ flags: {}, env, readFile: () => text });
    if (settings.listen.port !== proxyPort) problems.push(`${where}: tokentap listens on ${settings.listen.port}, ${expect.kserve === true ? "KServe's Service targets" : `its ${PROXY_PORT_NAME} port is`} ${proxyPort}`);
    if (settings.adminListen.port !== adminPort) problems.push(`${where}: tokentap's admin listener is on ${settings.adminListen.port}, its ${ADMIN_PORT_NAME} port is ${adminPort}`);
    const engine = now.pod.containers.find((c) => c.name === expect.engine);
    const listen = engine === undefined ? undefined : engineListen(engine);
    if (listen === undefined) problems.push(`${where}: no engine container ${expect.engine}`);
    else if ([settings.listen.port, settings.adminListen.port].includes(listen.port)) problems.push(`${where}: tokentap and the engine both listen on port ${listen.port}: whichever starts second cannot bind it`);
    else if (settings.upstream.hostname !== '127.0.0.1' || Number(settings.upstream.port) !== listen.port || !['0.0.0.0', '127.0.0.1', '::'].includes(listen.host)) {
      problems.push(`${where}: tokentap forwards to ${settings.upstream.host}, the engine listens on ${listen.host}:${listen.port}`);
    }
    if (settings.modelDiscovery === undefined) problems.push(`${where}: model discovery is off; the served model names would come from request bodies`);
  } catch (error) {
    problems.push(`${where}: tokentap refuses its config: ${(error as Error).message}`);
  }
  return problems;
}

/** The Service after the Component: its first port now targets the sidecar's proxy port; the rest, and the selector, as before. */
export function serviceProblems(before: KubeObject, after: KubeObject, workload: KubeObject, where: string): string[] {
  const problems: string[] = [];
  type Port = { name?: string; port: number; targetPort?: number | string };
  const spec = (o: KubeObject) => o.spec as { selector: Record<string, string>; ports: Port[] };
  const { pod, podLabels } = podOf(workload);
  const sidecar = [...(pod.initContainers ?? []), ...pod.containers].find((c) => c.name === SIDECAR);
  const [first, ...rest] = spec(after).ports;
  const target = first?.targetPort ?? first?.port;
  if (sidecar === undefined || target === undefined || portNumber(sidecar, target) !== portNumber(sidecar, PROXY_PORT_NAME) || (typeof target === 'number' && !sidecar.ports?.some((p) => p.containerPort === target))) {
    problems.push(`${where}: Service ${after.metadata.name} port ${first?.name ?? first?.port} targets ${target}, not the sidecar's proxy port ${PROXY_PORT_NAME}`);
  }
  if (!isDeepStrictEqual({ ...first, targetPort: undefined }, { ...spec(before).ports[0], targetPort: undefined })) problems.push(`${where}: the first port changed beyond its targetPort`);
  if (!isDeepStrictEqual(rest, spec(before).ports.slice(1))) problems.push(`${where}: the Service's other ports changed`);
  if (!isDeepStrictEqual(spec(after).selector, spec(before).selector)) problems.push(`${where}: the Service's selector changed`);
  if (!Object.entries(spec(after).selector).every(([k, v]) => podLabels[k] === v)) problems.push(`${where}: the Service selects no pod of ${workload.metadata.name}`);
  return problems;
}

/** The PodMonitor scrapes both the sidecar's `metrics` port and the engine's own /metrics, on the pods that have the sidecar. */
export function podMonitorProblems(monitor: KubeObject | undefined, workload: KubeObject, engine: string, where: string): string[] {
  if (monitor === undefined) return [`${where}: no PodMonitor`];
  const problems: string[] = [];
  const spec = monitor.spec as { selector: { matchLabels: Record<string, string> }; podMetricsEndpoints: { port?: string; targetPort?: number | string; portNumber?: number; path?: string }[] };
  const { pod, podLabels } = podOf(workload);
  if (!Object.entries(spec.selector.matchLabels).every(([k, v]) => podLabels[k] === v)) problems.push(`${where}: PodMonitor ${monitor.metadata.name} selects no pod of ${workload.metadata.name}`);
  const sidecar = [...(pod.initContainers ?? []), ...pod.containers].find((c) => c.name === SIDECAR);
  const engineContainer = pod.containers.find((c) => c.name === engine);
  const enginePort = engineContainer === undefined ? undefined : engineListen(engineContainer).port;
  const scrapes = spec.podMetricsEndpoints.map((e) => {
    const number = e.port !== undefined ? [...(pod.initContainers ?? []), ...pod.containers].flatMap((c) => c.ports ?? []).find((p) => p.name === e.port)?.containerPort : (e.portNumber ?? (typeof e.targetPort === 'number' ? e.targetPort : undefined));
    return { number, path: e.path ?? '/metrics' };
  });
  const adminPort = sidecar === undefined ? undefined : portNumber(sidecar, ADMIN_PORT_NAME);
  if (!scrapes.some((s) => s.number === adminPort && s.path === '/metrics')) problems.push(`${where}: the PodMonitor does not scrape the sidecar's ${ADMIN_PORT_NAME} port`);
  if (!scrapes.some((s) => s.number === enginePort && s.path === '/metrics')) problems.push(`${where}: the PodMonitor does not scrape the engine's own /metrics on port ${enginePort}`);
  // Prometheus' pod discovery makes targets of declared container ports only.
  if (enginePort !== undefined && ![...(pod.initContainers ?? []), ...pod.containers].some((c) => c.ports?.some((p) => p.containerPort === enginePort))) {
    problems.push(`${where}: no container declares the engine's port ${enginePort}, so Prometheus finds no target to scrape it on`);
  }
  if (scrapes.length !== 2) problems.push(`${where}: expected exactly two PodMonitor endpoints, found ${scrapes.length}`);
  return problems;
}
