import { execFile } from 'node:child_process';
import { copyFile, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { loadSettings, type Settings } from '../../src/config/load.js';
import { renderArtefacts } from '../../src/render/artefacts.js';
import { EXISTING_CONFIG, mergeTokentapRoutes } from '../helpers/alertmanager-merge.js';
import { requireTools } from '../helpers/required-tools.js';

beforeAll(() => requireTools('promtool', 'amtool'));

/**
 * The rendered rules under the real tools: `promtool check rules`, `amtool check-config` on an
 * existing Alertmanager configuration with tokentap's routes merged in, and the
 * `promtool test rules` unit tests beside this file (*.promtool.yaml), run against rules rendered
 * from ./tokentap.yaml. Each test file names `rules.yaml`; it is run from a temporary directory
 * holding a copy of it and the freshly rendered rules.
 */
const HERE = fileURLToPath(new URL('.', import.meta.url));

/**
 * promtool's time, measured on the shared 2-core machine: one-page.promtool.yaml takes 6 s of CPU
 * (11 s wall at load 8), the other files 1-4 s. With two busy loops beside the suite it gets a
 * fraction of a core, so the default 30 s test timeout failed correct rules. promtool is given 120 s
 * (killed then, its output shown) and each test 150 s, so a hung promtool still fails the test.
 */
const PROMTOOL_TIMEOUT_MS = 120_000;
const PROMTOOL_TEST_TIMEOUT_MS = 150_000;

interface Run {
  code: number;
  output: string;
}

function run(command: string, args: string[], cwd: string): Promise<Run> {
  return new Promise((resolve) => {
    execFile(command, args, { cwd, timeout: PROMTOOL_TIMEOUT_MS }, (error, stdout, stderr) => {
      const code = error === null ? 0 : typeof error.code === 'number' ? error.code : -1;
      resolve({ code, output: `${stdout}${stderr}` });
    });
  });
}

const settingsFrom = (yaml: string): Settings => loadSettings({ flags: { config: 'tokentap.yaml' }, env: {}, readFile: () => yaml });

/** A temporary directory with the rendered artefacts flat in it and copies of the promtool test files. */
async function renderInto(settings: Settings): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'tokentap-promtool-'));
  for (const artefact of renderArtefacts(settings, { windowScale: 1 })) {
    if (artefact.root === 'out') await writeFile(join(dir, artefact.path.split('/').pop() as string), artefact.content);
  }
  for (const file of await readdir(HERE)) if (file.endsWith('.promtool.yaml')) await copyFile(join(HERE, file), join(dir, file));
  return dir;
}

let dir: string;
let configYaml: string;

beforeAll(async () => {
  configYaml = await readFile(join(HERE, 'tokentap.yaml'), 'utf8');
  dir = await renderInto(settingsFrom(configYaml));
});

afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('rendered rules under promtool and amtool', { timeout: PROMTOOL_TEST_TIMEOUT_MS }, () => {
  it('pass promtool check rules', async () => {
    const result = await run('promtool', ['check', 'rules', 'rules.yaml'], dir);
    expect(result.output).toMatch(/SUCCESS: \d+ rules found/);
    expect(result.code, result.output).toBe(0);
  });

  it('come with Alertmanager routes that, merged into an existing configuration, pass amtool check-config', async () => {
    const snippet = parse(await readFile(join(dir, 'tokentap-routes.yaml'), 'utf8')) as Parameters<typeof mergeTokentapRoutes>[1];
    await writeFile(join(dir, 'merged.yaml'), stringify(mergeTokentapRoutes(EXISTING_CONFIG, snippet)));
    const result = await run('amtool', ['check-config', 'merged.yaml'], dir);
    expect(result.output).toContain('SUCCESS');
    expect(result.output).toContain('3 inhibit rules');
    expect(result.output).toContain('5 receivers');
    expect(result.code, result.output).toBe(0);
  });

  it('route each tokentap alert to the receiver the merged configuration says, and leave the rest of it alone', async () => {
    const snippet = parse(await readFile(join(dir, 'tokentap-routes.yaml'), 'utf8')) as Parameters<typeof mergeTokentapRoutes>[1];
    await writeFile(join(dir, 'merged.yaml'), stringify(mergeTokentapRoutes(EXISTING_CONFIG, snippet)));
    // amtool prints the receiver on the first line (and may warn on stderr after it).
    const receiverOf = async (...labels: string[]) => (await run('amtool', ['config', 'routes', 'test', '--config.file=merged.yaml', ...labels], dir)).output.split('\n')[0]?.trim();
    expect(await receiverOf('alertname=TokentapErrorBudgetBurn', 'severity=critical', 'workload=chat', 'slo=ttft')).toBe('tokentap-page');
    expect(await receiverOf('alertname=TokentapTTFTP99OverBudget', 'severity=warning', 'workload=chat', 'slo=ttft')).toBe('tokentap-ticket');
    expect(await receiverOf('alertname=TokentapWatchdog', 'severity=none')).toBe('tokentap-watchdog');
    expect(await receiverOf('alertname=TokentapMetricsAbsent', 'severity=warning', 'namespace=prod')).toBe('tokentap-ticket');
    expect(await receiverOf('alertname=TokentapTargetDown', 'severity=warning', 'namespace=prod', 'job=prod/tokentap', 'endpoint=metrics')).toBe('tokentap-ticket');
    // The watchdog has no workload, SLO or namespace; with a team's static label it still goes to its switch, not the team's pager.
    expect(await receiverOf('alertname=TokentapWatchdog', 'severity=none', 'team=llm-platform')).toBe('tokentap-watchdog');
    expect(await receiverOf('alertname=Watchdog', 'severity=none')).toBe('null');
    expect(await receiverOf('alertname=KubePodCrashLooping', 'severity=critical')).toBe('platform-team');
  });

  it.each(['burn-rate.promtool.yaml', 'p99-ttft.promtool.yaml', 'traffic-guard.promtool.yaml', 'namespaces.promtool.yaml', 'one-page.promtool.yaml', 'absent-metrics.promtool.yaml', 'capacity.promtool.yaml', 'cost.promtool.yaml', 'itl-guard.promtool.yaml', 'upstream-down.promtool.yaml', 'slo-not-in-rules.promtool.yaml'])('pass the promtool unit tests in %s', async (file) => {
    const result = await run('promtool', ['test', 'rules', file], dir);
    expect(result.code, result.output).toBe(0);
    expect(result.output).toContain('SUCCESS');
  });

  it('pass promtool check rules with what the config accepts beyond the usual: RE2 flags, named groups, escapes and classes in the scrape selector, a space in a link', async () => {
    // Every regular expression the config accepts beyond the plain ones (escapes and classes that look like lookaround or backreferences, \Q...\E, POSIX classes, the largest repeat).
    const pod = String.raw`\\(?=x|[(?=]x|a\\\\1|\\Q(\\E|\\d+|[[:alpha:]]+|\\pL|x{1000}|a\tb`;
    const unusual = configYaml.replace('  grafana_url: https://grafana.example.com', `  grafana_url: https://grafana.example.com/my grafana\n  scrape_selector: 'job=~"(?i)(?P<ns>.+/)?tokentap", endpoint=~"(?i:metrics)|", pod=~"${pod}"'`);
    expect(unusual).not.toBe(configYaml);
    const rendered = await renderInto(settingsFrom(unusual));
    try {
      const result = await run('promtool', ['check', 'rules', 'rules.yaml'], rendered);
      expect(result.code, result.output).toBe(0);
      const rules = await readFile(join(rendered, 'rules.yaml'), 'utf8');
      expect(rules).toContain('https://grafana.example.com/my%20grafana/d/');
      expect(rules).toContain(`up{job=~"(?i)(?P<ns>.+/)?tokentap", endpoint=~"(?i:metrics)|", pod=~"${pod}"} == 0`);
    } finally {
      await rm(rendered, { recursive: true, force: true });
    }
  });

  it('keep every static alert label value exactly as written, however hostile: quotes, backslashes, braces, =~, a newline, unicode, 10,000 characters', async () => {
    const hostile = {
      quoted: 'a"b\'c',
      slashed: 'C:\\new\\"x"',
      braces: '{workload=~".*"} } {',
      matcher: 'x=~".+"|y!="z"',
      lines: 'first\nsecond\ttab',
      unicode: 'ünïcødé ✓ 日本 🚀 \u202e',
      long: 'x'.repeat(10_000),
    };
    const labels = Object.entries(hostile).map(([name, value]) => `    ${name}: ${JSON.stringify(value)}`).join('\n');
    const withLabels = configYaml.replace('alerts:\n', `alerts:\n  labels:\n${labels}\n`);
    expect(withLabels).not.toBe(configYaml);
    const rendered = await renderInto(settingsFrom(withLabels));
    try {
      expect((await run('promtool', ['check', 'rules', 'rules.yaml'], rendered)).code).toBe(0);
      // The watchdog always fires: its labels are the static ones and its severity, as Prometheus evaluates them.
      const labels = Object.entries({ __name__: 'ALERTS', alertname: 'TokentapWatchdog', alertstate: 'firing', severity: 'none', ...hostile }).map(([name, value]) => `${name}=${JSON.stringify(value)}`);
      const test = {
        rule_files: ['rules.yaml'],
        evaluation_interval: '1m',
        tests: [{ interval: '1m', input_series: [], promql_expr_test: [{ expr: 'ALERTS{alertname="TokentapWatchdog"}', eval_time: '1m', exp_samples: [{ labels: `{${labels.join(', ')}}`, value: 1 }] }] }],
      };
      await writeFile(join(rendered, 'labels.promtool.yaml'), stringify(test));
      const result = await run('promtool', ['test', 'rules', 'labels.promtool.yaml'], rendered);
      expect(result.code, result.output).toBe(0);
    } finally {
      await rm(rendered, { recursive: true, force: true });
    }
  });

  it('fail those unit tests when the rules change (an objective of 70 % cannot page at 20 % bad)', async () => {
    const loose = await renderInto(settingsFrom(configYaml.replace('slo: { objective: 0.99, ttft: 200ms, itl: 50ms }', 'slo: { objective: 0.7, ttft: 200ms, itl: 50ms }')));
    try {
      const result = await run('promtool', ['test', 'rules', 'burn-rate.promtool.yaml'], loose);
      expect(result.code).not.toBe(0);
      expect(result.output).toContain('20 % of chat requests slower than 200ms for an hour pages');
    } finally {
      await rm(loose, { recursive: true, force: true });
    }
  });

  it('fail the one-page tests when the P99 alert pages, as it once did: a 2x burn pages and a 20x burn pages twice', async () => {
    const paging = await renderInto(settingsFrom(`${configYaml}  p99_ttft_severity: page\n`));
    try {
      const result = await run('promtool', ['test', 'rules', 'one-page.promtool.yaml'], paging);
      expect(result.code).not.toBe(0);
      // promtool names the failing expression and time, not the test: 2h50m is the 2x case, 1h the 20x case.
      expect(result.output).toMatch(/time: 2h50m,\s+exp: \{__name__="ALERTS", alertname="TokentapErrorBudgetBurn"[^\n]*\n\s+got: [^\n]*alertname="TokentapTTFTP99OverBudget", alertstate="firing", severity="critical"/);
      expect(result.output).toMatch(/expr: "count\(ALERTS\{alertstate=\\"firing\\", severity=\\"critical\\"\}\)", time: 1h,\s+exp: \{\} 1E\+00\s+got: \{\} 2E\+00/);
    } finally {
      await rm(paging, { recursive: true, force: true });
    }
  });

  /** Runs the promtool test file `file` against the rendered rules.yaml after `edit`. */
  async function testsWith(file: string, edit: (rules: string) => string): Promise<Run> {
    const edited = await renderInto(settingsFrom(configYaml));
    try {
      const rules = await readFile(join(edited, 'rules.yaml'), 'utf8');
      const changed = edit(rules);
      expect(changed).not.toBe(rules);
      await writeFile(join(edited, 'rules.yaml'), changed);
      return await run('promtool', ['test', 'rules', file], edited);
    } finally {
      await rm(edited, { recursive: true, force: true });
    }
  }
  const namespaceTestsWith = (edit: (rules: string) => string) => testsWith('namespaces.promtool.yaml', edit);

  it('fail the one-page tests when client errors count as traffic for the guard', async () => {
    const result = await testsWith('one-page.promtool.yaml', (rules) => rules.replaceAll(', outcome!="client_error"', ''));
    expect(result.code).not.toBe(0);
    expect(result.output).toMatch(/time: 2h50m,\s+exp: nil\s+got: \{__name__="ALERTS", alertname="TokentapErrorBudgetBurn"/);
  });

  it('fail the one-page tests when the P99 alert has no sample guard of its own', async () => {
    const result = await testsWith('one-page.promtool.yaml', (rules) => rules.replace(/\[5m\]\)\) >= 100/g, '[5m])) >= 0'));
    expect(result.code).not.toBe(0);
    expect(result.output).toMatch(/time: 1h,\s+exp: [^\n]*\n\s+got: [^\n]*alertname="TokentapTTFTP99OverBudget"/);
  });

  it('fail the absent-metrics tests with the absent alert of before, which forgot a namespace an hour after its metrics vanished', async () => {
    const remembering = [
      'count by (namespace) (last_over_time(tokentap_build_info[1h]))',
      'unless on (namespace)',
      'count by (namespace) (tokentap_build_info)',
    ].join('\n');
    const result = await testsWith('absent-metrics.promtool.yaml', (rules) =>
      rules.replace(/expr: absent\(tokentap_build_info\{namespace="prod"\}\)/, `expr: |-\n          ${remembering.replaceAll('\n', '\n          ')}`),
    );
    expect(result.code).not.toBe(0);
    // Never scraped: nothing to remember, no alert at 10m; stopped: forgotten, no alert at 4h.
    expect(result.output).toMatch(/alertname: TokentapMetricsAbsent, time: 10m,\s+exp:\[\s+0:\s+Labels:\{alertname="TokentapMetricsAbsent", namespace="prod", severity="warning"\}/);
    expect(result.output).toMatch(/alertname: TokentapMetricsAbsent, time: 4h,\s+exp:\[\s+0:\s+Labels:\{alertname="TokentapMetricsAbsent", namespace="prod", severity="warning"\}[\s\S]*?got:\[\]/);
  });

  it('fail the absent-metrics tests when the target-down alert also watches the engine endpoint of the same PodMonitor', async () => {
    const result = await testsWith('absent-metrics.promtool.yaml', (rules) => rules.replace('endpoint=~"metrics|"', 'endpoint=~".*"'));
    expect(result.code).not.toBe(0);
    expect(result.output).toContain('endpoint="8000"');
  });

  it('fail the ITL guard tests without the guard: one long slow request in a quiet hour pages', async () => {
    const unguarded = await renderInto(settingsFrom(`${configYaml}  itl_min_slow_requests: 0\n`));
    try {
      const result = await run('promtool', ['test', 'rules', 'itl-guard.promtool.yaml'], unguarded);
      expect(result.code).not.toBe(0);
      expect(result.output).toMatch(/alertname: TokentapErrorBudgetBurn, time: 7h2m,\s+exp:\[\],\s+got:\[\s+0:\s+Labels:\{[^}]*severity="critical", slo="itl"/);
    } finally {
      await rm(unguarded, { recursive: true, force: true });
    }
  });

  it('fail the capacity tests when capacity is the highest held band, above the knee too', async () => {
    const result = await testsWith('capacity.promtool.yaml', (rules) => rules.replace(/(record: tokentap:capacity_in_flight:slo\n\s+expr: )\|-\n[^\n]+\n[^\n]+\n\s+(max by \(namespace, workload\) \(\(tokentap:capacity_band_held:bool == 1\)[^\n]+\)) unless on[^\n]+/, '$1$2'));
    expect(result.code).not.toBe(0);
    expect(result.output).toMatch(/expr: "tokentap:capacity_in_flight:slo", time: 1h,\s+exp:[^\n]*\n\s+got:[^\n]*workload="chat"\} 1\.28E\+02/);
  });

  it('fail the capacity tests when the headroom ticket also fires on an "at least" capacity', async () => {
    const result = await testsWith('capacity.promtool.yaml', (rules) => rules.replace('and on (namespace)\n          tokentap:mix_capacity_in_flight_at_least:bool == 0', 'and on (namespace)\n          tokentap:mix_capacity_in_flight_at_least:bool >= 0'));
    expect(result.code).not.toBe(0);
    expect(result.output).toContain('namespace="staging"');
  });

  it('fail the namespace tests when the rules aggregate by workload alone, as they once did', async () => {
    const result = await namespaceTestsWith((rules) => rules.replace(/\b(by|on) \(namespace, /g, '$1 ('));
    expect(result.code).not.toBe(0);
    expect(result.output).toContain('a slow prod chat pages for namespace prod only');
    expect(result.output).toContain('got: {slo="ttft", workload="chat"} 2E+02');
  });

  it('fail the namespace tests when only the traffic guard ignores the namespace', async () => {
    const result = await namespaceTestsWith((rules) => rules.replace(/and on \(namespace, workload\)\n(\s*)sum by \(namespace, workload\)/g, 'and on (workload)\n$1sum by (workload)'));
    expect(result.code).not.toBe(0);
    expect(result.output).not.toContain('a slow prod chat pages for namespace prod only');
    expect(result.output).toContain('busy healthy prod does not lift quiet slow staging over the traffic guard');
  });
});
