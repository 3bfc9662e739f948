import { ExportRefused, formatDecimal } from './export-format.js';
import type { ProfileSet, WorkloadProfile } from './workload-profile.js';

/**
 * `aiperf profile` arguments for the workload's shape (AIPerf docs/cli_options.md):
 * `--isl`/`--isl-stddev`/`--osl`/`--osl-stddev` (means are integers, deviations floats), then the
 * arrivals: `--request-rate` with `--arrival-pattern gamma --arrival-smoothness K`, K = 1 / CV^2
 * of the inter-arrival times (1 is Poisson, below 1 bursty), or `--arrival-pattern poisson` while
 * too few arrivals give a CV. One line, words separated by single spaces, no quoting needed.
 */
export function aiperfArguments(profile: WorkloadProfile): string {
  const input = profile.inputTokens;
  if (input.count === 0) throw new ExportRefused(`no request of workload "${profile.workload}" in the window reported its input tokens: nothing to fit (ask the server for usage, e.g. inject_usage: true)`);
  const words = ['--isl', String(Math.round(input.mean ?? 0)), '--isl-stddev', formatDecimal(input.stdev ?? 0, 2)];
  const output = profile.outputTokens;
  if (output.count > 0) words.push('--osl', String(Math.max(1, Math.round(output.mean ?? 1))), '--osl-stddev', formatDecimal(output.stdev ?? 0, 2));
  words.push(...arrivalWords(profile.arrivals));
  return `${words.join(' ')}\n`;
}

/**
 * Every workload as one `--seq-dist` mixture (AIPerf sequence_distribution_parser.py, semicolon
 * form `ISL|ISL_STDDEV,OSL|OSL_STDDEV:PROB;...`, probabilities in percent summing to exactly 100),
 * one component per workload weighted by its share of the requests that reported input tokens,
 * and the arrivals of all of them together (`arrivals`, from profile-store.ts mergedArrivals).
 */
export function aiperfMixtureArguments(set: ProfileSet, arrivals: WorkloadProfile['arrivals']): string {
  const parts = set.workloads.filter((p) => p.inputTokens.count > 0);
  if (parts.length === 0) throw new ExportRefused('no request in the window reported its input tokens: nothing to fit (ask the server for usage, e.g. inject_usage: true)');
  const total = parts.reduce((sum, p) => sum + p.inputTokens.count, 0);
  // Shares in units of 1e-4 percent, the last taking the remainder, so they add up to 100 exactly.
  const units = parts.map((p) => Math.round((p.inputTokens.count / total) * 1e6));
  units[units.length - 1] = 1e6 - units.slice(0, -1).reduce((sum, u) => sum + u, 0);
  const pairs = parts.map((p, i) => {
    const osl = p.outputTokens.count > 0 ? Math.max(1, Math.round(p.outputTokens.mean ?? 1)) : 1;
    const isl = `${Math.round(p.inputTokens.mean ?? 0)}|${formatDecimal(p.inputTokens.stdev ?? 0, 2)}`;
    return `${isl},${osl}|${formatDecimal(p.outputTokens.stdev ?? 0, 2)}:${formatDecimal((units[i] as number) / 1e4, 4)}`;
  });
  return `${['--seq-dist', pairs.join(';'), ...arrivalWords(arrivals)].join(' ')}\n`;
}

function arrivalWords(arrivals: WorkloadProfile['arrivals']): string[] {
  const words = ['--request-rate', formatDecimal(Math.max(arrivals.ratePerSecond, 1e-6), 6)];
  const shape = arrivals.gammaShape;
  if (shape === undefined || !(shape > 0)) return [...words, '--arrival-pattern', 'poisson'];
  return [...words, '--arrival-pattern', 'gamma', '--arrival-smoothness', formatDecimal(Math.max(shape, 1e-4), 4)];
}
