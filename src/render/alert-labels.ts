import type { AlertLevel, AlertSettings } from '../config/load.js';

/**
 * The labels of every tokentap alert: `severity` (the configured name of its level, or `none` for
 * the always-firing watchdog), the alert's own labels, then the configured static labels (team,
 * service), which the config schema keeps from replacing any label tokentap sets.
 */
export function alertLabels(alerts: AlertSettings, level: AlertLevel | 'none', own: Readonly<Record<string, string>>): Record<string, string> {
  return { severity: level === 'none' ? 'none' : alerts.severityNames[level], ...own, ...alerts.extraLabels };
}

/** Every tokentap alert's name starts with this, so routes and inhibitions can select them all. */
export const ALERT_NAME_PREFIX = 'Tokentap';
