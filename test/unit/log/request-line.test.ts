import { mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import pino from 'pino';
import { afterAll, afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createLogger } from '../../../src/log/logger.js';
import { RequestLineWriter, type RequestLine } from '../../../src/log/request-line.js';
import type { ServerTimings } from '../../../src/clock/token-timeline.js';
import { SeededRandom } from '../../helpers/seeded-random.js';

/** Every chunk written to the stream, as the bytes a file or pipe would receive. */
function capture(): { stream: Writable; chunks: Buffer[] } {
  const chunks: Buffer[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      chunks.push(chunk);
      done();
    },
  });
  return { stream, chunks };
}

/** A deterministic source (mulberry32, test/helpers/seeded-random.ts), so a failing case can be found again by its seed. */
function random(seed: number): () => number {
  const source = new SeededRandom(seed);
  return () => source.next();
}

/**
 * Strings pino escapes on its own fast path (up to 100 characters: quotes and backslashes only, a
 * lone surrogate left raw) and with JSON.stringify (longer, or holding a control character), with
 * lengths 100, 101 and 102 at the border.
 */
const STRINGS = [
  '',
  'POST',
  '/v1/chat/completions',
  'say "hi"',
  'back\\slash\\',
  '"\\"',
  'ctl \u0000\u0001\u001b\u001f end',
  'line\nbreak\r\ttab',
  'a"b\u0007',
  'del \u007f c1 \u0085 \u009f',
  'ünïcödé ✓ 日本語 \u2028\u2029',
  'emoji 😀 pair',
  'lone high \ud800 surrogate',
  'lone low \udfff',
  'lone \ud800 and a space last ',
  'ends high \ud83d',
  '\udc00 starts low',
  `${'x'.repeat(98)}"\\`,
  `${'x'.repeat(99)}\ud800`,
  `${'x'.repeat(100)}\ud800`,
  `${'x'.repeat(98)}\ud800"`,
  `${'x'.repeat(101)}\ud800`,
  `${'y'.repeat(200)}\ud800 "q" \\ ü`,
  `${'y'.repeat(200)}\u0001`,
  'upstream 127.0.0.1:8000 sent nothing for 300000 ms (upstream_idle_timeout)',
];

const NUMBERS = [0, -0, 1, -1, 7, 22.411, 1354.167, 0.1 + 0.2, 1e21, 1e-7, 5e-324, Number.MAX_VALUE, -1e300, 123456789012345680000, 2 ** 53 + 2, -0.001, Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY];

const TIMINGS: (ServerTimings | null)[] = [
  null,
  {},
  { queueMs: 1.5 },
  { loadMs: 12 },
  { promptMs: 0.25 },
  { generationMs: 1e21 },
  { totalMs: 99.999 },
  { queueMs: 3, loadMs: 0, promptMs: 41.5, generationMs: 812.125, totalMs: 860 },
  { queueMs: Number.NaN, totalMs: Number.POSITIVE_INFINITY },
];

/**
 * One request line as RequestMonitor.record() builds it: the fields in the order of the line, each
 * optional one absent (undefined) or present, a rounded time null where it was not measured.
 */
function generate(next: () => number): RequestLine {
  const pick = <T>(values: readonly T[]): T => values[Math.floor(next() * values.length)] as T;
  const maybe = <T>(value: () => T): T | undefined => (next() < 0.5 ? undefined : value());
  const time = (): number | null => (next() < 0.2 ? null : pick(NUMBERS));
  return {
    method: pick(STRINGS),
    path: pick(STRINGS),
    status: pick([0, 200, 404, 499, 502, 504]),
    outcome: pick(['completed', 'truncated', 'client_cancelled', 'upstream_error', 'timeout', 'shutdown']),
    workload: pick(STRINGS),
    model: pick(STRINGS),
    ttfb_ms: time(),
    ttft_ms: time(),
    ttft_answer_ms: maybe(time),
    outside_engine_ttft_ms: maybe(() => pick(NUMBERS)),
    queue_or_outside_engine_ttft_ms: maybe(() => pick(NUMBERS)),
    tpot_ms: time(),
    e2e_ms: time(),
    input_tokens: next() < 0.2 ? null : pick(NUMBERS),
    cached_input_tokens: maybe(() => pick(NUMBERS)),
    output_tokens: pick(NUMBERS),
    token_source: pick(['usage', 'counted'] as const),
    content_events: pick(NUMBERS),
    counted_tokens: pick(NUMBERS),
    server_timings: pick(TIMINGS),
    accelerator_seconds: maybe(() => pick(NUMBERS)),
    error: maybe(() => pick(STRINGS)),
    retried: maybe(() => true as const),
    operation: maybe(() => 'other' as const),
    gpu_memory_used_bytes: maybe(() => (next() < 0.3 ? null : pick(NUMBERS))),
  };
}

