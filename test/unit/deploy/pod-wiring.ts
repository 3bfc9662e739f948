import path from 'node:path';
import { SHUTDOWN_FLUSH_ALLOWANCE_MS } from '../../../src/cli/serve.js';
import { parseDurationMs } from '../../../src/config/duration.js';
import { loadSettings } from '../../../src/config/load.js';
import { loadOtlpSettings } from '../../../src/tracing/otlp-settings.js';

/**
 * Cross-checks of the sidecar pod that no schema can make: that the Service, the probes and the
 * PodMonitor point at ports the containers declare, that the native sidecar really is one, that the
 * config the ConfigMap ships is one tokentap accepts and agrees with the vLLM command line, and that
 * the termination grace period covers the shutdown it is meant to cover. Each function returns the
 * problems it found (empty when the wiring is right), so the tests can also show that a broken copy
 * of the manifests is caught.
 */

/* The manifest shapes read here; schema validity is checked separately (kube-schema.ts). */
interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: { fieldRef?: { fieldPath: string }; secretKeyRef?: unknown };
}
interface Probe {
  httpGet?: { path?: string; port: number | string };
  tcpSocket?: { port: number | string };
  periodSeconds?: number;
  failureThreshold?: number;
}
export interface Container {
  name: string;
  image?: string;
  command?: string[];
  args?: string[];
  env?: EnvVar[];
  ports?: { name?: string; containerPort: number }[];
  restartPolicy?: string;
  startupProbe?: Probe;
  livenessProbe?: Probe;
  readinessProbe?: Probe;
  lifecycle?: { preStop?: { exec?: { command: string[] }; sleep?: { seconds: number } } };
  resources?: { requests?: Record<string, string | number>; limits?: Record<string, string | number> };
  volumeMounts?: { name: string; mountPath: string }[];
}
export interface PodSpec {
  containers: Container[];
  initContainers?: Container[];
  volumes?: { name: string; configMap?: { name: string } }[];
  terminationGracePeriodSeconds?: number;
  enableServiceLinks?: boolean;
}
export interface DeploymentLike {
  metadata: { name: string };
  spec: { selector: { matchLabels: Record<string, string> }; progressDeadlineSeconds?: number; template: { metadata: { labels: Record<string, string> }; spec: PodSpec } };
}
export interface ServiceLike {
  metadata: { name: string };
  spec: { selector: Record<string, string>; ports: { name?: string; port: number; targetPort?: number | string }[] };
}
export interface PodMonitorLike {
  metadata: { name: string };
  spec: { selector: { matchLabels: Record<string, string> }; podMetricsEndpoints: { port?: string; path?: string; interval?: string }[] };
}

export const SIDECAR = 'tokentap';
export const MODEL_SERVER = 'vllm';
/** The admin listener's endpoints (src/admin/admin-server.ts). */
const ADMIN_PATHS = new Set(['/metrics', '/healthz', '/readyz']);
/** vLLM stops its engine processes after the drain; VLLM_WORKER_SHUTDOWN_TIMEOUT_SECONDS defaults to 5. */
export const VLLM_ENGINE_EXIT_S = 5;

/** How the sidecar is placed: as a native sidecar (init container) or a plain second container. */
export function sidecarOf(pod: PodSpec): { container: Container; native: boolean } | undefined {
  const init = pod.initContainers?.find((c) => c.name === SIDECAR);
  if (init !== undefined) return { container: init, native: true };
  const plain = pod.containers.find((c) => c.name === SIDECAR);
  return plain === undefined ? undefined : { container: plain, native: false };
}

function allContainers(pod: PodSpec): Container[] {
  return [...(pod.initContainers ?? []), ...pod.containers];
}

function portNumberOf(container: Container, port: number | string): number | undefined {
  return typeof port === 'number' ? port : container.ports?.find((p) => p.name === port)?.containerPort;
}

function matches(selector: Record<string, string>, labels: Record<string, string>): boolean {
  return Object.entries(selector).every(([key, value]) => labels[key] === value);
}

