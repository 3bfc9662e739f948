import { parseArgs } from 'node:util';
import { parseDurationMs } from '../config/duration.js';
import { WORKLOAD_NAME } from '../config/schema.js';
import { TokentapError } from '../errors.js';
import { readBenchmarkResult } from '../profile/benchmark-result.js';
import { renderComparison } from '../profile/comparison-report.js';
import { fetchLiveWorkload } from '../profile/live-profile-client.js';
import { compareShapes } from '../profile/shape-comparison.js';
import type { CliIO } from './main.js';
import { workloadNameProblem } from './profile.js';
import { terminalText } from './terminal-text.js';

export const PROFILE_COMPARE_USAGE = `Usage: tokentap profile compare --admin URL --workload NAME --result FILE [flags]

Shows a workload's production traffic and latency (from a running sidecar's admin listener) beside a
benchmark's (a GuideLLM or AIPerf result file), and flags each dimension where the benchmark's
traffic was not production's: length distributions, burstiness, prefix sharing
(docs/workload-profiles.md#comparing-a-benchmark-with-production).

Flags:
  --admin URL         the sidecar's admin listener, e.g. http://127.0.0.1:9464
  --workload NAME     the workload to compare (as in the sidecar's configuration)
  --result FILE       GuideLLM benchmarks.json / .yaml, AIPerf profile_export_aiperf.json, or AIPerf
                      profile_export.jsonl (per request: also compares burstiness); told apart by content
  --window DURATION   the production window, e.g. 30m, 1h (default 1h)
  --benchmark INDEX   which benchmark of a GuideLLM report holding several (a sweep); required then
  --help              show this text

Exit status: 0 comparable (within tolerance on every dimension both sides report), 1 the benchmark's
traffic differs from production's (each difference printed with its reason), 2 nothing compared
(bad flags, unreadable result file, sidecar unreachable, no production request in the window, no
dimension reported by both sides).
`;

interface CompareFlags {
  readonly admin: URL;
  readonly workload: string;
  readonly result: string;
  readonly window: string;
  readonly benchmark: number | undefined;
}

/** `tokentap profile compare`: exit 0 comparable, 1 flagged, 2 could not compare (PROFILE_COMPARE_USAGE). */
export async function runProfileCompare(argv: readonly string[], io: CliIO): Promise<number> {
  if (argv.includes('--help') || argv.includes('-h')) {
    io.stdout.write(PROFILE_COMPARE_USAGE);
    return 0;
  }
  try {
    const flags = parseCompareFlags(argv);
    const shapes = await readBenchmarkResult(flags.result);
    const bench = pickBenchmark(shapes, flags);
    const live = await fetchLiveWorkload(flags.admin, flags.workload, flags.window);
    if (live.profile.requests === 0) {
      throw new Error(`workload "${flags.workload}": no request recorded in the last ${flags.window}; nothing to compare the benchmark with (a longer --window?)`);
    }
    const comparison = compareShapes(live.profile, bench);
    // Labels and messages come from the result file and the admin listener's answer.
    io.stdout.write(terminalText(renderComparison(live, bench, flags.result, comparison)));
    if (comparison.compared === 0) {
      // A CI job gating on the exit status must not take "nothing known" for "comparable".
      io.stderr.write(`tokentap profile compare: nothing compared: no dimension of the benchmark's traffic is reported by both sides (each is listed under "Not compared")\n`);
      return 2;
    }
    return comparison.flags.length === 0 ? 0 : 1;
  } catch (error) {
    io.stderr.write(terminalText(`tokentap profile compare: ${error instanceof Error ? error.message : String(error)}\n`));
    return 2;
  }
}

export function parseCompareFlags(argv: readonly string[]): CompareFlags {
  let values: { admin?: string; workload?: string; result?: string; window?: string; benchmark?: string };
  try {
    ({ values } = parseArgs({
      args: [...argv],
      options: { admin: { type: 'string' }, workload: { type: 'string' }, result: { type: 'string' }, window: { type: 'string' }, benchmark: { type: 'string' } },
      strict: true,
      allowPositionals: false,
    }));
  } catch (error) {
    throw new TokentapError('TOKENTAP_ERR_USAGE', [(error as Error).message]);
  }
  const problems: string[] = [];
  if (values.admin === undefined) problems.push('--admin URL is required (the sidecar admin listener, e.g. http://127.0.0.1:9464)');
  if (values.workload === undefined || values.workload === '') problems.push('--workload NAME is required');
  else if (!WORKLOAD_NAME.test(values.workload)) problems.push(workloadNameProblem(values.workload));
  if (values.result === undefined || values.result === '') problems.push('--result FILE is required (a GuideLLM or AIPerf result file)');
  let admin: URL | undefined;
  if (values.admin !== undefined) {
    try {
      admin = new URL(values.admin);
      if (admin.protocol !== 'http:' && admin.protocol !== 'https:') problems.push(`--admin: expected an http:// or https:// URL, got "${values.admin}"`);
    } catch {
      problems.push(`--admin: not a URL: "${values.admin}" (e.g. http://127.0.0.1:9464)`);
    }
  }
  const window = values.window ?? '1h';
  if (!(Number(parseDurationMs(window)) > 0)) problems.push(`--window: expected a duration like 30m or 1h, got "${window}"`);
  let benchmark: number | undefined;
  if (values.benchmark !== undefined) {
    benchmark = Number(values.benchmark);
    if (!Number.isInteger(benchmark) || benchmark < 0 || values.benchmark.trim() === '') problems.push(`--benchmark: expected an index 0, 1, 2..., got "${values.benchmark}"`);
  }
  if (problems.length > 0) throw new TokentapError('TOKENTAP_ERR_USAGE', problems);
  return { admin: admin as URL, workload: values.workload as string, result: values.result as string, window, benchmark };
}

function pickBenchmark<T extends { readonly label: string }>(shapes: readonly T[], flags: CompareFlags): T {
  if (flags.benchmark !== undefined) {
    const chosen = shapes[flags.benchmark];
    if (chosen === undefined) throw new Error(`--benchmark ${flags.benchmark}: ${flags.result} holds ${shapes.length} (0 to ${shapes.length - 1})`);
    return chosen;
  }
  if (shapes.length > 1) {
    throw new Error(`${flags.result} holds ${shapes.length} benchmarks; choose one with --benchmark INDEX:\n${shapes.map((s, i) => `  ${i}: ${s.label}`).join('\n')}`);
  }
  return shapes[0] as T;
}
