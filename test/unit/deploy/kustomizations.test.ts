import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { schemaProblems } from './kube-schema.js';
import { collectObjects, findKustomize, kustomizeBuild, parseYamlFile, readKustomization, referencedPaths, REPO } from './kustomize-tree.js';
import { podMonitorProblems, podProblems, serviceProblems, settingsProblems, type ConfigSource, type DeploymentLike, type PodMonitorLike, type ServiceLike } from './pod-wiring.js';

/**
 * The kustomize layout: deploy/kubernetes/{base,variants/*,overlays/example}, plus the small
 * kustomizations beside the rendered rule (deploy/prometheus) and dashboards (grafana). Every file
 * a kustomization names exists, every manifest is named by one, every dashboard is shipped; and,
 * where kustomize is installed, what it builds validates and is wired as the files say.
 */

const OVERLAY = path.join(REPO, 'deploy/kubernetes/overlays/example');
const BUILDS = ['deploy/kubernetes/overlays/example', 'deploy/kubernetes/variants/native-sidecar', 'deploy/kubernetes/variants/second-container'];
/** A ConfigMap's data may not exceed 1 MiB (etcd's object limit leaves no more). */
const CONFIGMAP_LIMIT_BYTES = 1024 * 1024;
const kustomize = findKustomize();
const build = (dir: string) => kustomizeBuild(kustomize as readonly string[], dir);

function kustomizationDirs(): string[] {
  const dirs: string[] = [];
  for (const root of ['deploy', 'grafana']) {
    const absolute = path.join(REPO, root);
    if (!existsSync(absolute)) continue;
    for (const entry of readdirSync(absolute, { recursive: true, withFileTypes: true })) {
      if (entry.isFile() && entry.name === 'kustomization.yaml') dirs.push(entry.parentPath);
    }
  }
  return dirs.sort();
}
const rel = (absolute: string) => path.relative(REPO, absolute);

describe('the kustomizations', () => {
  it('exist where the layout says', () => {
    expect(kustomizationDirs().map(rel)).toEqual(
      expect.arrayContaining(['deploy/kubernetes/base', 'deploy/kubernetes/overlays/example', 'deploy/kubernetes/variants/native-sidecar', 'deploy/kubernetes/variants/second-container', 'deploy/prometheus', 'grafana']),
    );
  });

  it('name only files and directories that exist, and directories that are kustomizations', () => {
    const missing: string[] = [];
    for (const dir of kustomizationDirs()) {
      for (const ref of referencedPaths(dir, readKustomization(dir))) {
        const where = `${rel(dir)}/kustomization.yaml ${ref.kind}: ${ref.written}`;
        if (!existsSync(ref.absolute)) missing.push(`${where} does not exist`);
        else if (statSync(ref.absolute).isDirectory() && !existsSync(path.join(ref.absolute, 'kustomization.yaml'))) missing.push(`${where} is a directory without kustomization.yaml`);
        else if (!statSync(ref.absolute).isDirectory() && !ref.kind.startsWith('configMapGenerator') && !ref.absolute.startsWith(`${dir}${path.sep}`)) {
          missing.push(`${where} is outside the kustomization's directory, which kustomize refuses`);
        }
      }
    }
    expect(missing).toEqual([]);
  });

  it('leave no manifest under deploy/kubernetes unused', () => {
    const named = new Set<string>();
    for (const dir of kustomizationDirs()) for (const ref of referencedPaths(dir, readKustomization(dir))) named.add(ref.absolute);
    const manifests = readdirSync(path.join(REPO, 'deploy/kubernetes'), { recursive: true, withFileTypes: true })
      .filter((entry) => entry.isFile() && /\.ya?ml$/.test(entry.name) && entry.name !== 'kustomization.yaml')
      .map((entry) => path.join(entry.parentPath, entry.name));
    expect(manifests.filter((file) => !named.has(file)).map(rel)).toEqual([]);
  });

  it('ship every dashboard in one ConfigMap labelled for Grafana\'s dashboard sidecar, within the ConfigMap size limit', () => {
    const dashboards = readdirSync(path.join(REPO, 'grafana')).filter((name) => name.endsWith('.json')).sort();
    expect(dashboards.length).toBeGreaterThan(0);
    const configMaps = collectObjects(path.join(REPO, 'grafana')).map((o) => o.object as { metadata: { name: string; labels?: Record<string, string> }; data: Record<string, string> });
    expect(configMaps).toHaveLength(1);
    const [configMap] = configMaps as [(typeof configMaps)[number]];
    expect(configMap.metadata.labels).toEqual({ grafana_dashboard: '1' });
    expect(Object.keys(configMap.data).sort()).toEqual(dashboards);
    for (const [name, json] of Object.entries(configMap.data)) {
      const dashboard = JSON.parse(json) as { uid?: unknown; title?: unknown };
      expect([typeof dashboard.uid, typeof dashboard.title], name).toEqual(['string', 'string']);
    }
    const bytes = Object.values(configMap.data).reduce((sum, json) => sum + Buffer.byteLength(json), 0);
    expect(bytes).toBeLessThan(CONFIGMAP_LIMIT_BYTES);
  });

  it('patch kinds the overlay really holds (a target that matches nothing is silently skipped)', () => {
    const kinds = new Set(collectObjects(OVERLAY).map((o) => String(o.object['kind'])));
    const overlay = readKustomization(OVERLAY);
    expect(overlay.patches?.length).toBeGreaterThan(0);
    for (const patch of overlay.patches ?? []) {
      for (const kind of (patch.target?.['kind'] ?? '').split('|')) expect(kinds, `patch target kind ${kind}`).toContain(kind);
    }
    expect([...kinds].sort()).toEqual(['ConfigMap', 'Deployment', 'PodMonitor', 'PrometheusRule', 'Service']);
  });

  it('hold the rendered PrometheusRule as a valid prometheus-operator object', () => {
    const rules = collectObjects(path.join(REPO, 'deploy/prometheus'));
    expect(rules.map((o) => o.object['kind'])).toEqual(['PrometheusRule']);
    expect(rules.flatMap((o) => schemaProblems(o.object, o.file))).toEqual([]);
    for (const file of readKustomization(path.join(REPO, 'deploy/prometheus')).resources ?? []) {
      expect(parseYamlFile(path.join(REPO, 'deploy/prometheus', file)).length).toBeGreaterThan(0);
    }
  });
});