/** `--name=value` or `--name value` from a command line. */
export function flagValue(args: readonly string[], name: string): string | undefined {
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string;
    if (arg === `--${name}`) return args[i + 1];
    if (arg.startsWith(`--${name}=`)) return arg.slice(name.length + 3);
  }
  return undefined;
}

function preStopSeconds(container: Container): number {
  const hook = container.lifecycle?.preStop;
  if (hook?.sleep !== undefined) return hook.sleep.seconds;
  const command = hook?.exec?.command;
  if (command !== undefined && command[0] === 'sleep' && command.length === 2) return Number(command[1]);
  return 0;
}

/**
 * The container's environment as the kubelet resolves it: literal values, with `$(NAME)` replaced
 * by a variable defined earlier in the same container (the kubelet leaves any other reference
 * verbatim, a silent misconfiguration reported here). Downward-API fields take their value from
 * `fields` (by fieldPath), else a placeholder.
 */
export function resolvedEnv(container: Container, problems: string[], where: string, fields: Readonly<Record<string, string>> = {}): Record<string, string> {
  const env: Record<string, string> = {};
  for (const variable of container.env ?? []) {
    if (variable.value === undefined) {
      const field = variable.valueFrom?.fieldRef?.fieldPath;
      env[variable.name] = field === undefined ? `<${variable.name}>` : (fields[field] ?? `<${field}>`);
      continue;
    }
    env[variable.name] = variable.value.replace(/\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (reference, name: string) => {
      if (env[name] !== undefined) return env[name];
      problems.push(`${where}: container ${container.name}: env ${variable.name} refers to $(${name}), which is not defined before it in the same container (the kubelet leaves it verbatim)`);
      return reference;
    });
  }
  return env;
}

