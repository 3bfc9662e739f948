import { SLO_KINDS, type Settings, type SloKind, type Workload } from '../config/load.js';
import { alertLabels } from './alert-labels.js';
import { dashboardUrl, runbookUrl } from './alert-links.js';
import { causesHint } from './engine-panels.js';
import { BURN_RATE_POLICIES, windowMs, type BurnRateCondition, type BurnRatePolicy, type SliWindowName } from './burn-rate-windows.js';
import { humanSeconds, percent } from './human-format.js';
import { IN_NAMESPACE } from './namespace-template.js';
import { formatPromDuration } from './prometheus-duration.js';
import { LABEL, WORKLOAD_KEY, labelList, promNumber, selector } from './promql.js';
import { RECORD } from './recording-rules.js';
import { scaledMs, type AlertingRule, type RenderOptions } from './rule-types.js';
import { GUARD_MATCH, itlSlowRequestsGuard, trafficGuard } from './traffic-guard.js';

/**
 * TokentapErrorBudgetBurn: one page and one ticket alert per workload and SLO, each firing when any
 * of its burn-rate conditions holds (burn-rate-windows.ts) and the workload has enough traffic.
 * Like Sloth, the conditions of one severity are joined with `or` into one rule, so a burn that
 * meets both pages once, not twice.
 */

export const BURN_ALERT = 'TokentapErrorBudgetBurn';

/** What a bad event is, for the alert description. */
const BAD_EVENT: Record<SloKind, (threshold: string) => string> = {
  ttft: (t) => `requests whose first token took longer than ${t} (or never came)`,
  itl: (t) => `tokens that came more than ${t} after the previous one`,
  e2e: (t) => `requests that took longer than ${t} or failed`,
};

const SLO_TITLE: Record<SloKind, string> = { ttft: 'TTFT', itl: 'ITL', e2e: 'e2e latency' };

function conditionExpr(workload: string, slo: SloKind, budget: number, condition: BurnRateCondition, settings: Settings, options: RenderOptions): string {
  const ratio = (window: SliWindowName) => selector(RECORD.errorRatio(window), { [LABEL.workload]: workload, [LABEL.slo]: slo });
  const limit = `(${promNumber(condition.factor)} * ${promNumber(budget)})`;
  const longRange = formatPromDuration(scaledMs(windowMs(condition.long), options));
  const itlGuard = slo === 'itl' && settings.alerts.itlMinSlowRequests > 0 ? [`  ${GUARD_MATCH}`, `  ${itlSlowRequestsGuard(workload, longRange, settings.alerts.itlMinSlowRequests)}`] : [];
  return [
    `(`,
    `  ${ratio(condition.long)} > ${limit}`,
    `  and on (${labelList(...WORKLOAD_KEY, LABEL.slo)})`,
    `  ${ratio(condition.short)} > ${limit}`,
    `  ${GUARD_MATCH}`,
    `  ${trafficGuard(workload, longRange, settings.alerts.minRequestsPerHour)}`,
    ...itlGuard,
    `)`,
  ].join('\n');
}

function describeConditions(budget: number, policy: BurnRatePolicy, options: RenderOptions): string {
  const window = (name: SliWindowName) => formatPromDuration(scaledMs(windowMs(name), options));
  return policy.conditions
    .map((c) => `above ${percent(c.factor * budget)} (${promNumber(c.factor)}x the budget) over both ${window(c.long)} and ${window(c.short)}`)
    .join(', or ');
}

/**
 * Which window `$value` covers: `or` keeps its left side where both hold, so the value is the first
 * holding condition's long-window error ratio.
 */
function valueWindow(policy: BurnRatePolicy, options: RenderOptions): string {
  const [first, ...rest] = policy.conditions.map((c) => formatPromDuration(scaledMs(windowMs(c.long), options)));
  return rest.length === 0 ? `the last ${first}` : `the last ${first} (${rest.join(', ')} when only a slower condition holds)`;
}

function burnAlert(workload: Workload, slo: SloKind, thresholdS: number, policy: BurnRatePolicy, settings: Settings, options: RenderOptions): AlertingRule {
  const objective = (workload.slo as NonNullable<Workload['slo']>).objective;
  const budget = 1 - objective;
  const pace = policy.severity === 'page' ? 'fast' : 'steadily';
  return {
    alert: BURN_ALERT,
    expr: policy.conditions.map((c) => conditionExpr(workload.name, slo, budget, c, settings, options)).join('\nor\n'),
    labels: alertLabels(settings.alerts, policy.severity, { [LABEL.workload]: workload.name, [LABEL.slo]: slo }),
    annotations: {
      summary: `${workload.name}${IN_NAMESPACE}: ${SLO_TITLE[slo]} error budget burning ${pace}`,
      description:
        `{{ $value | humanizePercentage }} of ${workload.name}'s ${SLO_TITLE[slo]} events${IN_NAMESPACE} over ${valueWindow(policy, options)} were bad: ` +
        `${BAD_EVENT[slo](humanSeconds(thresholdS))}. The objective (${percent(objective)} good) allows ${percent(budget)}. ` +
        `This ${policy.severity} fires while the bad share is ${describeConditions(budget, policy, options)}, ` +
        `with at least ${promNumber(settings.alerts.minRequestsPerHour)} requests per hour${itlGuardText(slo, settings)}. ${causesHint(workload.name, slo)}`,
      runbook_url: runbookUrl(settings.alerts, BURN_ALERT, slo),
      dashboard_url: dashboardUrl(settings.alerts, workload.name),
    },
  };
}

/** The ITL guard as the description says it; nothing for the other SLOs or with the guard off. */
function itlGuardText(slo: SloKind, settings: Settings): string {
  const minimum = settings.alerts.itlMinSlowRequests;
  return slo === 'itl' && minimum > 0 ? ` and at least ${promNumber(minimum)} requests with a slow token in the long window` : '';
}

export function burnRateAlerts(settings: Settings, options: RenderOptions): AlertingRule[] {
  const rules: AlertingRule[] = [];
  for (const workload of settings.workloads) {
    for (const slo of SLO_KINDS) {
      const thresholdS = workload.slo?.thresholdsS[slo];
      if (thresholdS === undefined) continue;
      for (const policy of BURN_RATE_POLICIES) rules.push(burnAlert(workload, slo, thresholdS, policy, settings, options));
    }
  }
  return rules;
}
