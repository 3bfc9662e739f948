/**
 * Who "we" are on a GPU node: the pod the sidecar runs in and the GPUs given to it, from the
 * environment. POD_NAME and POD_NAMESPACE come from the downward API (`fieldRef: metadata.name`,
 * `metadata.namespace`); NVIDIA_VISIBLE_DEVICES is what the NVIDIA device plugin sets for a
 * container that requests GPUs (copy it into the sidecar container, or list the UUIDs by hand).
 */
export interface PodIdentity {
  readonly podName: string | undefined;
  readonly podNamespace: string | undefined;
  /** GPU or MIG UUIDs (`GPU-…`, `MIG-…`) from NVIDIA_VISIBLE_DEVICES. */
  readonly deviceUuids: ReadonlySet<string>;
  /** Host GPU indexes from NVIDIA_VISIBLE_DEVICES ("0,1"), matched against DCGM's `gpu` label. */
  readonly deviceIndexes: ReadonlySet<string>;
}

export const IDENTITY_ENV = {
  podName: 'POD_NAME',
  podNamespace: 'POD_NAMESPACE',
  visibleDevices: 'NVIDIA_VISIBLE_DEVICES',
} as const;

/**
 * `all`, `none`, `void` and an empty value name no GPU. `all` in particular is not taken to mean
 * "every GPU on the node": CUDA base images set NVIDIA_VISIBLE_DEVICES=all by default, so in a
 * sidecar it usually says nothing about which GPUs the pod was given, and claiming every GPU would
 * attribute other pods' memory to this workload, a wrong join that looks right.
 */
const NO_DEVICE_WORDS = new Set(['all', 'none', 'void', '']);

export function podIdentityFromEnv(env: Readonly<Record<string, string | undefined>>): PodIdentity {
  const deviceUuids = new Set<string>();
  const deviceIndexes = new Set<string>();
  for (const entry of (env[IDENTITY_ENV.visibleDevices] ?? '').split(',')) {
    const device = entry.trim();
    if (NO_DEVICE_WORDS.has(device.toLowerCase())) continue;
    if (/^\d+$/.test(device)) deviceIndexes.add(device);
    else deviceUuids.add(device);
  }
  return Object.freeze({
    podName: nonEmpty(env[IDENTITY_ENV.podName]),
    podNamespace: nonEmpty(env[IDENTITY_ENV.podNamespace]),
    deviceUuids,
    deviceIndexes,
  });
}

/** True when nothing identifies the pod or its GPUs, so no DCGM series can be claimed. */
export function isAnonymous(identity: PodIdentity): boolean {
  return identity.podName === undefined && identity.deviceUuids.size === 0 && identity.deviceIndexes.size === 0;
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value.trim() === '' ? undefined : value.trim();
}
