import { parseArgs } from 'node:util';
import type { CapacityFigures, CapacityStatus } from '../admin/status-capacity.js';
import type { BasisCost, CostFigures, CostStatus } from '../admin/status-cost.js';
import type { StatusReport } from '../admin/status-report.js';
import { TokentapError } from '../errors.js';
import { readBounded } from './bounded-answer.js';
import type { CliIO } from './main.js';
import { fieldText, terminalText } from './terminal-text.js';

export const REPORT_USAGE = `Usage: tokentap report [--admin URL]

Prints the capacity at SLO of a running sidecar's pod: capacity band, sustainable requests per
second, peaks, headroom and pods needed at the observed and the planned peak, per workload and for
every workload together; then the cost of its requests over the last 5 minutes (per request, per
1M input and output tokens, per request that met its SLOs, on the usage and allocation bases), its
busy share and the share of requests with cached input. Reads URL/status.json, the admin listener's status (the status page's data).
  reachable:    the report on stdout, exit 0
  unreachable:  why on stderr, exit 1

Flags:
  --admin URL   the sidecar's admin listener (default http://127.0.0.1:9464;
                kubectl -n NS port-forward pod/POD 9464 makes a pod's reachable there)
  --help        show this text
`;

const DEFAULT_ADMIN = 'http://127.0.0.1:9464';
/** A status.json is a few hundred kB with many workloads; anything far larger is not one. */
const MAX_BODY_BYTES = 8 * 1024 * 1024;
const TIMEOUT_MS = 10_000;

/**
 * `tokentap report`: a function of (arguments, streams) returning an exit code, like the other
 * commands. Everything printed comes from the answer of a process across the network: control
 * characters are replaced before they reach the terminal, so a workload name or a hostile answer
 * cannot move the cursor or retitle the window.
 */
export async function runReport(argv: readonly string[], io: CliIO): Promise<number> {
  const admin = parseReportFlags(argv);
  const url = new URL('status.json', admin.endsWith('/') ? admin : `${admin}/`);
  let report: StatusReport;
  try {
    report = await fetchReport(url);
  } catch (error) {
    io.stderr.write(terminalText(`tokentap report: ${url.href}: ${(error as Error).message}\n`));
    return 1;
  }
  // Every field passes printable(); the whole text is cleaned again for what a hostile answer puts
  // where a number belongs (the answer is checked for its schema version only, and a field of the
  // wrong shape is reported as such rather than as the TypeError it raises).
  let text: string;
  try {
    text = formatReport(url.origin, report);
  } catch (error) {
    io.stderr.write(terminalText(`tokentap report: ${url.href}: the answer is not a tokentap status report (${(error as Error).message})\n`));
    return 1;
  }
  io.stdout.write(terminalText(text));
  return 0;
}

