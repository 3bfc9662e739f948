import { execFileSync } from 'node:child_process';
import { mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../../src/log/logger.js';

function capture(): { stream: Writable; lines: () => Record<string, unknown>[] } {
  const chunks: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      chunks.push(chunk.toString('utf8'));
      done();
    },
  });
  return { stream, lines: () => chunks.join('').split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>) };
}

describe('createLogger', () => {
  it('removes header objects and credential headers passed by mistake, and keeps everything else', () => {
    const { stream, lines } = capture();
    const logger = createLogger('info', stream);
    logger.info({ headers: { authorization: 'Bearer sk-SECRET' }, path: '/v1/chat/completions' }, 'one');
    logger.info({ req: { headers: { cookie: 'c=COOKIE-SECRET' }, method: 'POST' } }, 'two');
    logger.info({ authorization: 'Bearer sk-SECRET', cookie: 'c=COOKIE-SECRET', 'x-api-key': 'KEY-SECRET', 'proxy-authorization': 'Basic PROXY-SECRET', status: 200 }, 'three');
    const [one, two, three] = lines();
    expect(one).toMatchObject({ msg: 'one', path: '/v1/chat/completions', service: 'tokentap' });
    expect(one).not.toHaveProperty('headers');
    expect(two).toMatchObject({ msg: 'two', req: { method: 'POST' } });
    expect(two!['req']).not.toHaveProperty('headers');
    expect(three).toMatchObject({ msg: 'three', status: 200 });
    for (const key of ['authorization', 'cookie', 'x-api-key', 'proxy-authorization']) expect(three).not.toHaveProperty(key);
    expect(JSON.stringify(lines())).not.toMatch(/SECRET/);
  });

  it('drops lines below the level', () => {
    const { stream, lines } = capture();
    const logger = createLogger('warn', stream);
    logger.info({ status: 200 }, 'request');
    logger.warn({ step: 'body' }, 'request monitor failed');
    expect(lines().map((l) => l['msg'])).toEqual(['request monitor failed']);
  });
});

describe('createLogger on a file descriptor (batched writes)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'tokentap-logger-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('writes a lone line within the batch delay, without waiting for a full batch', async () => {
    const file = join(dir, 'lone.log');
    const logger = createLogger('info', openSync(file, 'w'));
    const startMs = performance.now();
    logger.info({ status: 200 }, 'request');
    while (!readFileSync(file, 'utf8').includes('"msg":"request"')) {
      expect(performance.now() - startMs, 'the line was not written within 2 s').toBeLessThan(2000);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  });

  it('loses and repeats no line when the process exits right after logging', () => {
    const logger = pathToFileURL(join(process.cwd(), 'dist', 'log', 'logger.js')).href;
    const script = `const { createLogger } = await import(${JSON.stringify(logger)}); const l = createLogger('info', 1); for (let i = 0; i < 500; i++) l.info({ i }, 'request'); process.exit(0);`;
    const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' });
    const numbers = out.split('\n').filter(Boolean).map((line) => (JSON.parse(line) as { i: number }).i);
    // Sorted: a batch whose asynchronous write was still in flight at this abrupt exit can land after
    // the lines the exit writes synchronously (no event loop is left to wait for it). The shutdown
    // waits for logger.flush's callback, which keeps the order (the test after next).
    expect(numbers.sort((a, b) => a - b)).toEqual(Array.from({ length: 500 }, (_, i) => i));
  });

  it('writes the lines still gathered at exit, pino\'s and request lines in the order they were logged', () => {
    const logger = pathToFileURL(join(process.cwd(), 'dist', 'log', 'logger.js')).href;
    // 150 lines of about 60 bytes: under one batch, so every one of them is written at exit.
    const script = `const { createLogger, lineSink } = await import(${JSON.stringify(logger)}); const l = createLogger('info', 1); const sink = lineSink(l); for (let i = 0; i < 150; i++) { if (i % 3 === 0) sink(JSON.stringify({ i, via: 'sink' }) + '\\n'); else l.info({ i }, 'request'); } process.exit(0);`;
    const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' });
    const lines = out.split('\n').filter(Boolean).map((line) => JSON.parse(line) as { i: number; via?: string });
    expect(lines.map((line) => line.i)).toEqual(Array.from({ length: 150 }, (_, i) => i));
    expect(lines.filter((line) => line.via === 'sink').length).toBe(50);
  });

  it('has written every line, in order, when logger.flush calls back (the shutdown waits for it before exiting)', () => {
    const logger = pathToFileURL(join(process.cwd(), 'dist', 'log', 'logger.js')).href;
    // 3,000 lines, about 180 KB: several batches, the first written while later ones gather.
    const script = `const { createLogger, lineSink } = await import(${JSON.stringify(logger)}); const l = createLogger('info', 1); const sink = lineSink(l); for (let i = 0; i < 3000; i++) { if (i % 3 === 0) sink(JSON.stringify({ i, via: 'sink' }) + '\\n'); else l.info({ i }, 'request'); } l.flush(() => process.exit(0));`;
    const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' });
    const numbers = out.split('\n').filter(Boolean).map((line) => (JSON.parse(line) as { i: number }).i);
    expect(numbers).toEqual(Array.from({ length: 3000 }, (_, i) => i));
  });
});