describe.skipIf(kustomize === undefined)(`what ${kustomize?.join(' ') ?? 'kustomize build (not installed: skipped)'} builds`, () => {
  it.each(BUILDS)('%s: validates against the schemas and is wired as the files say', (dir) => {
    const objects = build(path.join(REPO, dir));
    expect(objects.flatMap((object) => schemaProblems(object, dir))).toEqual([]);
    const of = <T>(kind: string) => objects.filter((o) => o['kind'] === kind) as T[];
    const [deployment] = of<DeploymentLike>('Deployment');
    const [service] = of<ServiceLike>('Service');
    const [podMonitor] = of<PodMonitorLike>('PodMonitor');
    expect([deployment, service, podMonitor].every((o) => o !== undefined)).toBe(true);
    const configMaps = new Map<string, ConfigSource>(of<{ metadata: { name: string }; data: Record<string, string> }>('ConfigMap').map((c) => [c.metadata.name, { data: c.data, where: dir }]));
    // The config ConfigMap's name carries kustomize's content hash, and the volume follows it.
    expect([...configMaps.keys()].some((name) => /^tokentap-config-[a-z0-9]{10}$/.test(name))).toBe(true);
    const d = deployment as DeploymentLike;
    expect([
      ...podProblems(d, dir),
      ...settingsProblems(d, configMaps, dir),
      ...serviceProblems(service as ServiceLike, d, dir),
      ...podMonitorProblems(podMonitor as PodMonitorLike, d, dir),
    ]).toEqual([]);
  });

  it('the example overlay: one namespace, the pushed image, and the release label kube-prometheus-stack selects by', () => {
    const objects = build(OVERLAY) as { kind: string; metadata: { namespace?: string; labels?: Record<string, string> }; spec?: unknown }[];
    expect(new Set(objects.map((o) => o.metadata.namespace))).toEqual(new Set(['llm-serving']));
    const images = JSON.stringify(objects.filter((o) => o.kind === 'Deployment').map((o) => o.spec)).match(/"image":"[^"]+"/g);
    expect(images?.sort()).toEqual(['"image":"registry.example.com/platform/tokentap:0.1.0"', '"image":"vllm/vllm-openai:v0.30.0"']);
    const released = objects.filter((o) => o.metadata.labels?.['release'] === 'kube-prometheus-stack').map((o) => o.kind);
    expect(released.sort()).toEqual(['PodMonitor', 'PrometheusRule']);
    const dashboards = objects.find((o) => o.kind === 'ConfigMap' && o.metadata.labels?.['grafana_dashboard'] === '1') as { metadata: { name?: string } } | undefined;
    expect(dashboards?.metadata.name).toBe('tokentap-dashboards');
  });

  it('the built config is byte for byte the repository\'s deploy/tokentap.yaml', () => {
    const objects = build(OVERLAY) as { kind: string; metadata: { name: string }; data?: Record<string, string> }[];
    const config = objects.find((o) => o.kind === 'ConfigMap' && o.metadata.name.startsWith('tokentap-config-'));
    expect(config?.data?.['tokentap.yaml']).toBe(readFileSync(path.join(REPO, 'deploy/tokentap.yaml'), 'utf8'));
  });
});
