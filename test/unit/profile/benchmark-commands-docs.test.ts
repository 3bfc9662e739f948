import { describe, expect, it } from 'vitest';
import { fencedBlocks, readDoc, shellCommands } from '../../helpers/docs.js';

/**
 * The benchmark tools' command lines of docs/workload-profiles.md ("The loop"), checked against
 * the tools' own sources, since the tools cannot be installed here:
 * - GuideLLM (vllm-project/guidellm at ee7a77457ba668b4b5ccb40f110518829893b36a):
 *   docs/getting-started/benchmark.md (`--scenario`, `--backend kind=...`, `--data kind=...`,
 *   `--profile kind=...`, `--constraint kind=max_duration,seconds=N`); synthetic data is infinite
 *   (data/deserializers/synthetic.py) and BenchmarkArgs.constraints defaults to none
 *   (benchmark/schemas/entrypoints.py), so a scenario run without a constraint never ends; a trace
 *   replays its rows once, with timestamps read as seconds times `time_scale`
 *   (benchmark/profiles/replay.py), and `hash_id_block_size` 512 (trace_mooncake.py).
 * - AIPerf (ai-dynamo/aiperf at db4f6397d11ee2d4cfbb41f70b2327315163dcf0, docs/cli_options.md):
 *   `--request-count` defaults to 10, too few to draw a length distribution or an arrival pattern
 *   from, so a synthetic run needs `--benchmark-duration` or `--request-count`; a Mooncake trace
 *   runs once (`--fixed-schedule`) with `--isl-block-size` (default 512) tokens per hash id.
 * - vLLM `vllm bench serve --dataset-name timed_trace`: `--timed-trace-chunk-hash-size` (16 by
 *   default) tokens per hash id and `--timed-trace-sec-multiplier` for timestamps in seconds.
 */
const PAGE = readDoc('docs/workload-profiles.md');
const [exports, runs] = fencedBlocks(PAGE, 'sh').map(shellCommands) as [string[], string[]];
/** profiles.block_tokens' default: the export's tokens per hash id. */
const BLOCK_TOKENS = /`profiles\.block_tokens` \| `(\d+)`/.exec(PAGE)?.[1];

/** The file a `tokentap profile` line of the page writes for `format`. */
function exportedFile(format: string): string {
  const line = exports.find((l) => l.includes(`--format ${format}`) && l.includes('>'));
  return (/>\s*(\S+)$/.exec(line ?? '') as RegExpExecArray)[1] as string;
}

function value(line: string, flag: string): string | undefined {
  const words = line.split(/\s+/);
  const at = words.indexOf(flag);
  return at < 0 ? undefined : words[at + 1];
}

describe('the benchmark commands of docs/workload-profiles.md', () => {
  it('holds one command of each kind', () => {
    expect(BLOCK_TOKENS).toBe('512');
    expect(runs.filter((l) => l.startsWith('guidellm run '))).toHaveLength(2);
    expect(runs.filter((l) => l.startsWith('aiperf profile '))).toHaveLength(2);
    expect(runs.filter((l) => l.startsWith('vllm bench serve '))).toHaveLength(1);
  });

  it('runs the GuideLLM scenario the export wrote, bounded: synthetic data never runs out', () => {
    const line = runs.find((l) => l.includes('--scenario')) as string;
    expect(value(line, '--scenario')).toBe(exportedFile('guidellm'));
    expect(value(line, '--constraint')).toMatch(/^kind=(max_duration,seconds|max_requests,count)=\d+$/);
  });

  it('replays the Mooncake trace the export wrote in GuideLLM, timestamps from milliseconds to seconds', () => {
    const line = runs.find((l) => l.startsWith('guidellm run ') && l.includes('kind=replay')) as string;
    expect(value(line, '--data')).toBe(`kind=mooncake,path=${exportedFile('mooncake')}`);
    expect(value(line, '--profile')).toBe('kind=replay,time_scale=0.001');
  });

  it('gives AIPerf the exported arguments and a length of run: 10 requests, its default, show no distribution', () => {
    const line = runs.find((l) => l.startsWith('aiperf profile ') && l.includes('--format aiperf')) as string;
    expect(line).toMatch(/\$\(node bin\/tokentap\.js profile [^)]*--format aiperf[^)]*\)/);
    expect(Number(value(line, '--benchmark-duration') ?? value(line, '--request-count'))).toBeGreaterThan(10);
  });

  it('replays the trace in AIPerf on its own schedule with the export\'s block size', () => {
    const line = runs.find((l) => l.startsWith('aiperf profile ') && l.includes('--input-file')) as string;
    expect(value(line, '--input-file')).toBe(exportedFile('mooncake'));
    expect(value(line, '--custom-dataset-type')).toBe('mooncake_trace');
    expect(line.split(/\s+/)).toContain('--fixed-schedule');
    expect(value(line, '--isl-block-size')).toBe(BLOCK_TOKENS);
  });

  it('replays the trace in vLLM with the export\'s block size, timestamps from milliseconds to seconds', () => {
    const line = runs.find((l) => l.startsWith('vllm bench serve ')) as string;
    expect(value(line, '--dataset-path')).toBe(exportedFile('mooncake'));
    expect(value(line, '--timed-trace-chunk-hash-size')).toBe(BLOCK_TOKENS);
    expect(value(line, '--timed-trace-sec-multiplier')).toBe('0.001');
  });
});
