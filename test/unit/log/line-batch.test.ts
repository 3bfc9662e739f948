import { describe, expect, it } from 'vitest';
import { LineBatch, type BatchedDestination } from '../../../src/log/line-batch.js';

/** A destination that records what it is handed, as sonic-boom would take it. */
function recording(): BatchedDestination & { writes: string[]; flushes: number } {
  const writes: string[] = [];
  const destination = {
    writes,
    flushes: 0,
    write(text: string): boolean {
      writes.push(text);
      return true;
    },
    flush(callback?: (error?: Error) => void): void {
      destination.flushes++;
      callback?.();
    },
  };
  return destination;
}

const line = (i: number): string => `${JSON.stringify({ i, msg: 'request', path: '/v1/chat/completions', pad: 'x'.repeat(360) })}\n`;

describe('LineBatch', () => {
  it('hands the destination one string per batch, not one per line, with every line in order', () => {
    const destination = recording();
    const batch = new LineBatch(destination, -1, 16384);
    for (let i = 0; i < 100; i++) batch.write(line(i));
    // About 400 characters a line: a batch every 41 lines.
    expect(destination.writes.length).toBe(2);
    for (const text of destination.writes) expect(text.length).toBeGreaterThanOrEqual(16384);
    batch.tick();
    expect(destination.writes.length).toBe(3);
    expect(destination.writes.join('')).toBe(Array.from({ length: 100 }, (_, i) => line(i)).join(''));
  });

  it('writes a lone line at the next tick and flushes the destination, and does nothing at a tick with no new line', () => {
    const destination = recording();
    const batch = new LineBatch(destination, -1, 16384);
    batch.write(line(0));
    expect(destination.writes).toEqual([]);
    batch.tick();
    expect(destination.writes).toEqual([line(0)]);
    expect(destination.flushes).toBe(1);
    batch.tick();
    expect(destination.writes.length).toBe(1);
    expect(destination.flushes).toBe(1);
  });

  it('hands over what it gathered when pino flushes the logger, and calls back only when the destination has written it', () => {
    const destination = recording();
    let written: ((error?: Error) => void) | undefined;
    destination.flush = (callback) => {
      written = callback;
    };
    const batch = new LineBatch(destination, -1, 16384);
    batch.write(line(0));
    batch.write(line(1));
    let called = false;
    batch.flush(() => (called = true));
    expect(destination.writes).toEqual([line(0) + line(1)]);
    expect(called).toBe(false);
    written?.();
    expect(called).toBe(true);
  });

  it('keeps running when the destination was destroyed (a closed stdout): the flush callback gets the error', () => {
    const destination = recording();
    destination.write = () => {
      throw new Error('SonicBoom destroyed');
    };
    destination.flush = () => {
      throw new Error('SonicBoom destroyed');
    };
    const batch = new LineBatch(destination, -1, 100);
    expect(() => batch.write(line(0))).not.toThrow();
    let seen: Error | undefined;
    batch.flush((error) => (seen = error));
    expect(seen?.message).toBe('SonicBoom destroyed');
  });
});
