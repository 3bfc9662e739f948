import type { ConsoleMessage } from 'playwright-core';

/**
 * Chromium's log line for the traffic-shape section's `GET profile` answered 404: how the section
 * learns that a sidecar serves no workload profiles, which it then says on the page
 * (src/admin/status-page-shape.ts). Any other console error is a page problem.
 */
export function profileRouteAbsent(message: ConsoleMessage): boolean {
  return message.type() === 'error' && message.text().includes('status of 404') && /\/profile(\?|$)/.test(message.location().url);
}
