import { parseArgs } from 'node:util';
import { loadSettings, SLO_KINDS, type MatchConditions, type Settings, type Workload } from '../config/load.js';
import { TokentapError } from '../errors.js';
import { missingAlertLinks, placeholderAlertLinks } from '../render/alert-links.js';
import { unreachableBurnConditions } from '../render/burn-rate-windows.js';
import { humanSeconds, percent } from '../render/human-format.js';
import type { CliIO } from './main.js';
import { terminalText } from './terminal-text.js';

/**
 * `tokentap check --config FILE`: validates a configuration file exactly as `serve` would (the same
 * loadSettings), and then as `render` would (the same missingAlertLinks), without starting or writing
 * anything. Valid: a short summary of the workloads and their SLOs on stdout, exit 0. Invalid: every
 * problem on stderr, one per line as `FILE:LINE: path: message` (`FILE: path: message` for a key
 * render needs and the file lacks), exit 1. `--serve-only` leaves render's requirements out, for a
 * file only the sidecar reads. Flags and TOKENTAP_* variables are ignored, so the verdict is about
 * the file alone.
 */
export function runCheck(argv: readonly string[], io: CliIO): number {
  const { file, serveOnly } = parseCheckFlags(argv);
  let settings: Settings;
  try {
    settings = loadSettings({ flags: { config: file }, env: {} });
  } catch (error) {
    if (!(error instanceof TokentapError)) throw error;
    return reportInvalid(file, error.problems, 'invalid', io);
  }
  const renderProblems = serveOnly ? [] : missingAlertLinks(settings.alerts, file);
  if (renderProblems.length > 0) {
    return reportInvalid(file, renderProblems, 'valid for serve, but tokentap render would refuse it; for a file only the sidecar reads: tokentap check --serve-only', io);
  }
  // Names, paths and models come from the file: printed so that none can drive the terminal.
  io.stdout.write(terminalText(summarise(file, settings)));
  const placeholders = serveOnly ? [] : placeholderAlertLinks(settings.alerts, file);
  for (const warning of [...unreachableBurnConditions(settings.workloads, file), ...placeholders]) io.stderr.write(`${warning}\n`);
  return 0;
}

function reportInvalid(file: string, problems: readonly string[], verdict: string, io: CliIO): number {
  for (const problem of problems) io.stderr.write(`${problem}\n`);
  const count = problems.length;
  io.stderr.write(`${file}: ${verdict} (${count} problem${count === 1 ? '' : 's'})\n`);
  return 1;
}

function parseCheckFlags(argv: readonly string[]): { file: string; serveOnly: boolean } {
  let values: { config?: string; 'serve-only'?: boolean };
  try {
    ({ values } = parseArgs({ args: [...argv], options: { config: { type: 'string' }, 'serve-only': { type: 'boolean' } }, strict: true, allowPositionals: false }));
  } catch (error) {
    throw new TokentapError('TOKENTAP_ERR_USAGE', [(error as Error).message]);
  }
  if (values.config === undefined) throw new TokentapError('TOKENTAP_ERR_USAGE', ['check needs --config FILE']);
  return { file: values.config, serveOnly: values['serve-only'] === true };
}

function summarise(file: string, settings: Settings): string {
  const workloads = settings.workloads;
  const width = Math.max(...workloads.map((w) => w.name.length));
  const lines = workloads.map((w, i) => `  ${w.name.padEnd(width)}  ${describeMatch(w, i === workloads.length - 1)}; ${describeSlo(w)}`);
  const withSlo = workloads.filter((w) => w.slo !== undefined).length;
  return `${file}: valid; ${workloads.length} workload${workloads.length === 1 ? '' : 's'} (first match wins), ${withSlo} with SLOs\n${lines.join('\n')}\n`;
}

function describeMatch(workload: Workload, last: boolean): string {
  if (workload.match === undefined) return 'every request';
  const rules = workload.match.map(describeConditions).join(' or ');
  return last ? `${rules}, and every request no workload matched` : rules;
}

/**
 * Header names whose matched value may be a credential (a team's API key can pick its workload):
 * its value is not printed, since check's output lands in CI logs. Broad on purpose: hiding a
 * harmless value costs nothing, printing a key does.
 */
const CREDENTIAL_HEADER = /auth|cookie|key|token|secret|password|credential|session|signature/i;

function describeConditions(c: MatchConditions): string {
  const parts = [
    ...c.headers.map(([name, value]) => `${name}: ${CREDENTIAL_HEADER.test(name) ? '(value hidden)' : value}`),
    ...(c.path === undefined ? [] : [`path ${c.path}`]),
    ...(c.model === undefined ? [] : [`model ${c.model}`]),
  ];
  return parts.join(' and ');
}

function describeSlo(workload: Workload): string {
  const slo = workload.slo;
  if (slo === undefined) return 'no SLO';
  const thresholds = SLO_KINDS.flatMap((kind) => {
    const s = slo.thresholdsS[kind];
    return s === undefined ? [] : [`${kind} <= ${humanSeconds(s)}`];
  });
  return `SLO ${percent(slo.objective)}: ${thresholds.join(', ')}`;
}
