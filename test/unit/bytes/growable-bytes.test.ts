import { describe, expect, it } from 'vitest';
import { GrowableBytes } from '../../../src/bytes/growable-bytes.js';

describe('GrowableBytes', () => {
  it('holds what was appended, in order, across growth, and forgets a prefix', () => {
    const bytes = new GrowableBytes(1 << 20);
    const expected: number[] = [];
    for (let i = 0; i < 5_000; i++) {
      const piece = Buffer.from([i % 251, (i * 7) % 251]);
      bytes.append(piece);
      expected.push(...piece);
    }
    expect(bytes.length).toBe(10_000);
    expect([...bytes.view()]).toEqual(expected);
    bytes.dropFirst(9_990);
    expect([...bytes.view()]).toEqual(expected.slice(9_990));
    bytes.append(Buffer.from([1, 2]));
    expect([...bytes.view()]).toEqual([...expected.slice(9_990), 1, 2]);
    bytes.clear();
    expect(bytes.length).toBe(0);
    expect(bytes.view().length).toBe(0);
  });

  it('grows by doubling, up to its cap while the bytes fit in it and past it too: appending is linear however small the pieces', () => {
    const buffers = (cap: number, bytes: number): number => {
      const growable = new GrowableBytes(cap);
      let count = 0;
      let last: ArrayBufferLike | undefined;
      for (let i = 0; i < bytes; i++) {
        growable.append(Buffer.from([i & 0xff]));
        if (growable.view().buffer !== last) count++;
        last = growable.view().buffer;
      }
      expect(growable.length).toBe(bytes);
      return count;
    };
    // 1 KiB, 2 KiB, 3,000 (the cap), then 6,000 and 12,000 for the bytes past it; 1 to 16 KiB.
    expect(buffers(3_000, 10_000)).toBe(5);
    expect(buffers(1 << 20, 10_000)).toBe(5);
  });
});