/** Everything about one Deployment's pod that must hold for the sidecar to work. */
export function podProblems(deployment: DeploymentLike, where: string): string[] {
  const problems: string[] = [];
  const pod = deployment.spec.template.spec;
  const containers = allContainers(pod);
  if (!matches(deployment.spec.selector.matchLabels, deployment.spec.template.metadata.labels)) {
    problems.push(`${where}: spec.selector does not match the pod template's labels`);
  }
  if (pod.enableServiceLinks !== false) {
    problems.push(`${where}: enableServiceLinks must be false: a Service named "vllm" would inject VLLM_PORT=tcp://..., which vLLM refuses`);
  }

  const sidecar = sidecarOf(pod);
  const server = pod.containers.find((c) => c.name === MODEL_SERVER);
  if (sidecar === undefined || server === undefined) {
    problems.push(`${where}: expected a "${SIDECAR}" container (init or plain) and a "${MODEL_SERVER}" container`);
    return problems;
  }
  if (sidecar.native && sidecar.container.restartPolicy !== 'Always') {
    problems.push(`${where}: init container ${SIDECAR} needs restartPolicy: Always to be a native sidecar; without it the pod waits for it to exit before starting vllm`);
  }
  if (!sidecar.native && sidecar.container.restartPolicy !== undefined) {
    problems.push(`${where}: restartPolicy is only allowed on init containers`);
  }
  if (sidecar.native && sidecar.container.startupProbe?.httpGet?.path === '/readyz') {
    problems.push(`${where}: the native sidecar's startupProbe asks /readyz, which waits for vllm, which the kubelet starts only after that probe succeeds`);
  }

  // Ports: unique names and numbers across the pod's network namespace.
  const declared = new Map<string, Container>();
  const numbers = new Map<number, Container>();
  for (const container of containers) {
    for (const port of container.ports ?? []) {
      if (port.name !== undefined) {
        if (declared.has(port.name)) problems.push(`${where}: port name ${port.name} declared twice`);
        declared.set(port.name, container);
      }
      if (numbers.has(port.containerPort)) problems.push(`${where}: port ${port.containerPort} declared twice`);
      numbers.set(port.containerPort, container);
    }
  }

  // Probes: the kubelet resolves a named probe port within the probed container only; a number is
  // the pod's, and must be one some container declares.
  for (const container of containers) {
    for (const kind of ['startupProbe', 'livenessProbe', 'readinessProbe'] as const) {
      const probe = container[kind];
      if (probe === undefined) continue;
      const port = probe.httpGet?.port ?? probe.tcpSocket?.port;
      if (port === undefined) continue;
      const label = `${where}: container ${container.name} ${kind}`;
      const number = typeof port === 'string' ? portNumberOf(container, port) : port;
      if (number === undefined) {
        problems.push(`${label}: port "${port}" is not a port this container declares (probe port names resolve within the probed container)`);
        continue;
      }
      const owner = numbers.get(number);
      if (owner === undefined) {
        problems.push(`${label}: port ${number} is declared by no container`);
        continue;
      }
      const adminPort = portNumberOf(sidecar.container, 'metrics');
      if (number === adminPort && probe.httpGet !== undefined && !ADMIN_PATHS.has(probe.httpGet.path ?? '/')) {
        problems.push(`${label}: ${probe.httpGet.path} is not an admin endpoint (${[...ADMIN_PATHS].join(', ')})`);
      }
    }
  }
  for (const [kind, path] of [['livenessProbe', '/healthz'], ['readinessProbe', '/readyz']] as const) {
    const probe = sidecar.container[kind];
    if (probe?.httpGet?.path !== path || portNumberOf(sidecar.container, probe.httpGet.port) !== portNumberOf(sidecar.container, 'metrics')) {
      problems.push(`${where}: the sidecar's ${kind} must ask ${path} on its metrics port`);
    }
  }
  const startup = server.startupProbe;
  const startupBudgetS = startup === undefined ? 0 : (startup.periodSeconds ?? 10) * (startup.failureThreshold ?? 3);
  if (startupBudgetS < 600) problems.push(`${where}: vllm's startupProbe allows ${startupBudgetS} s; model loading needs minutes (at least 600 s)`);
  if ((deployment.spec.progressDeadlineSeconds ?? 600) < startupBudgetS) {
    problems.push(`${where}: progressDeadlineSeconds is shorter than vllm's startup budget (${startupBudgetS} s): rollouts would be reported as failed while the model loads`);
  }

  // Volumes and resources.
  const volumes = new Set((pod.volumes ?? []).map((v) => v.name));
  for (const container of containers) {
    for (const mount of container.volumeMounts ?? []) {
      if (!volumes.has(mount.name)) problems.push(`${where}: container ${container.name} mounts undeclared volume ${mount.name}`);
    }
    const { requests = {}, limits = {} } = container.resources ?? {};
    if (requests['cpu'] === undefined || requests['memory'] === undefined || limits['memory'] === undefined) {
      problems.push(`${where}: container ${container.name} needs cpu and memory requests and a memory limit`);
    }
  }
  if (server.resources?.limits?.['nvidia.com/gpu'] === undefined) problems.push(`${where}: vllm requests no nvidia.com/gpu`);
  return problems;
}

export interface ConfigSource {
  /** The ConfigMap's data, by key. */
  readonly data: Readonly<Record<string, string>>;
  readonly where: string;
}

/**
 * The sidecar's settings as it would load them in the pod: the ConfigMap's file where
 * TOKENTAP_CONFIG points, overridden by the container's TOKENTAP_* variables, through tokentap's
 * own loadSettings; then checked against the container ports, vLLM's command line and the
 * interval of the PodMonitor that scrapes it.
 */
