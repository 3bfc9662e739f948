import { SHUTDOWN_FLUSH_ALLOWANCE_MS } from '../../../src/cli/serve.js';
import { parseDurationMs } from '../../../src/config/duration.js';

/**
 * What the sidecar promises about the pod it joins, beyond being wired: it passes Pod Security
 * "restricted", the engine stays the container `kubectl logs`/`exec` pick without -c, the grace
 * period outlasts its own stop, and its scrape targets carry a `job` label alerts can match.
 * Each function returns the problems it found ([] when kept).
 */

export interface SecurityContext {
  runAsNonRoot?: boolean;
  runAsUser?: number;
  privileged?: boolean;
  allowPrivilegeEscalation?: boolean;
  capabilities?: { drop?: string[]; add?: string[] };
  seccompProfile?: { type: string };
}
interface Container {
  name: string;
  env?: { name: string; value?: string }[];
  lifecycle?: { preStop?: { exec?: { command: string[] }; sleep?: { seconds: number } } };
  securityContext?: SecurityContext;
}
interface Pod {
  containers: Container[];
  initContainers?: Container[];
  securityContext?: SecurityContext;
  terminationGracePeriodSeconds?: number;
}

/** The job label the PodMonitors give the sidecar's and the engine's scrape targets. */
export const SIDECAR_JOB = 'tokentap';
export const ENGINE_JOB = 'tokentap-engine';
const DEFAULT_CONTAINER = 'kubectl.kubernetes.io/default-container';
/** Kubernetes' terminationGracePeriodSeconds when a pod does not set one. */
const DEFAULT_GRACE_S = 30;

/**
 * The container-level rules of Pod Security "restricted" (kubernetes.io/docs/concepts/security/
 * pod-security-standards): not privileged, no privilege escalation, runs as non-root (container or
 * pod), drops ALL capabilities and adds none but NET_BIND_SERVICE, and a RuntimeDefault or
 * Localhost seccomp profile (container or pod).
 */
export function restrictedProblems(pod: Pod, container: Container, where: string): string[] {
  const own = container.securityContext ?? {};
  const podLevel = pod.securityContext ?? {};
  const problems: string[] = [];
  const at = `${where}: container ${container.name}`;
  if (own.privileged === true) problems.push(`${at} is privileged`);
  if (own.allowPrivilegeEscalation !== false) problems.push(`${at} must set allowPrivilegeEscalation: false`);
  if ((own.runAsNonRoot ?? podLevel.runAsNonRoot) !== true) problems.push(`${at} must run with runAsNonRoot: true`);
  if ((own.runAsUser ?? podLevel.runAsUser) === 0) problems.push(`${at} runs as UID 0`);
  if (!(own.capabilities?.drop ?? []).includes('ALL')) problems.push(`${at} must drop ALL capabilities`);
  const added = (own.capabilities?.add ?? []).filter((c) => c !== 'NET_BIND_SERVICE');
  if (added.length > 0) problems.push(`${at} adds capabilities ${added.join(', ')}`);
  const seccomp = own.seccompProfile?.type ?? podLevel.seccompProfile?.type;
  if (seccomp !== 'RuntimeDefault' && seccomp !== 'Localhost') problems.push(`${at} needs seccompProfile RuntimeDefault (or Localhost), on the container or the pod; has ${seccomp ?? 'none'}`);
  return problems;
}

/** The container `kubectl logs`/`exec` use without -c: the annotation's, else the first of `containers`. */
export function defaultContainerProblems(annotations: Readonly<Record<string, string>> | undefined, pod: Pod, engine: string, where: string): string[] {
  const named = annotations?.[DEFAULT_CONTAINER];
  const chosen = named ?? pod.containers[0]?.name;
  if (chosen !== engine) return [`${where}: kubectl would pick container ${chosen} without -c (${named === undefined ? 'the first container' : `annotation ${DEFAULT_CONTAINER}`}), not the engine ${engine}`];
  if (named !== undefined && !pod.containers.some((c) => c.name === named)) return [`${where}: ${DEFAULT_CONTAINER} names ${named}, which is not a container`];
  return [];
}

function preStopSeconds(container: Container): number {
  const hook = container.lifecycle?.preStop;
  if (hook?.sleep !== undefined) return hook.sleep.seconds;
  const command = hook?.exec?.command;
  return command?.[0] === 'sleep' && command.length === 2 ? Number(command[1]) : 0;
}

/**
 * The grace period covers the sidecar's own stop: a plain second container gets SIGTERM with the
 * engine, after its preStop sleep, then drains (TOKENTAP_DRAIN_TIMEOUT) and allows itself
 * SHUTDOWN_FLUSH_ALLOWANCE_MS for the final export; a native sidecar does the same after the engine
 * has exited (the engine's own time is the workload's and not counted here).
 */
export function graceProblems(pod: Pod, sidecar: Container, native: boolean, where: string): string[] {
  const drain = sidecar.env?.find((v) => v.name === 'TOKENTAP_DRAIN_TIMEOUT')?.value;
  const drainMs = drain === undefined ? undefined : parseDurationMs(drain);
  if (drainMs === undefined) return [`${where}: the sidecar sets no TOKENTAP_DRAIN_TIMEOUT duration (${drain ?? 'absent'}), so its stop cannot be checked against the grace period`];
  const drainS = drainMs / 1000;
  const needed = (native ? 0 : preStopSeconds(sidecar)) + drainS + SHUTDOWN_FLUSH_ALLOWANCE_MS / 1000;
  const grace = pod.terminationGracePeriodSeconds ?? DEFAULT_GRACE_S;
  return grace < needed ? [`${where}: terminationGracePeriodSeconds ${grace} < ${needed} s the sidecar needs to stop (${native ? '' : 'preStop + '}drain ${drainS} s + final export): its drain would be killed`] : [];
}

interface Endpoint {
  port?: string;
  targetPort?: number | string;
  portNumber?: number;
  relabelings?: { targetLabel?: string; replacement?: string; sourceLabels?: string[]; action?: string }[];
}

/** The fixed `job` an endpoint's relabelings give its targets (a replace with no source labels), or undefined. */
export function jobOf(endpoint: Endpoint): string | undefined {
  const rule = [...(endpoint.relabelings ?? [])].reverse().find((r) => r.targetLabel === 'job');
  const fixed = rule !== undefined && (rule.action ?? 'replace') === 'replace' && (rule.sourceLabels ?? []).length === 0;
  return fixed ? rule.replacement : undefined;
}

/** The sidecar's endpoint (a named port, `metrics`) is job SIDECAR_JOB; the engine's (a port number, as the engine may declare no name) is ENGINE_JOB. */
export function scrapeJobProblems(endpoints: readonly Endpoint[], where: string): string[] {
  return endpoints.flatMap((endpoint) => {
    const expected = endpoint.port !== undefined ? SIDECAR_JOB : ENGINE_JOB;
    const job = jobOf(endpoint);
    const name = endpoint.port ?? String(endpoint.portNumber ?? endpoint.targetPort);
    return job === expected ? [] : [`${where}: the PodMonitor endpoint ${name} gives job=${job ?? '<namespace>/<PodMonitor name> (the default)'}, not ${expected}`];
  });
}
