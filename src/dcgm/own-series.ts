import type { ExpositionSample } from './exposition-parser.js';
import type { PodIdentity } from './pod-identity.js';

/**
 * Keeps the DCGM series that belong to this pod.
 *
 * 1. A series with pod labels is ours when its pod (and namespace, when both sides know it) is
 *    ours. The exporter writes `pod`/`namespace`; a relabelling hop in between may have renamed
 *    them `exported_pod`/`exported_namespace`, so both spellings are read. Another pod's series is
 *    never ours, even on the same GPU (MIG instances of one GPU shared by two pods).
 * 2. A series without pod labels (pod mapping off or broken, or a GPU-level field such as
 *    DCGM_FI_DEV_GPU_UTIL next to per-MIG-instance memory) is ours when its GPU is: its `UUID`
 *    is one of our pod-labelled series' GPUs or listed in NVIDIA_VISIBLE_DEVICES, or its `gpu`
 *    index is listed there.
 * The host label (`Hostname` in older exporters, `hostname` in newer) is not consulted: the
 * exporter is the node-local one, and the join is by pod or GPU UUID.
 */
export function selectOwnSeries(samples: readonly ExpositionSample[], identity: PodIdentity): ExpositionSample[] {
  const ownUuids = new Set(identity.deviceUuids);
  const unlabelled: ExpositionSample[] = [];
  const own: ExpositionSample[] = [];
  for (const sample of samples) {
    const pod = podOf(sample.labels);
    if (pod === undefined) {
      unlabelled.push(sample);
      continue;
    }
    if (pod !== identity.podName) continue;
    const namespace = namespaceOf(sample.labels);
    if (namespace !== undefined && identity.podNamespace !== undefined && namespace !== identity.podNamespace) continue;
    own.push(sample);
    const uuid = sample.labels.UUID;
    if (uuid) ownUuids.add(uuid);
  }
  for (const sample of unlabelled) {
    const uuid = sample.labels.UUID;
    const index = sample.labels.gpu;
    if ((uuid !== undefined && ownUuids.has(uuid)) || (index !== undefined && identity.deviceIndexes.has(index))) own.push(sample);
  }
  return own;
}

function podOf(labels: Readonly<Record<string, string>>): string | undefined {
  return labels.pod || labels.exported_pod || undefined;
}

function namespaceOf(labels: Readonly<Record<string, string>>): string | undefined {
  return labels.namespace || labels.exported_namespace || undefined;
}