/** Every optional field present, each string and number of the pools in turn: the cases random draws could miss. */
function everyValue(): RequestLine[] {
  const lines: RequestLine[] = [];
  const full = (i: number): RequestLine => ({
    method: STRINGS[i % STRINGS.length] as string,
    path: STRINGS[(i + 1) % STRINGS.length] as string,
    status: 200,
    outcome: 'completed',
    workload: STRINGS[(i + 2) % STRINGS.length] as string,
    model: STRINGS[(i + 3) % STRINGS.length] as string,
    ttfb_ms: NUMBERS[i % NUMBERS.length] as number,
    ttft_ms: NUMBERS[(i + 1) % NUMBERS.length] as number,
    ttft_answer_ms: NUMBERS[(i + 2) % NUMBERS.length] as number,
    outside_engine_ttft_ms: NUMBERS[(i + 3) % NUMBERS.length] as number,
    queue_or_outside_engine_ttft_ms: NUMBERS[(i + 4) % NUMBERS.length] as number,
    tpot_ms: NUMBERS[(i + 5) % NUMBERS.length] as number,
    e2e_ms: NUMBERS[(i + 6) % NUMBERS.length] as number,
    input_tokens: NUMBERS[(i + 7) % NUMBERS.length] as number,
    cached_input_tokens: NUMBERS[(i + 8) % NUMBERS.length] as number,
    output_tokens: NUMBERS[(i + 9) % NUMBERS.length] as number,
    token_source: 'counted',
    content_events: NUMBERS[(i + 10) % NUMBERS.length] as number,
    counted_tokens: NUMBERS[(i + 11) % NUMBERS.length] as number,
    server_timings: TIMINGS[i % TIMINGS.length] as ServerTimings | null,
    accelerator_seconds: NUMBERS[(i + 12) % NUMBERS.length] as number,
    error: STRINGS[(i + 4) % STRINGS.length] as string,
    retried: true,
    operation: 'other',
    gpu_memory_used_bytes: i % 3 === 0 ? null : (NUMBERS[(i + 13) % NUMBERS.length] as number),
  });
  for (let i = 0; i < Math.max(STRINGS.length, NUMBERS.length, TIMINGS.length); i++) lines.push(full(i));
  return lines;
}

