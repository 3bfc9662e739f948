import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadSettings } from '../../../src/config/load.js';
import { parseYamlFile, REPO } from './kustomize-tree.js';

/**
 * TokentapTargetDown reads `up{<alerts.scrape_selector>}`; the PodMonitors of deploy/kubernetes give
 * the targets their labels. The two live in different files, so this test holds them together: for
 * each PodMonitor endpoint, the labels prometheus-operator gives its target (`job` =
 * `<namespace>/<name>` unless a relabeling replaces it, `endpoint` = the port's name or the target
 * port), matched against the default selector as Prometheus matches (anchored regular expressions).
 */

const POD_MONITORS = ['deploy/kubernetes/components/tokentap-shared/podmonitor.yaml', 'deploy/kubernetes/base/podmonitor.yaml'];

interface Endpoint {
  port?: string;
  targetPort?: number | string;
  relabelings?: { targetLabel?: string; replacement?: string; sourceLabels?: string[] }[];
}

/** The labels of one endpoint's targets that the selector reads, in namespace `ns`. */
function targetLabels(name: string, endpoint: Endpoint, ns: string): Record<string, string> {
  const labels: Record<string, string> = { job: `${ns}/${name}`, endpoint: endpoint.port ?? String(endpoint.targetPort) };
  for (const rule of endpoint.relabelings ?? []) {
    // Only fixed replacements are read here; a rule built from source labels would need Prometheus itself.
    if (rule.targetLabel !== undefined && rule.replacement !== undefined && rule.sourceLabels === undefined) labels[rule.targetLabel] = rule.replacement;
  }
  return labels;
}

/** `a="x", b=~"y|"` as Prometheus applies it to a label set (`=`, `!=`, `=~`, `!~`, regexes anchored). */
function matches(selector: string, labels: Record<string, string>): boolean {
  const matcher = /\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*(?:,|$)/gy;
  let matched = 0;
  let all = true;
  for (const [whole, name = '', op = '', quoted = ''] of selector.matchAll(matcher)) {
    matched += whole.length;
    const value = labels[name] ?? '';
    const text = JSON.parse(`"${quoted}"`) as string;
    const hit = op === '=' || op === '!=' ? value === text : new RegExp(`^(?:${text})$`).test(value);
    if (op.startsWith('!') ? hit : !hit) all = false;
  }
  expect(matched, `selector ${selector} read whole`).toBe(selector.length);
  return all;
}

const selector = loadSettings({ flags: {}, env: {}, readFile: () => '' }).alerts.scrapeSelector;

describe('the default alerts.scrape_selector and the PodMonitors of deploy/kubernetes', () => {
  it.each(POD_MONITORS)('picks the sidecar endpoint of %s and not the engine endpoint, in any namespace', (file) => {
    const [monitor] = parseYamlFile(path.join(REPO, file)) as { metadata: { name: string }; spec: { podMetricsEndpoints: Endpoint[] } }[];
    const endpoints = monitor!.spec.podMetricsEndpoints;
    const sidecar = endpoints.filter((e) => e.port === 'metrics');
    const others = endpoints.filter((e) => e.port !== 'metrics');
    expect(sidecar).toHaveLength(1);
    for (const ns of ['llm-serving', 'team-a']) {
      expect(matches(selector, targetLabels(monitor!.metadata.name, sidecar[0]!, ns)), `${file} sidecar in ${ns}`).toBe(true);
      for (const other of others) expect(matches(selector, targetLabels(monitor!.metadata.name, other, ns)), `${file} engine in ${ns}`).toBe(false);
    }
  });

  it('matches what the matcher reader says it does (a selector that leaves out the endpoint label picks the engine too)', () => {
    expect(matches('job=~"(.+/)?tokentap"', { job: 'tokentap-engine', endpoint: '8000' })).toBe(false);
    expect(matches('job=~".*tokentap.*"', { job: 'tokentap-engine', endpoint: '8000' })).toBe(true);
    expect(matches('job="tokentap", endpoint!="8000"', { job: 'tokentap', endpoint: '8000' })).toBe(false);
  });
});
