import type { AlertSettings, SloKind } from '../config/load.js';
import { SLO_KINDS } from '../config/load.js';
import { runbookUrl } from './alert-links.js';
import { BURN_ALERT } from './burn-rate-alerts.js';
import type { PanelLink } from './dashboard-panels.js';
import { P99_TTFT_ALERT } from './p99-ttft-alert.js';

/**
 * The runbooks a per-workload panel links to: the alerts that fire on what it draws. The URLs are
 * the alerts' own `runbook_url` (alert-links.ts), so a panel and the alert that sent on-call to it
 * open the same page. A repeated row serves every workload, so the links cover every SLO kind,
 * whichever the workload has.
 */
export interface SloLinks {
  /** The burn-rate runbook of each SLO kind: panels that show all kinds (attainment, budget, burn rate). */
  readonly every: readonly PanelLink[];
  readonly ttft: readonly PanelLink[];
  readonly itl: readonly PanelLink[];
  readonly e2e: readonly PanelLink[];
}

const SLO_TITLE: Record<SloKind, string> = { ttft: 'TTFT', itl: 'ITL', e2e: 'e2e' };

export function sloRunbookLinks(alerts: AlertSettings): SloLinks {
  const burn = (kind: SloKind): PanelLink => ({ title: `Runbook: ${BURN_ALERT} (${SLO_TITLE[kind]})`, url: runbookUrl(alerts, BURN_ALERT, kind) });
  return {
    every: SLO_KINDS.map(burn),
    ttft: [burn('ttft'), { title: `Runbook: ${P99_TTFT_ALERT}`, url: runbookUrl(alerts, P99_TTFT_ALERT) }],
    itl: [burn('itl')],
    e2e: [burn('e2e')],
  };
}
