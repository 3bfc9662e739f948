import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { findKustomizes, KUSTOMIZE_TEST_TIMEOUT_MS, kustomizeBuild, NO_KUSTOMIZE, REPO } from './kustomize-tree.js';

/**
 * docs/alerts.md, "Your own configuration as a cluster package", as a team on kube-prometheus-stack
 * follows it after Path 1 of docs/kubernetes.md. A newcomer's reproduction: the pages showed how to
 * render a configuration (`--out rendered`) and how to apply `deploy/cluster`, which holds the
 * example's rules, and nothing that put the rules of one's own workloads into the cluster with the
 * `release` label kube-prometheus-stack's ruleSelector asks for (without it: no alert at all).
 */

interface KubeObject {
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  spec?: { groups: { name: string; rules: { alert?: string; record?: string; expr: string }[] }[] };
  data?: Record<string, string>;
}

function page(name: string): string {
  return readFileSync(path.join(REPO, 'docs', name), 'utf8');
}

/** The lines of `markdown` under the heading `from`, up to the next heading of its level or higher (fenced code skipped). */
function section(markdown: string, from: string): string {
  const lines = markdown.split('\n');
  const start = lines.indexOf(from);
  if (start === -1) throw new Error(`no section "${from}"`);
  const level = /^#+/.exec(from)?.[0].length ?? 1;
  let fenced = false;
  let end = start + 1;
  for (; end < lines.length; end++) {
    const line = lines[end] as string;
    if (line.startsWith('```')) fenced = !fenced;
    else if (!fenced && new RegExp(`^#{1,${level}} `).test(line)) break;
  }
  return lines.slice(start + 1, end).join('\n');
}

function codeBlocks(markdown: string, language: string): string[] {
  return [...markdown.matchAll(new RegExp(`^\`\`\`${language}\\n([\\s\\S]*?)^\`\`\`$`, 'gm'))].map((m) => m[1] as string);
}

/** Path 1's `overlay/config/tokentap.yaml` with alerts.md's `alerts:` example appended: the page's "with an `alerts:` section as above". */
function teamConfig(): string {
  const path1 = codeBlocks(section(page('kubernetes.md'), '### Path 1: kustomize Component (your own manifests)'), 'yaml')[0] ?? '';
  const sidecarConfig = path1.split(/^---\n/m).find((document) => document.startsWith('# overlay/config/tokentap.yaml'));
  const alerts = codeBlocks(page('alerts.md'), 'yaml').find((block) => block.startsWith('alerts:'));
  if (sidecarConfig === undefined || alerts === undefined) throw new Error('docs/kubernetes.md Path 1 or docs/alerts.md lost its config example');
  return `${sidecarConfig}${alerts}`;
}

const kustomizes = findKustomizes();
const documented = section(page('alerts.md'), '### Your own configuration as a cluster package');
let dir: string;

beforeAll(() => {
  dir = mkdtempSync(path.join(tmpdir(), 'tokentap-own-cluster-'));
  writeFileSync(path.join(dir, 'tokentap.yaml'), teamConfig());
});

afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** The page's render command, run where the team keeps its files (only the launcher's path made absolute). */
function renderAsDocumented(): void {
  const command = codeBlocks(documented, 'sh')[0]?.replace(/#.*$/m, '').trim() ?? '';
  expect(command).toMatch(/^node bin\/tokentap\.js render /);
  const [, launcher, ...args] = command.split(/\s+/);
  execFileSync(process.execPath, [path.join(REPO, launcher as string), ...args], { cwd: dir, stdio: 'pipe' });
}

describe.skipIf(kustomizes.length === 0)(`docs/alerts.md's own cluster package, built with ${kustomizes.map((k) => k.join(' ')).join(', ') || NO_KUSTOMIZE}`, { timeout: KUSTOMIZE_TEST_TIMEOUT_MS }, () => {
  it("puts the team's rules, labelled for kube-prometheus-stack, and its dashboards into the cluster", () => {
    renderAsDocumented();
    const kustomization = codeBlocks(documented, 'yaml')[0] ?? '';
    expect(kustomization.startsWith('# cluster/kustomization.yaml\n')).toBe(true);
    writeFileSync(path.join(dir, 'cluster', 'kustomization.yaml'), kustomization);

    const rendered = parse(readFileSync(path.join(dir, 'cluster', 'prometheus', 'prometheusrule.yaml'), 'utf8')) as KubeObject;
    const dashboards = readdirSync(path.join(dir, 'cluster', 'grafana')).sort();
    for (const command of kustomizes) {
      const objects = kustomizeBuild(command, path.join(dir, 'cluster')) as unknown as KubeObject[];
      expect(objects.map((o) => o.kind).sort()).toEqual(['ConfigMap', 'PrometheusRule']);
      expect(new Set(objects.map((o) => o.metadata.namespace))).toEqual(new Set(['monitoring']));

      const rule = objects.find((o) => o.kind === 'PrometheusRule') as KubeObject;
      // The same label the overlay gives the PodMonitor and deploy/cluster the example's rule.
      expect(rule.metadata.labels?.['release']).toBe('kube-prometheus-stack');
      expect(rule.spec).toEqual(rendered.spec);
      const rules = rule.spec?.groups.flatMap((g) => g.rules) ?? [];
      const alerts = new Set(rules.map((r) => r.alert).filter((a) => a !== undefined));
      for (const alert of ['TokentapErrorBudgetBurn', 'TokentapUpstreamDown', 'TokentapSLONotInRules', 'TokentapWatchdog']) expect(alerts).toContain(alert);
      // The team's workload and SLOs, not the example's.
      const objectives = rules.filter((r) => r.record === 'tokentap:slo_objective:ratio').map((r) => (r as { labels?: Record<string, string> }).labels);
      expect(objectives).toEqual([{ workload: 'chat', slo: 'ttft' }, { workload: 'chat', slo: 'itl' }]);

      const configMap = objects.find((o) => o.kind === 'ConfigMap') as KubeObject;
      expect(configMap.metadata.name).toBe('tokentap-dashboards');
      expect(configMap.metadata.labels).toEqual({ grafana_dashboard: '1' });
      expect(Object.keys(configMap.data ?? {}).sort()).toEqual(dashboards);
    }
  });

  it('keeps the kustomization when the configuration is rendered again', () => {
    mkdirSync(path.join(dir, 'cluster'), { recursive: true });
    writeFileSync(path.join(dir, 'cluster', 'kustomization.yaml'), codeBlocks(documented, 'yaml')[0] ?? '');
    renderAsDocumented();
    expect(readFileSync(path.join(dir, 'cluster', 'kustomization.yaml'), 'utf8')).toBe(codeBlocks(documented, 'yaml')[0]);
  });
});