function parseReportFlags(argv: readonly string[]): string {
  let admin: string | undefined;
  try {
    admin = parseArgs({ args: [...argv], options: { admin: { type: 'string' } }, strict: true, allowPositionals: false }).values.admin;
  } catch (error) {
    throw new TokentapError('TOKENTAP_ERR_USAGE', [(error as Error).message]);
  }
  const text = admin ?? DEFAULT_ADMIN;
  let parsed: URL;
  try {
    parsed = new URL(text);
  } catch {
    throw new TokentapError('TOKENTAP_ERR_USAGE', [`--admin: expected the admin listener's URL such as ${DEFAULT_ADMIN}, got "${text}"`]);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw new TokentapError('TOKENTAP_ERR_USAGE', [`--admin: expected an http:// or https:// URL, got "${parsed.protocol}"`]);
  return parsed.href;
}

async function fetchReport(url: URL): Promise<StatusReport> {
  let response: Response;
  try {
    // An admin listener never redirects; followed, a redirect would print another origin's answer under this one's name.
    response = await fetch(url, { headers: { accept: 'application/json' }, redirect: 'manual', signal: AbortSignal.timeout(TIMEOUT_MS) });
  } catch (error) {
    const cause = (error as { cause?: { code?: string } }).cause?.code;
    throw new Error(`no answer (${cause ?? (error as Error).message}): is the sidecar running, and its admin listener reachable here (kubectl port-forward)?`);
  }
  if (response.status === 421) {
    throw new Error(`HTTP 421: the admin listener does not answer to the name ${url.hostname} (docs/security.md#dns-rebinding): reach it by the pod IP or a port-forward (localhost), or list ${url.hostname} in its admin_allowed_hosts`);
  }
  if (response.status !== 200) throw new Error(`HTTP ${response.status}: not a tokentap admin listener (it answers /status.json with 200${response.status >= 300 && response.status < 400 ? ' and never redirects' : ''})`);
  let body: string;
  try {
    body = await readBounded(response, MAX_BODY_BYTES);
  } catch (error) {
    throw new Error(`${(error as Error).message}: not a tokentap status report`);
  }
  let report: Partial<StatusReport>;
  try {
    report = JSON.parse(body) as Partial<StatusReport>;
  } catch {
    throw new Error('the answer is not JSON: not a tokentap admin listener');
  }
  if (typeof report !== 'object' || report === null || typeof report.schema_version !== 'number') throw new Error('the answer is not a tokentap status report');
  if (report.capacity === undefined) throw new Error(`the sidecar (tokentap ${String(report.version)}) reports no capacity figures: it is older than tokentap report; upgrade it`);
  return report as StatusReport;
}

/** C0 and C1 controls (ESC, CR, LF, BEL...) and bidi controls as "?": text from the network never steers the terminal or starts a line. */
function printable(value: unknown): string {
  return fieldText(value);
}

/** As the status page writes a rate: two significant digits below 0.01 (a pod of 15-minute streams sustains 0.0011 a second), else two decimals at most. */
function rate(n: number): string {
  return `${n > 0 && n < 0.01 ? n.toPrecision(2) : n < 10 ? n.toFixed(2) : n < 100 ? n.toFixed(1) : n.toFixed(0)} requests/s`;
}

function percent(r: number): string {
  return `${(r * 100).toFixed(1)} %`;
}

function capacityText(f: CapacityFigures): string | null {
  if (f.capacity_in_flight === null) return null;
  const knee = f.knee_band === null ? 'no band broke yet' : `knee at band ${printable(f.knee_band)}`;
  return `${f.at_least ? 'at least ' : ''}${printable(f.capacity_in_flight)} in flight (band ${printable(f.capacity_band)}; ${knee})`;
}

/** `label  value`, or `label  (why it is absent)`. */
function line(label: string, value: string | null, reason: string | undefined): string {
  return `  ${label.padEnd(30)}${value ?? `none: ${printable(reason ?? 'not known yet')}`}\n`;
}

/** What a figure that follows from the capacity says while there is none: the capacity line gives the reason once. */
const NO_CAPACITY = 'no capacity (the reason is under capacity at SLO)';

function figureLines(f: CapacityFigures, peakInFlight: number | undefined): string {
  const noCapacity = f.capacity_in_flight === null ? NO_CAPACITY : undefined;
  return [
    line('capacity at SLO', capacityText(f), f.absent.capacity_in_flight),
    line('sustainable', f.sustainable_rps === null ? null : `${rate(f.sustainable_rps)} (Little's law: ${printable(f.capacity_in_flight)} / ${(f.mean_e2e_s as number).toFixed(2)} s mean e2e)`, noCapacity ?? f.absent.sustainable_rps),
    peakInFlight === undefined ? '' : line('peak in flight', `${peakInFlight} since start`, undefined),
    line('peak rate', f.peak_rps === null ? null : `${rate(f.peak_rps)} (highest 5-minute rate, last hour)`, f.absent.peak_rps),
    line('headroom', f.headroom === null ? null : `${percent(f.headroom)}${f.at_least ? ' or more' : ''}`, noCapacity ?? f.absent.headroom),
    line('pods needed, observed peak', f.pods_needed_observed === null ? null : `${f.pods_needed_observed} for this pod's traffic`, noCapacity ?? f.absent.pods_needed_observed),
  ].join('');
}

/** A sum of money: three significant digits below 1, cents above (as the status page shows it). */
function money(v: number, currency: string): string {
  return `${v === 0 ? '0' : v >= 100 ? v.toFixed(0) : v >= 1 ? v.toFixed(2) : v.toPrecision(3)} ${currency}`;
}

/** One figure on both bases: `usage; allocation`, each a sum or why it is absent. */
function basesLine(label: string, f: CostFigures, key: keyof BasisCost, currency: string): string {
  const one = (basis: 'usage' | 'allocation') => {
    const v = f[basis][key];
    return v === null ? null : `${money(v, currency)} ${basis}`;
  };
  const usage = one('usage');
  const allocation = one('allocation');
  const usageReason = f.absent[`usage.${key}`];
  const allocationReason = f.absent[`allocation.${key}`];
  if (usage === null && allocation === null && usageReason === allocationReason) return line(label, null, usageReason);
  const text = (value: string | null, basis: string, reason: string | undefined) => value ?? `${basis} none: ${printable(reason ?? 'not known yet')}`;
  return line(label, `${text(usage, 'usage', usageReason)}; ${text(allocation, 'allocation', allocationReason)}`, undefined);
}

function costLines(f: CostFigures, currency: string): string {
  return [
    basesLine('cost per request', f, 'per_request', currency),
    basesLine('per 1M input tokens', f, 'per_million_input_tokens', currency),
    basesLine('per 1M output tokens', f, 'per_million_output_tokens', currency),
    basesLine('per request that met its SLOs', f, 'per_good_request', currency),
    line('requests with cached input', f.requests_with_cached_input_ratio === null ? null : percent(f.requests_with_cached_input_ratio), f.absent.requests_with_cached_input_ratio),
    line('mean cached share of input', f.mean_cached_input_ratio === null ? null : percent(f.mean_cached_input_ratio), f.absent.mean_cached_input_ratio),
  ].join('');
}

function costSection(c: CostStatus): string {
  const currency = printable(c.currency ?? '');
  const minutes = c.window_s >= 120 ? `${Math.round(c.window_s / 60)} minutes` : `${Math.round(c.window_s)} s`;
  let text = `
Cost of this pod's requests, last ${minutes}, every workload
`;
  text += line('busy share', c.busy_ratio === null ? null : `${percent(c.busy_ratio)} of the time with a request in flight`, c.absent.busy_ratio);
  const price = c.price_per_hour === null || c.accelerators === null ? null : `${money(c.price_per_hour, currency)} an accelerator-hour x ${printable(c.accelerators)}`;
  text += line('price', price, c.configured ? 'the accelerator count is not known yet: DCGM has not answered' : 'no cost: configured');
  text += costLines(c.pod, currency);
  for (const w of c.workloads) text += `
Cost of workload ${printable(w.name)}
${costLines(w, currency)}`;
  return text;
}

export function formatReport(origin: string, report: StatusReport): string {
  const c: CapacityStatus = report.capacity;
  let text = `tokentap report: ${printable(origin)} (tokentap ${printable(report.version)}, up ${Math.floor(report.uptime_s)} s)\n\n`;
  text += `Capacity at SLO of this pod, every workload (bands count from ${printable(c.min_samples_per_band)} requests)\n`;
  text += figureLines(c.mix, c.peak_in_flight);
  text += line(
    'pods needed, planned peak',
    c.pods_needed_planned === null || c.planned_peak_rps === null ? null : `${printable(c.pods_needed_planned)} for ${rate(c.planned_peak_rps)}`,
    c.planned_peak_rps !== null && c.mix.capacity_in_flight === null ? NO_CAPACITY : c.mix.absent.pods_needed_planned,
  );
  for (const w of c.workloads) {
    text += `\nWorkload ${printable(w.name)}\n`;
    text += figureLines(w, undefined);
    const bands = w.bands.map((b) => `${printable(b.band)}: ${printable(b.requests)} ${b.verdict === 'too_few' ? 'too few' : b.verdict}`).join(', ');
    text += line('bands', bands === '' ? null : bands, 'no request with a first token yet');
  }
  if (c.workloads.length === 0) text += '\nNo workload has a TTFT or ITL SLO: capacity at SLO needs one to judge the bands by.\n';
  // A sidecar older than the cost figures answers without them.
  if (report.cost !== undefined) text += costSection(report.cost);
  text += '\nFleet figures (every pod): the recording rules tokentap:mix_* and tokentap:cost_*, and the dashboard row Capacity and cost. Definitions: docs/capacity-and-cost.md\n';
  return text;
}
