import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { problemsOf } from '../../helpers/problems.js';
import { loadSettings } from '../../../src/config/load.js';
import { missingAlertLinks } from '../../../src/render/alert-links.js';

const load = (yaml: string) => loadSettings({ flags: { config: 'a.yaml' }, env: {}, readFile: () => yaml });

const refusals = (yaml: string): readonly string[] => problemsOf(() => load(yaml));

describe('the alerts section', () => {
  it('defaults to critical pages and warning tickets, a 15m P99 ticket over 100 first tokens, 60 requests per hour, the PodMonitor\'s sidecar target, and no link bases', () => {
    expect(loadSettings({ flags: {}, env: {} }).alerts).toEqual({
      grafanaUrl: undefined,
      runbookBaseUrl: undefined,
      severityNames: { page: 'critical', ticket: 'warning' },
      extraLabels: {},
      p99TtftForMs: 900_000,
      p99TtftLevel: 'ticket',
      p99TtftMinRequests: 100,
      minRequestsPerHour: 60,
      itlMinSlowRequests: 3,
      absentForMs: 600_000,
      scrapeSelector: 'job=~"(.+/)?tokentap", endpoint=~"metrics|"',
      expectedNamespaces: [],
    });
  });

  it('reads every setting', () => {
    const alerts = load(`
alerts:
  grafana_url: https://grafana.example.com/
  runbook_base_url: https://wiki.example.com/tokentap
  severity_names: { page: P1, ticket: P3 }
  labels: { team: llm }
  p99_ttft_for: 90s
  p99_ttft_severity: off
  p99_ttft_min_requests: 0
  min_requests_per_hour: 0
  itl_min_slow_requests: 5
  absent_for: 1m
  scrape_selector: 'job="kubernetes-pods", container="tokentap"'
  expected_namespaces: [prod, staging]
`).alerts;
    expect(alerts).toEqual({
      grafanaUrl: 'https://grafana.example.com',
      runbookBaseUrl: 'https://wiki.example.com/tokentap',
      severityNames: { page: 'P1', ticket: 'P3' },
      extraLabels: { team: 'llm' },
      p99TtftForMs: 90_000,
      p99TtftLevel: 'off',
      p99TtftMinRequests: 0,
      minRequestsPerHour: 0,
      itlMinSlowRequests: 5,
      absentForMs: 60_000,
      scrapeSelector: 'job="kubernetes-pods", container="tokentap"',
      expectedNamespaces: ['prod', 'staging'],
    });
    expect(Object.isFrozen(alerts)).toBe(true);
  });

  it.each([
    ['alerts:\n  p99_ttft_for: ten minutes\n', 'a.yaml:2: alerts.p99_ttft_for: expected a positive duration like "200ms", "30s" or "5m", got "ten minutes"'],
    ['alerts:\n  p99_ttft_severity: critical\n', 'a.yaml:2: alerts.p99_ttft_severity: expected "ticket", "page" or "off" (the level; severity_names maps it to the label value)'],
    ['alerts:\n  min_requests_per_hour: -1\n', 'a.yaml:2: alerts.min_requests_per_hour: expected a number of requests per hour, 0 or more'],
    ['alerts:\n  min_requests_per_hour: many\n', 'a.yaml:2: alerts.min_requests_per_hour: expected a number of requests per hour, e.g. 60'],
    ['alerts:\n  itl_min_slow_requests: 1.5\n', 'a.yaml:2: alerts.itl_min_slow_requests: expected a whole number of requests, e.g. 3'],
    ['alerts:\n  p99_ttft_min_requests: 2.5\n', 'a.yaml:2: alerts.p99_ttft_min_requests: expected a whole number of requests'],
    ['alerts:\n  grafana_url: /grafana\n', 'a.yaml:2: alerts.grafana_url: expected an absolute http:// or https:// URL such as https://grafana.example.com, got "/grafana" (alerts are read in PagerDuty, Slack and e-mail, where a relative link leads nowhere)'],
    ['alerts:\n  grafana_url: https://grafana.example.com/?orgId=2\n', 'a.yaml:2: alerts.grafana_url: must not carry a query string or fragment (tokentap appends the path and the query)'],
    ['alerts:\n  runbook_base_url: ftp://files.example.com/runbooks\n', 'a.yaml:2: alerts.runbook_base_url: expected an http:// or https:// URL, got "ftp:"'],
    [
      'alerts:\n  grafana_url: https://admin:hunter2@grafana.internal\n',
      'a.yaml:2: alerts.grafana_url: must not carry a user name or password: the link is copied into every alert and dashboard panel, read in PagerDuty, Slack and e-mail; let the server ask for the login',
    ],
    [
      'alerts:\n  runbook_base_url: https://oauth2:glpat-token@git.internal/runbooks\n',
      'a.yaml:2: alerts.runbook_base_url: must not carry a user name or password: the link is copied into every alert and dashboard panel, read in PagerDuty, Slack and e-mail; let the server ask for the login',
    ],
    ['alerts:\n  runbook_base_url: https://wiki.internal/{{ $labels.pod }}\n', 'a.yaml:2: alerts.runbook_base_url: must not hold "{{" or "}}": Prometheus expands alert labels and annotations as templates'],
    ['alerts:\n  labels: { service: "{{ $value }}" }\n', 'a.yaml:2: alerts.labels.service: must not hold "{{" or "}}": Prometheus expands alert labels and annotations as templates'],
    ['alerts:\n  absent_for: 3000000h\n', 'a.yaml:2: alerts.absent_for: expected a duration of at most 8760h (a year), got "3000000h"'],
    [`alerts:\n  p99_ttft_for: ${'9'.repeat(300)}h\n`, `a.yaml:2: alerts.p99_ttft_for: expected a duration of at most 8760h (a year), got "${'9'.repeat(300)}h"`],
    ['alerts:\n  severity_names: { page: warning }\n', 'a.yaml:2: alerts.severity_names: page and ticket need different severity names (the Alertmanager inhibition tells them apart by it)'],
    ['alerts:\n  severity_names: { page: "wake me up" }\n', 'a.yaml:2: alerts.severity_names.page: expected a severity label value of letters, digits, "_", "." or "-", such as "critical"'],
    ['alerts:\n  labels: { severity: high }\n', 'a.yaml:2: alerts.labels.severity: tokentap sets this label itself (alertname, severity, namespace, workload, slo); choose another name'],
    ['alerts:\n  labels: { team-name: llm }\n', 'a.yaml:2: alerts.labels.team-name: expected a Prometheus label name (letters, digits and "_", not starting with a digit or "__")'],
    ['alerts:\n  runbook_url: https://wiki.example.com\n', 'a.yaml:2: alerts.runbook_url: unknown setting'],
    ['alerts:\n  dashboard_url: https://grafana.example.com/d/x\n', 'a.yaml:2: alerts.dashboard_url: unknown setting'],
    [
      'alerts:\n  scrape_selector: \'{job="tokentap"}\'\n',
      'a.yaml:2: alerts.scrape_selector: expected PromQL label matchers without braces, e.g. \'job=~"(.+/)?tokentap", endpoint=~"metrics|"\' (name, one of = != =~ !~, a double-quoted value; comma-separated)',
    ],
    [
      "alerts:\n  scrape_selector: job='tokentap'\n",
      'a.yaml:2: alerts.scrape_selector: expected PromQL label matchers without braces, e.g. \'job=~"(.+/)?tokentap", endpoint=~"metrics|"\' (name, one of = != =~ !~, a double-quoted value; comma-separated)',
    ],
    [
      'alerts:\n  scrape_selector: \'job=~"(tokentap"\'\n',
      'a.yaml:2: alerts.scrape_selector: the regular expression of job does not compile (Invalid regular expression: /(tokentap/: Unterminated group): Prometheus would refuse the rule file',
    ],
    [
      'alerts:\n  scrape_selector: \'job=~"tokentap(?!-canary)"\'\n',
      "a.yaml:2: alerts.scrape_selector: the regular expression of job uses lookaround, which Prometheus's regular expressions (RE2) do not have: Prometheus would refuse the rule file",
    ],
    [
      'alerts:\n  scrape_selector: \'job="x", pod=~"(a)\\\\1"\'\n',
      "a.yaml:2: alerts.scrape_selector: the regular expression of pod uses a backreference, which Prometheus's regular expressions (RE2) do not have: Prometheus would refuse the rule file",
    ],
    [
      'alerts:\n  scrape_selector: \'job=~"tokentap\\d+"\'\n',
      'a.yaml:2: alerts.scrape_selector: the value of job holds "\\d", which a PromQL string does not take (write "\\\\d" for the regular expression\'s \\d): Prometheus would refuse the rule file',
    ],
    [
      'alerts:\n  scrape_selector: \'job=~"tokentap", pod=~"x{1001}"\'\n',
      "a.yaml:2: alerts.scrape_selector: the regular expression of pod repeats more than 1000 times, RE2's limit: Prometheus would refuse the rule file",
    ],
    ['alerts:\n  expected_namespaces: prod\n', 'a.yaml:2: alerts.expected_namespaces: expected a list of namespace names, e.g. [prod, staging]'],
    ['alerts:\n  expected_namespaces: [Prod]\n', 'a.yaml:2: alerts.expected_namespaces[0]: expected a Kubernetes namespace name: lower-case letters, digits and "-", at most 63'],
    ['alerts:\n  expected_namespaces: [prod, prod]\n', 'a.yaml:2: alerts.expected_namespaces[1]: duplicate namespace "prod"'],
  ])('refuses %j with the place and the problem', (yaml, problem) => {
    expect(refusals(yaml)).toEqual([problem]);
  });

  it('accepts the alerts section docs/alerts.md shows, as written, with nothing render would refuse', () => {
    const page = readFileSync(new URL('../../../docs/alerts.md', import.meta.url), 'utf8');
    const snippet = [...page.matchAll(/```yaml\n(alerts:\n[\s\S]*?)```/g)].map((m) => m[1] as string);
    expect(snippet).toHaveLength(1);
    const alerts = load(snippet[0] as string).alerts;
    expect(missingAlertLinks(alerts, 'a.yaml')).toEqual([]);
    expect(alerts.expectedNamespaces).toEqual(['prod', 'staging']);
    expect(alerts.scrapeSelector).toBe('job=~"(.+/)?tokentap", endpoint=~"metrics|"');
  });

  it.each([String.raw`\\(?=x`, '[(?=]x', String.raw`a\\\\1`, String.raw`\\Q(\\E`, String.raw`\\d+`, '[[:alpha:]]+', String.raw`\\pL`, '.*', 'x{1000}', String.raw`a\tb`])(
    'accepts %s in a scrape selector, as Prometheus does (escapes and character classes are not read as lookaround or backreferences)',
    (regex) => {
      expect(load(`alerts:\n  scrape_selector: 'job=~"${regex}"'\n`).alerts.scrapeSelector).toBe(`job=~"${regex}"`);
    },
  );

  it('accepts RE2 spellings JavaScript lacks in a scrape selector, and writes a link base as a URL (a space percent-encoded)', () => {
    const alerts = load(`
alerts:
  grafana_url: https://grafana.internal/my grafana/
  scrape_selector: 'job=~"(?i)(?P<ns>.+/)?tokentap", container=~"(?i:side)car"'
`).alerts;
    expect(alerts.grafanaUrl).toBe('https://grafana.internal/my%20grafana');
    expect(alerts.scrapeSelector).toBe('job=~"(?i)(?P<ns>.+/)?tokentap", container=~"(?i:side)car"');
  });

  it('refuses a timer setting past what a Node timer can wait, naming it', () => {
    expect(refusals('dcgm:\n  url: http://127.0.0.1:9400/metrics\n  interval: 1000h\n')).toEqual([
      'a.yaml:3: dcgm.interval: expected a duration of at most 596h (about 24 days, the longest a Node timer waits), got "1000h"',
    ]);
    expect(refusals('drain_timeout: 600h\n')).toEqual(['a.yaml:1: drain_timeout: expected a duration of at most 596h (about 24 days, the longest a Node timer waits), got "600h"']);
    expect(load('capacity:\n  window: 720h\n').capacity.windowMs).toBe(720 * 3_600_000);
  });

  it('refuses a label value that is not valid Unicode (a lone surrogate), which would make the rule file one Prometheus cannot read', () => {
    expect(refusals('alerts:\n  labels:\n    team: "llm\\ud800"\n    ok: "ünïcødé \\u2713"\n')).toEqual([
      'a.yaml:3: alerts.labels.team: expected text of whole Unicode characters: "\\ud800" is half of one (a lone surrogate), which no rule file can hold',
    ]);
  });

  it('reports every problem in the section at once', () => {
    expect(refusals('alerts:\n  p99_ttft_severity: warning\n  min_requests_per_hour: -5\n')).toHaveLength(2);
  });
});
