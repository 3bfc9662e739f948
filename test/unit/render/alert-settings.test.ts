import { describe, expect, it } from 'vitest';
import { problemsOf } from '../../helpers/problems.js';
import { loadSettings } from '../../../src/config/load.js';

const load = (yaml: string) => loadSettings({ flags: { config: 'a.yaml' }, env: {}, readFile: () => yaml });

const refusals = (yaml: string): readonly string[] => problemsOf(() => load(yaml));

describe('the alerts section', () => {
  it('defaults to a 10m page for P99 TTFT, 60 requests per hour, and the README and SLO dashboard as links', () => {
    expect(loadSettings({ flags: {}, env: {} }).alerts).toEqual({
      runbookUrl: 'https://github.com/tokentap/tokentap/blob/main/README.md',
      dashboardUrl: '/d/tokentap-slo-overview',
      p99TtftForMs: 600_000,
      p99TtftSeverity: 'page',
      minRequestsPerHour: 60,
    });
  });

  it('reads every setting', () => {
    const alerts = load(`
alerts:
  runbook_url: https://wiki.example.com/tokentap
  dashboard_url: /d/mine
  p99_ttft_for: 90s
  p99_ttft_severity: ticket
  min_requests_per_hour: 0
`).alerts;
    expect(alerts).toEqual({ runbookUrl: 'https://wiki.example.com/tokentap', dashboardUrl: '/d/mine', p99TtftForMs: 90_000, p99TtftSeverity: 'ticket', minRequestsPerHour: 0 });
    expect(Object.isFrozen(alerts)).toBe(true);
  });

  it.each([
    ['alerts:\n  p99_ttft_for: ten minutes\n', 'a.yaml:2: alerts.p99_ttft_for: expected a positive duration like "200ms", "30s" or "5m", got "ten minutes"'],
    ['alerts:\n  p99_ttft_severity: critical\n', 'a.yaml:2: alerts.p99_ttft_severity: expected "page" or "ticket"'],
    ['alerts:\n  min_requests_per_hour: -1\n', 'a.yaml:2: alerts.min_requests_per_hour: expected a number of requests per hour, 0 or more'],
    ['alerts:\n  min_requests_per_hour: many\n', 'a.yaml:2: alerts.min_requests_per_hour: expected a number of requests per hour, e.g. 60'],
    ['alerts:\n  runbook_url: ftp://files.example.com/runbook\n', 'a.yaml:2: alerts.runbook_url: expected an http:// or https:// URL, got "ftp:"'],
    ['alerts:\n  dashboard_url: grafana dashboard\n', 'a.yaml:2: alerts.dashboard_url: expected an http:// or https:// URL (or a path starting with "/"), got "grafana dashboard"'],
    ['alerts:\n  p99_for: 5m\n', 'a.yaml:2: alerts.p99_for: unknown setting'],
  ])('refuses %j with the place and the problem', (yaml, problem) => {
    expect(refusals(yaml)).toEqual([problem]);
  });

  it('reports every problem in the section at once', () => {
    expect(refusals('alerts:\n  p99_ttft_severity: warning\n  min_requests_per_hour: -5\n')).toHaveLength(2);
  });
});
