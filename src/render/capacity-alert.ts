import type { Settings } from '../config/load.js';
import { alertLabels } from './alert-labels.js';
import { dashboardUrl, runbookUrl } from './alert-links.js';
import { CAPACITY_RECORD } from './capacity-rules.js';
import { percent } from './human-format.js';
import { IN_NAMESPACE } from './namespace-template.js';
import { formatPromDuration } from './prometheus-duration.js';
import { NAMESPACE_LABEL, promNumber } from './promql.js';
import { scaledMs, type AlertingRule, type RenderOptions } from './rule-types.js';

/**
 * TokentapCapacityHeadroomLow: a ticket (never a page: nothing is broken yet, it is time to add
 * pods in working hours) when the busiest pod's observed peak in flight comes within
 * `capacity.headroom_ticket_ratio` of the pod mix's capacity at SLO. Only a measured capacity
 * counts: while no band has broken, capacity is "at least N" and the headroom a lower bound, so a
 * ticket then would say only that the pods were never pushed (docs/capacity-and-cost.md).
 */
export const CAPACITY_HEADROOM_ALERT = 'TokentapCapacityHeadroomLow';

/** Long enough that one evaluation of a fresh knee (a band just crossing min_samples_per_band) does not open a ticket. */
const FOR_MS = 30 * 60_000;

export function capacityHeadroomAlert(settings: Settings, options: RenderOptions): AlertingRule {
  const mix = CAPACITY_RECORD.mix;
  const ratio = settings.capacity.headroomTicketRatio;
  return {
    alert: CAPACITY_HEADROOM_ALERT,
    expr: `${mix.headroom} < ${promNumber(ratio)}\nand on (${NAMESPACE_LABEL})\n${mix.atLeast} == 0`,
    for: formatPromDuration(scaledMs(FOR_MS, options)),
    labels: alertLabels(settings.alerts, 'ticket', {}),
    annotations: {
      summary: `tokentap pods${IN_NAMESPACE}: peak load within ${percent(ratio)} of capacity at SLO`,
      description:
        `The busiest pod${IN_NAMESPACE} peaked at {{ with printf "${CAPACITY_RECORD.peakInFlight}{${NAMESPACE_LABEL}='%s'}" $labels.${NAMESPACE_LABEL} | query }}{{ . | first | value }}{{ end }} requests in flight over the last ${formatPromDuration(scaledMs(settings.capacity.peakWindowMs, options))}; ` +
        `one pod holds {{ with printf "${mix.inFlight}{${NAMESPACE_LABEL}='%s'}" $labels.${NAMESPACE_LABEL} | query }}{{ . | first | value }}{{ end }} within every workload's SLOs, ` +
        `so {{ $value | humanizePercentage }} of capacity is left (a ticket below ${percent(ratio)}). ` +
        `Pods needed at the observed peak: {{ with printf "${mix.podsNeeded}{${NAMESPACE_LABEL}='%s'}" $labels.${NAMESPACE_LABEL} | query }}{{ . | first | value }}{{ else }}unknown{{ end }}.`,
      runbook_url: runbookUrl(settings.alerts, CAPACITY_HEADROOM_ALERT),
      dashboard_url: dashboardUrl(settings.alerts),
    },
  };
}
