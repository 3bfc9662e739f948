import { describe, expect, it, vi } from 'vitest';
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
    const allocations = (cap: number, bytes: number): number[] => {
      const growable = new GrowableBytes(cap);
      const allocate = vi.spyOn(Buffer, 'allocUnsafe');
      try {
        for (let i = 0; i < bytes; i++) growable.append(Buffer.from([i & 0xff]));
        return allocate.mock.calls.map(([size]) => size);
      } finally {
        allocate.mockRestore();
        expect(growable.length).toBe(bytes);
      }
    };
    // Up to the cap (3,000) while the bytes fit, then doubling past it.
    expect(allocations(3_000, 10_000)).toEqual([1024, 2048, 3000, 6000, 12000]);
    expect(allocations(1 << 20, 10_000)).toEqual([1024, 2048, 4096, 8192, 16384]);
  });
});