export function settingsProblems(deployment: DeploymentLike, configMaps: ReadonlyMap<string, ConfigSource>, monitor: PodMonitorLike, where: string): string[] {
  const problems: string[] = [];
  const pod = deployment.spec.template.spec;
  const sidecar = sidecarOf(pod);
  const server = pod.containers.find((c) => c.name === MODEL_SERVER);
  if (sidecar === undefined || server === undefined) return [`${where}: no ${SIDECAR} or ${MODEL_SERVER} container`];
  const env = resolvedEnv(sidecar.container, problems, where);
  const configPath = env['TOKENTAP_CONFIG'];
  if (configPath === undefined) return [...problems, `${where}: the sidecar has no TOKENTAP_CONFIG`];
  const mount = sidecar.container.volumeMounts?.find((m) => path.posix.dirname(configPath) === m.mountPath);
  const volume = pod.volumes?.find((v) => v.name === mount?.name);
  const configMap = volume?.configMap === undefined ? undefined : configMaps.get(volume.configMap.name);
  const text = configMap?.data[path.posix.basename(configPath)];
  if (configMap === undefined || text === undefined) {
    return [...problems, `${where}: TOKENTAP_CONFIG=${configPath} is not a key of a ConfigMap mounted at ${path.posix.dirname(configPath)}`];
  }

  let settings;
  try {
    settings = loadSettings({ flags: {}, env, readFile: (file) => (file === configPath ? text : (() => { throw new Error(`${file}: not in the pod`); })()) });
  } catch (error) {
    return [...problems, `${where}: tokentap refuses the config (${configMap.where}): ${(error as Error).message}`];
  }
  const httpPort = portNumberOf(sidecar.container, 'http');
  const metricsPort = portNumberOf(sidecar.container, 'metrics');
  if (settings.listen.port !== httpPort) problems.push(`${where}: tokentap listens on ${settings.listen.port}, its "http" port is ${httpPort}`);
  if (settings.adminListen.port !== metricsPort) problems.push(`${where}: tokentap's admin listener is on ${settings.adminListen.port}, its "metrics" port is ${metricsPort}`);

  const serverArgs = [...(server.command ?? []), ...(server.args ?? [])];
  const host = flagValue(serverArgs, 'host');
  const port = flagValue(serverArgs, 'port');
  if (host !== '127.0.0.1') problems.push(`${where}: vllm must listen on loopback (--host=127.0.0.1), got ${host}`);
  if (settings.upstream.hostname !== host || settings.upstream.port !== port) {
    problems.push(`${where}: tokentap's upstream is ${settings.upstream.host}, vllm listens on ${host}:${port}`);
  }

  // Shutdown: the grace period must cover the longest path to the last exit.
  const shutdownTimeoutS = Number(flagValue(serverArgs, 'shutdown-timeout') ?? 0);
  if (!(shutdownTimeoutS > 0)) problems.push(`${where}: vllm has no --shutdown-timeout: it aborts in-flight requests on SIGTERM`);
  // After its drain, tokentap allows itself this long for the final OTLP export and exit.
  const flushS = SHUTDOWN_FLUSH_ALLOWANCE_MS / 1000;
  // final_scrape_wait keeps /metrics answering after the drain, before that allowance begins.
  const drainS = settings.drainTimeoutMs / 1000;
  const finalScrapeS = settings.finalScrapeWaitMs / 1000;
  const serverDoneS = preStopSeconds(server) + shutdownTimeoutS + VLLM_ENGINE_EXIT_S;
  const sidecarDoneS = sidecar.native
    ? serverDoneS + drainS + finalScrapeS + flushS // stopped only after vllm has exited
    : preStopSeconds(sidecar.container) + drainS + finalScrapeS + flushS; // stopped alongside vllm
  if (!sidecar.native && drainS < shutdownTimeoutS + VLLM_ENGINE_EXIT_S) {
    problems.push(`${where}: drain_timeout ${drainS} s is shorter than vllm's drain (${shutdownTimeoutS} + ${VLLM_ENGINE_EXIT_S} s): the sidecar would cut streams vllm is finishing`);
  }
  if (!sidecar.native && preStopSeconds(sidecar.container) < preStopSeconds(server)) {
    problems.push(`${where}: the plain sidecar's preStop sleep is shorter than vllm's: it would refuse connections still routed to the pod`);
  }
  const grace = pod.terminationGracePeriodSeconds ?? 30;
  const needed = Math.max(serverDoneS, sidecarDoneS);
  if (grace < needed) problems.push(`${where}: terminationGracePeriodSeconds ${grace} < ${needed} s needed (preStop + vllm drain + engine exit + sidecar drain + final scrape wait + flush)`);
  // The requests the drain finishes are recorded after the pod's last scrape: only a scrape during
  // final_scrape_wait reads them, and Prometheus comes once per interval (graceful-shutdown.md, step 5).
  // An endpoint without an interval gets the Prometheus resource's scrapeInterval (prometheus-operator: 30s unless set).
  const sidecarEndpoint = monitor.spec.podMetricsEndpoints.find((endpoint) => endpoint.port === 'metrics');
  const intervalS = (parseDurationMs(sidecarEndpoint?.interval ?? '30s') ?? Number.NaN) / 1000;
  if (sidecarEndpoint !== undefined && !(finalScrapeS >= intervalS)) {
    problems.push(`${where}: final_scrape_wait ${finalScrapeS} s is shorter than the PodMonitor's interval (${intervalS} s): the requests the drain finishes would be recorded after the pod's last scrape, lost to Prometheus`);
  }

  // OpenTelemetry variables: valid as set, and still valid once an endpoint turns export on.
  for (const extra of [{}, { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://otel-collector:4318' }]) {
    try {
      loadOtlpSettings({ ...env, ...extra });
    } catch (error) {
      problems.push(`${where}: OTEL_* variables: ${(error as Error).message}`);
    }
  }
  return problems;
}

/** The Service sends traffic to the sidecar's proxy port and selects the Deployment's pods. */
export function serviceProblems(service: ServiceLike, deployment: DeploymentLike, where: string): string[] {
  const problems: string[] = [];
  const pod = deployment.spec.template.spec;
  if (!matches(service.spec.selector, deployment.spec.template.metadata.labels)) problems.push(`${where}: Service ${service.metadata.name} selects no pod of ${deployment.metadata.name}`);
  const sidecar = sidecarOf(pod);
  for (const port of service.spec.ports) {
    const target = port.targetPort ?? port.port;
    const owner = allContainers(pod).find((c) => portNumberOf(c, target) !== undefined && (typeof target === 'string' || c.ports?.some((p) => p.containerPort === target)));
    if (owner === undefined) {
      problems.push(`${where}: Service ${service.metadata.name} port ${port.name ?? port.port} targets ${target}, which no container declares`);
    } else if (owner !== sidecar?.container || portNumberOf(owner, target) !== portNumberOf(owner, 'http')) {
      problems.push(`${where}: Service ${service.metadata.name} port ${port.name ?? port.port} targets ${owner.name}'s ${target}, not the sidecar's proxy port "http"`);
    } else if (sidecar?.native === true && typeof target === 'string') {
      // The EndpointSlice controller resolves an init container's named port only from 1.33
      // (kubernetes/kubernetes#128850, not backported): on 1.29 to 1.32 the Service has no endpoints.
      problems.push(`${where}: Service ${service.metadata.name} port ${port.name ?? port.port} targets the native sidecar's port by its name "${target}", which Kubernetes 1.29 to 1.32 never resolve (kubernetes/kubernetes#128850): use the number ${portNumberOf(owner, target)}`);
    }
  }
  return problems;
}

/** The PodMonitor scrapes the sidecar's admin port on the Deployment's pods. */
export function podMonitorProblems(monitor: PodMonitorLike, deployment: DeploymentLike, where: string): string[] {
  const problems: string[] = [];
  if (!matches(monitor.spec.selector.matchLabels, deployment.spec.template.metadata.labels)) problems.push(`${where}: PodMonitor ${monitor.metadata.name} selects no pod of ${deployment.metadata.name}`);
  const sidecar = sidecarOf(deployment.spec.template.spec);
  for (const endpoint of monitor.spec.podMetricsEndpoints) {
    const declaredBy = allContainers(deployment.spec.template.spec).find((c) => c.ports?.some((p) => p.name === endpoint.port));
    if (endpoint.port === undefined || declaredBy === undefined) {
      problems.push(`${where}: PodMonitor ${monitor.metadata.name} scrapes port "${endpoint.port}", which no container declares by name`);
    } else if (declaredBy !== sidecar?.container || endpoint.port !== 'metrics') {
      problems.push(`${where}: PodMonitor ${monitor.metadata.name} scrapes ${declaredBy.name}'s "${endpoint.port}", not the sidecar's "metrics"`);
    }
    if ((endpoint.path ?? '/metrics') !== '/metrics') problems.push(`${where}: PodMonitor ${monitor.metadata.name} scrapes ${endpoint.path}, not /metrics`);
  }
  return problems;
}
