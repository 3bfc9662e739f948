import onExit from 'on-exit-leak-free';
import pino, { type Logger, type LoggerOptions } from 'pino';
import { LineBatch } from './line-batch.js';

/**
 * Request lines are written in batches: one write once 16 KiB have gathered (about 25 request
 * lines), and at the latest 250 ms after a line was logged. Each write of the asynchronous
 * destination is a round trip through libuv's thread pool (a worker thread woken, and the main
 * thread when it is done); one write per request line cost 11 ms of CPU per 1,000 streamed tokens
 * on the benchmark (64 streams of 64 tokens 20 ms apart, `npm run bench`), about half of all
 * observation. At 4 KiB per write, 1,000 small non-streamed requests per second still spent 7 % of
 * the process's CPU samples on other threads, against 5 % at 16 KiB (`npm run bench -- --profile
 * --perf --unary`). Lines are gathered in front of the destination (line-batch.ts says why), pino's
 * own lines with them; lines still waiting when the process exits are written synchronously then.
 */
const BATCH_BYTES = 16384;
const BATCH_MAX_DELAY_MS = 250;

/**
 * Bytes of lines waiting for the destination before further lines are dropped (`limits.log_buffer_bytes`):
 * a stdout nobody reads (a stuck log collector, a full pipe) must not grow the process without bound.
 */
export const DEFAULT_LOG_BUFFER_BYTES = 16 << 20;

/** Lines dropped by each logger because its destination did not drain; read for tokentap_limit_exceeded_total. */
const DROPPED = new WeakMap<Logger, { lines: number }>();

/** Log lines dropped so far because the destination did not take them (0 for a stream destination). */
export function droppedLogLines(logger: Logger): number {
  return DROPPED.get(logger)?.lines ?? 0;
}

/** Writes a finished line to a logger's destination: what pino's own write does with the line it built. */
export type LineSink = (line: string) => void;

const LINE_SINKS = new WeakMap<Logger, LineSink>();

/**
 * The destination of a logger made by createLogger, for a line serialised outside pino
 * (request-line.ts): the same stream, so the same batching, exit flush and drop counting. Throws for
 * any other logger, whose destination and batching are unknown here.
 */
export function lineSink(logger: Logger): LineSink {
  const sink = LINE_SINKS.get(logger);
  if (sink === undefined) throw new Error('lineSink: the logger was not made by createLogger (src/log/logger.ts); make it there');
  return sink;
}

/**
 * One JSON line per request (and a few lifecycle lines). Asynchronous destination: a log write
 * never blocks the event loop that forwards streams. `destination`: a file descriptor (batched as
 * above, at most `maxBufferBytes` waiting: beyond it lines are dropped, a batch at a time, and
 * counted), or a stream (tests), which gets every line as it is logged.
 */
export function createLogger(level: string, destination: NodeJS.WritableStream | number = 1, maxBufferBytes = DEFAULT_LOG_BUFFER_BYTES): Logger {
  if (typeof destination !== 'number') {
    const logger = pino(loggerOptions(level), destination);
    LINE_SINKS.set(logger, (line) => destination.write(line));
    return logger;
  }
  // sonic-boom's maxLength: a write that would take its buffer past it is dropped with a 'drop' event
  // (one per batch). Its maxWrite (the most one write takes) must exceed minLength.
  const stream = pino.destination({ dest: destination, sync: false, minLength: BATCH_BYTES, maxWrite: 4 * BATCH_BYTES, maxLength: Math.max(maxBufferBytes, BATCH_BYTES * 2) });
  const dropped = { lines: 0 };
  stream.on('drop', (batch: string) => {
    dropped.lines += linesIn(batch);
  });
  // Registered after pino.destination registered its own exit flush, so it runs after it: the
  // gathered lines are newer than what the destination held.
  const batch = new LineBatch(stream, destination, BATCH_BYTES);
  onExit.register(batch, (gathered: LineBatch) => gathered.writeAtExit());
  const logger = pino(loggerOptions(level), batch);
  DROPPED.set(logger, dropped);
  LINE_SINKS.set(logger, (line) => batch.write(line));
  setInterval(() => batch.tick(), BATCH_MAX_DELAY_MS).unref();
  return logger;
}

/**
 * Headers are never logged; the redaction list is a second guard should a header object, or a
 * credential header by name, ever be passed by mistake. Fixed paths only: a wildcard path
 * (`*.authorization`) makes pino's redaction walk every key of every line, measured at 20 µs of the
 * 24 µs a request line cost (fixed paths: 0.5 µs).
 */
/** Lines in a dropped batch: each ends with one newline (pino's and request-line.ts's alike). */
function linesIn(batch: string): number {
  let lines = 0;
  for (let at = batch.indexOf('\n'); at !== -1; at = batch.indexOf('\n', at + 1)) lines++;
  return lines;
}

function loggerOptions(level: string): LoggerOptions {
  return {
    level,
    base: { service: 'tokentap' },
    redact: {
      paths: ['headers', 'req.headers', 'authorization', 'cookie', '["x-api-key"]', '["proxy-authorization"]'],
      remove: true,
    },
  };
}
