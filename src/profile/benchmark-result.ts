import { createReadStream } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { aiperfAggregateShape, aiperfRecordsShape } from './aiperf-result.js';
import type { BenchmarkShape } from './benchmark-shape.js';
import { guidellmShapes } from './guidellm-result.js';

/**
 * Result files are read whole: GuideLLM keeps every request's prompt and output text unless told to
 * sample, so a long run's file is large; past this, the user is told to sample it.
 */
export const MAX_RESULT_BYTES = 256 * 1024 * 1024;

export const EXPECTED_RESULTS =
  'a GuideLLM report (benchmarks.json or .yaml: an object with a "benchmarks" list), an AIPerf profile_export_aiperf.json ' +
  '(an object with "time_to_first_token", "request_throughput"... each with a "unit") or AIPerf profile_export.jsonl ' +
  '(one record a line with "metadata.request_start_ns" and "metrics")';

/**
 * The benchmark shapes in one result file, told apart by content, not by name (files get renamed):
 * a GuideLLM report has `benchmarks`; an AIPerf aggregate has metric objects with a `unit`; AIPerf
 * records are JSON lines each with `metadata` and `metrics`.
 */
export async function readBenchmarkResult(path: string, maxBytes = MAX_RESULT_BYTES): Promise<BenchmarkShape[]> {
  return parseBenchmarkResult(await readCapped(path, maxBytes), path);
}

/**
 * The file's text, read until `maxBytes` and no further. Counted as it is read rather than taken
 * from stat(): a pipe (`--result <(curl ...)`, /dev/stdin) or a device reports size 0 and would be
 * read without end.
 */
async function readCapped(path: string, maxBytes: number): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of createReadStream(path, { highWaterMark: 1 << 20 }) as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > maxBytes) {
        throw new Error(`${path}: more than the ${maxBytes} bytes this command reads; rerun GuideLLM with --metrics kind=generative,sample_size=1000 to keep fewer request texts`);
      }
      chunks.push(chunk);
    }
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === undefined) throw error;
    throw new Error(`${path}: cannot read the result file (${code})`);
  }
  return Buffer.concat(chunks).toString('utf8');
}

export function parseBenchmarkResult(text: string, where: string): BenchmarkShape[] {
  const trimmed = text.trimStart();
  if (trimmed === '') throw new Error(`${where}: empty; expected ${EXPECTED_RESULTS}`);
  if (trimmed.startsWith('{')) {
    const whole = tryJson(trimmed);
    if (whole.ok) return shapesOfDocument(whole.value, where);
    return [aiperfRecordsShape(jsonLines(text, where), where)];
  }
  let document: unknown;
  try {
    document = parseYaml(text, { maxAliasCount: 100 });
  } catch (error) {
    throw new Error(`${where}: neither JSON nor YAML (${(error as Error).message.split('\n')[0]}); expected ${EXPECTED_RESULTS}`);
  }
  return shapesOfDocument(document, where);
}

function shapesOfDocument(document: unknown, where: string): BenchmarkShape[] {
  if (typeof document !== 'object' || document === null || Array.isArray(document)) throw new Error(`${where}: not an object; expected ${EXPECTED_RESULTS}`);
  const object = document as Record<string, unknown>;
  if ('benchmarks' in object) return guidellmShapes(object, where);
  if (isAiperfAggregate(object)) return [aiperfAggregateShape(object, where)];
  if ('metadata' in object && 'metrics' in object) return [aiperfRecordsShape([object], where)];
  throw new Error(`${where}: an object with keys ${Object.keys(object).slice(0, 6).map((k) => JSON.stringify(k)).join(', ')}; expected ${EXPECTED_RESULTS}`);
}

function isAiperfAggregate(object: Record<string, unknown>): boolean {
  return ['time_to_first_token', 'request_throughput', 'request_latency', 'input_sequence_length'].some((tag) => {
    const metric = object[tag];
    return typeof metric === 'object' && metric !== null && typeof (metric as Record<string, unknown>)['unit'] === 'string';
  });
}

function jsonLines(text: string, where: string): Record<string, unknown>[] {
  const records: Record<string, unknown>[] = [];
  const lines = text.split('\n');
  lines.forEach((line, index) => {
    if (line.trim() === '') return;
    const parsed = tryJson(line);
    if (!parsed.ok) throw new Error(`${where}: line ${index + 1}: not JSON (${parsed.error}); expected ${EXPECTED_RESULTS}`);
    const value = parsed.value;
    if (typeof value !== 'object' || value === null || Array.isArray(value) || !('metadata' in value) || !('metrics' in value)) {
      throw new Error(`${where}: line ${index + 1}: not an AIPerf record (no "metadata" and "metrics"); expected ${EXPECTED_RESULTS}`);
    }
    records.push(value as Record<string, unknown>);
  });
  return records;
}

function tryJson(text: string): { ok: true; value: unknown } | { ok: false; error: string } {
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch (error) {
    return { ok: false, error: (error as Error).message };
  }
}
