import type { Logger } from 'pino';
import type { ServerTimings, TokenSource } from '../clock/token-timeline.js';
import { jsonString } from './json-string.js';
import { lineSink, type LineSink } from './logger.js';

/**
 * The fields of one request's log line (docs/logs.md), in the order of the line. `undefined` leaves
 * the field out; a number that is null or not finite is written `null`. No field here is on the
 * logger's redaction list (logger.ts: headers and credential headers), which this writer does not
 * apply: no header, and no field named like one, may be added here.
 */
export interface RequestLine {
  method: string;
  path: string;
  status: number;
  outcome: string;
  workload: string;
  model: string;
  ttfb_ms: number | null;
  ttft_ms: number | null;
  ttft_answer_ms: number | null | undefined;
  outside_engine_ttft_ms: number | null | undefined;
  queue_or_outside_engine_ttft_ms: number | null | undefined;
  tpot_ms: number | null;
  e2e_ms: number | null;
  input_tokens: number | null;
  cached_input_tokens: number | undefined;
  output_tokens: number;
  token_source: TokenSource;
  content_events: number;
  counted_tokens: number;
  server_timings: ServerTimings | null;
  accelerator_seconds: number | undefined;
  error: string | undefined;
  retried: true | undefined;
  operation: 'other' | undefined;
  gpu_memory_used_bytes: number | null | undefined;
}

/**
 * pino's line before the fields: level 30 (lib/levels.js, `{"level":30` from its level cache),
 * then the time, then the bindings of `base: { service: 'tokentap' }` (logger.ts; no pid or hostname).
 */
const LEVEL = '{"level":30,"time":';
const BINDINGS = ',"service":"tokentap"';
const END = ',"msg":"request"}\n';

/**
 * Writes the request line straight into one string, with the bytes pino 10.4.0 would write for
 * `logger.info(fields, 'request')` (lib/tools.js `_asJson`: keys in order, `undefined` left out,
 * non-finite numbers `null`, strings by `asString`, objects by JSON.stringify; lib/time.js
 * `epochTime`), into the same destination. pino's generic path (a loop over the keys, a type switch
 * per value, the logMethod hook) and the monitor's object of spreads cost 15 % of the proxy's CPU per
 * non-streamed request on the benchmark (1,000 requests/s, level `warn` against `info`).
 */
export class RequestLineWriter {
  private readonly logger: Logger;
  private readonly sink: LineSink;

  /** `logger` must be one createLogger made: its level gates the line, its destination takes it. */
  constructor(logger: Logger) {
    this.logger = logger;
    this.sink = lineSink(logger);
  }

  /** Nothing when `info` is below the logger's level, as for logger.info(). */
  write(line: RequestLine): void {
    if (!this.logger.isLevelEnabled('info')) return;
    // pino's epochTime: the wall clock when the line is written, not a measurement.
    let s =
      LEVEL +
      Date.now() +
      BINDINGS +
      ',"method":' +
      jsonString(line.method) +
      ',"path":' +
      jsonString(line.path) +
      ',"status":' +
      number(line.status) +
      ',"outcome":' +
      jsonString(line.outcome) +
      ',"workload":' +
      jsonString(line.workload) +
      ',"model":' +
      jsonString(line.model) +
      ',"ttfb_ms":' +
      number(line.ttfb_ms) +
      ',"ttft_ms":' +
      number(line.ttft_ms);
    if (line.ttft_answer_ms !== undefined) s += ',"ttft_answer_ms":' + number(line.ttft_answer_ms);
    if (line.outside_engine_ttft_ms !== undefined) s += ',"outside_engine_ttft_ms":' + number(line.outside_engine_ttft_ms);
    if (line.queue_or_outside_engine_ttft_ms !== undefined) s += ',"queue_or_outside_engine_ttft_ms":' + number(line.queue_or_outside_engine_ttft_ms);
    s += ',"tpot_ms":' + number(line.tpot_ms) + ',"e2e_ms":' + number(line.e2e_ms) + ',"input_tokens":' + number(line.input_tokens);
    if (line.cached_input_tokens !== undefined) s += ',"cached_input_tokens":' + number(line.cached_input_tokens);
    s +=
      ',"output_tokens":' +
      number(line.output_tokens) +
      ',"token_source":' +
      jsonString(line.token_source) +
      ',"content_events":' +
      number(line.content_events) +
      ',"counted_tokens":' +
      number(line.counted_tokens) +
      ',"server_timings":' +
      // null is most lines' value: its four bytes without a JSON.stringify call.
      (line.server_timings === null ? 'null' : JSON.stringify(line.server_timings));
    if (line.accelerator_seconds !== undefined) s += ',"accelerator_seconds":' + number(line.accelerator_seconds);
    if (line.error !== undefined) s += ',"error":' + jsonString(line.error);
    if (line.retried !== undefined) s += ',"retried":true';
    if (line.operation !== undefined) s += ',"operation":' + jsonString(line.operation);
    if (line.gpu_memory_used_bytes !== undefined) s += ',"gpu_memory_used_bytes":' + number(line.gpu_memory_used_bytes);
    this.sink(s + END);
  }
}

/** As pino: a finite number in JavaScript's own form (`-0` is `0`), anything else `null`. */
function number(value: number | null): string {
  return Number.isFinite(value) ? '' + value : 'null';
}