describe('RequestLineWriter', () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['Date'] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('writes, byte for byte, the line pino writes for the same fields through a logger with the same options', () => {
    const viaPino = capture();
    const viaWriter = capture();
    const pino = createLogger('info', viaPino.stream);
    const writer = new RequestLineWriter(createLogger('info', viaWriter.stream));
    const next = random(27);
    const cases = [...everyValue(), ...Array.from({ length: 2000 }, () => generate(next))];
    cases.forEach((line, i) => {
      vi.setSystemTime(1795968802090 + i * 7919);
      pino.info(line, 'request');
      writer.write(line);
    });
    expect(viaWriter.chunks).toHaveLength(cases.length);
    expect(viaPino.chunks).toHaveLength(cases.length);
    cases.forEach((_line, i) => {
      expect(viaWriter.chunks[i]?.toString('hex'), `case ${i}: ${viaPino.chunks[i]?.toString('utf8')}`).toBe(viaPino.chunks[i]?.toString('hex'));
    });
  });

  it('writes one line in the documented form: pino level 30, epoch time, service, the fields, msg "request"', () => {
    const { stream, chunks } = capture();
    vi.setSystemTime(1795968802090);
    new RequestLineWriter(createLogger('info', stream)).write({ ...everyValue()[1]!, server_timings: { queueMs: 1.5 } });
    const line = Buffer.concat(chunks).toString('utf8');
    expect(line.endsWith('}\n')).toBe(true);
    expect(line.split('\n')).toHaveLength(2);
    expect(line.startsWith('{"level":30,"time":1795968802090,"service":"tokentap","method":"POST","path":"/v1/chat/completions",')).toBe(true);
    expect(Object.keys(JSON.parse(line) as object)).toEqual([
      'level', 'time', 'service', 'method', 'path', 'status', 'outcome', 'workload', 'model', 'ttfb_ms', 'ttft_ms', 'ttft_answer_ms', 'outside_engine_ttft_ms',
      'queue_or_outside_engine_ttft_ms', 'tpot_ms', 'e2e_ms', 'input_tokens', 'cached_input_tokens', 'output_tokens', 'token_source', 'content_events',
      'counted_tokens', 'server_timings', 'accelerator_seconds', 'error', 'retried', 'operation', 'gpu_memory_used_bytes', 'msg',
    ]);
  });

  it('writes the example line of docs/logs.md exactly as the page shows it', () => {
    const example = /```json\n(\{.*"msg":"request"\})\n```/.exec(readFileSync(join(process.cwd(), 'docs', 'logs.md'), 'utf8'))?.[1];
    expect(example, 'docs/logs.md shows a request line').toBeDefined();
    const fields = JSON.parse(example as string) as RequestLine & { time: number };
    const { stream, chunks } = capture();
    vi.setSystemTime(fields.time);
    new RequestLineWriter(createLogger('info', stream)).write({
      ...fields,
      ttft_answer_ms: undefined,
      outside_engine_ttft_ms: undefined,
      queue_or_outside_engine_ttft_ms: undefined,
      cached_input_tokens: undefined,
      accelerator_seconds: undefined,
      error: undefined,
      retried: undefined,
      operation: undefined,
      gpu_memory_used_bytes: undefined,
    });
    expect(Buffer.concat(chunks).toString('utf8')).toBe(`${example as string}\n`);
  });

  it('writes nothing when info is below the logger level, and writes again once the level allows it', () => {
    const { stream, chunks } = capture();
    const logger = createLogger('warn', stream);
    const writer = new RequestLineWriter(logger);
    writer.write(everyValue()[0]!);
    expect(chunks).toHaveLength(0);
    logger.level = 'info';
    writer.write(everyValue()[0]!);
    expect(chunks).toHaveLength(1);
  });

  it('refuses a logger createLogger did not make, whose destination and batching it cannot know', () => {
    expect(() => new RequestLineWriter(pino({}, capture().stream))).toThrow(/not made by createLogger/);
  });

  it('writes nothing at level silent', () => {
    const { stream, chunks } = capture();
    new RequestLineWriter(createLogger('silent', stream)).write(everyValue()[0]!);
    expect(chunks).toHaveLength(0);
  });
});

describe('RequestLineWriter on a file descriptor (batched writes)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'tokentap-request-line-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('has a lone request line written by the batch timer, without waiting for a full batch', async () => {
    const file = join(dir, 'lone.log');
    const writer = new RequestLineWriter(createLogger('info', openSync(file, 'w')));
    const startMs = performance.now();
    writer.write(everyValue()[1]!);
    while (!readFileSync(file, 'utf8').includes('"msg":"request"')) {
      expect(performance.now() - startMs, 'the line was not written within 2 s').toBeLessThan(2000);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(readFileSync(file, 'utf8').split('\n').filter(Boolean).map((line) => (JSON.parse(line) as { path: string }).path)).toEqual(['/v1/chat/completions']);
  });

  it('writes nothing to the file when info is below the logger level', async () => {
    const file = join(dir, 'warn.log');
    const logger = createLogger('warn', openSync(file, 'w'));
    new RequestLineWriter(logger).write(everyValue()[1]!);
    logger.warn('after');
    const startMs = performance.now();
    while (!readFileSync(file, 'utf8').includes('"msg":"after"')) {
      expect(performance.now() - startMs, 'the warning was not written within 2 s').toBeLessThan(2000);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(readFileSync(file, 'utf8').split('\n').filter(Boolean).map((line) => (JSON.parse(line) as { msg: string }).msg)).toEqual(['after']);
  });
});
