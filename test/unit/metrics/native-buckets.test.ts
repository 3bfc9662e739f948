import { describe, expect, it } from 'vitest';
import {
  bucketFactor,
  bucketIndex,
  MAX_SCHEMA,
  MIN_SCHEMA,
  NativeBuckets,
  relativeError,
  schemaForFactor,
  spansAndDeltas,
  upperBound,
} from '../../../src/metrics/native-buckets.js';
import { createRandom as random } from '../../../src/simulator/vocabulary.js';


const SCHEMAS = Array.from({ length: MAX_SCHEMA - MIN_SCHEMA + 1 }, (_, i) => MIN_SCHEMA + i);

describe('native histogram bucket index (specification: positive bucket i holds (base^(i-1), base^i], base = 2^(2^-n))', () => {
  it.each(SCHEMAS)('puts every value of a log-uniform sample between the bounds of its bucket at schema %i', (schema) => {
    const next = random(1000 + schema);
    for (let k = 0; k < 5000; k++) {
      const v = 2 ** (next() * 60 - 30);
      const i = bucketIndex(v, schema);
      const lower = upperBound(i - 1, schema);
      const upper = upperBound(i, schema);
      // Within 1e-12 of a boundary the float pow() of the formula itself is the uncertain side.
      if (Math.abs(v / upper - 1) < 1e-12 || Math.abs(v / lower - 1) < 1e-12) continue;
      expect(v, `v=${v} index ${i}`).toBeGreaterThan(lower);
      expect(v, `v=${v} index ${i}`).toBeLessThanOrEqual(upper);
    }
  });

  it.each(SCHEMAS)('counts a power of two that is a boundary at schema %i in the bucket it closes (upper bound inclusive)', (schema) => {
    const step = schema >= 0 ? 1 : 2 ** -schema;
    for (let k = -3 * step; k <= 3 * step; k += step) {
      const index = schema >= 0 ? k * 2 ** schema : k / step;
      expect(bucketIndex(2 ** k, schema), `2^${k}`).toBe(index);
      expect(bucketIndex(2 ** k * (1 + 2 ** -50), schema), `just above 2^${k}`).toBe(index + 1);
    }
  });

  it('indexes 1 as 0, and numbers below 1 with negative indices', () => {
    expect(bucketIndex(1, 3)).toBe(0);
    expect(bucketIndex(0.5, 3)).toBe(-8);
    expect(bucketIndex(0.2, 3)).toBe(-18); // 2^(-18/8) = 0.2102 >= 0.2 > 2^(-19/8) = 0.1928
    expect(bucketIndex(0.2, 0)).toBe(-2); // (0.125, 0.25]
  });

  it('handles subnormal numbers and puts +Inf one past the bucket of the largest float (the overflow bucket)', () => {
    expect(bucketIndex(Number.MIN_VALUE, 0)).toBe(-1074); // 2^-1074 is a power of two: it closes bucket (2^-1075, 2^-1074]
    expect(bucketIndex(Number.MIN_VALUE * 3, 0)).toBe(-1072); // 3 x 2^-1074 is in (2^-1073, 2^-1072]
    expect(bucketIndex(Number.MAX_VALUE, 8)).toBe(262144); // the specification's figure for schema 8
    expect(bucketIndex(Infinity, 8)).toBe(262145);
    expect(bucketIndex(Infinity, 0)).toBe(bucketIndex(Number.MAX_VALUE, 0) + 1);
  });
});

describe('resolution settings', () => {
  it('maps a bucket factor to the schema the specification table gives', () => {
    const table: Array<[number, number]> = [
      [65536, -4], [256, -3], [16, -2], [4, -1], [2, 0], [1.5, 1], [1.2, 2], [1.1, 3], [1.05, 4], [1.03, 5], [1.02, 6], [1.01, 7], [1.005, 8],
    ];
    for (const [factor, schema] of table) expect(schemaForFactor(factor), `factor ${factor}`).toBe(schema);
  });

  it('states the relative error of a value reported as its bucket middle: 4.3 % at schema 3, halving per schema step', () => {
    expect(bucketFactor(3)).toBeCloseTo(1.0905, 4);
    expect(relativeError(3)).toBeCloseTo(0.0433, 4);
    expect(relativeError(4)).toBeCloseTo(0.0217, 4);
    expect(relativeError(0)).toBeCloseTo(1 / 3, 6);
  });
});

describe('spans and deltas (the specification\'s worked example: -2→3, -1→5, 0→0, 1→0, 2→1, 3→0, 4→3, 5→2)', () => {
  const populated: Array<[number, number]> = [[-2, 3], [-1, 5], [2, 1], [4, 3], [5, 2]];

  it('writes [3, 2, -4, 2, -1] with spans [-2,2] [2,1] [1,2] when no empty bucket is written', () => {
    expect(spansAndDeltas(populated, 0)).toEqual({ deltas: [3, 2, -4, 2, -1], spans: [{ offset: -2, length: 2 }, { offset: 2, length: 1 }, { offset: 1, length: 2 }] });
  });

  it('writes [3, 2, -4, -1, 3, -1] with spans [-2,2] [2,4] when a single empty bucket is written explicitly', () => {
    expect(spansAndDeltas(populated, 1)).toEqual({ deltas: [3, 2, -4, -1, 3, -1], spans: [{ offset: -2, length: 2 }, { offset: 2, length: 4 }] });
  });

  it('writes [3, 2, -5, 0, 1, -1, 3, -1] in one span [-2,8] when every empty bucket is written', () => {
    expect(spansAndDeltas(populated, Infinity)).toEqual({ deltas: [3, 2, -5, 0, 1, -1, 3, -1], spans: [{ offset: -2, length: 8 }] });
  });

  it('produces the same example from observations at schema 0 (bucket i = (2^(i-1), 2^i])', () => {
    const native = new NativeBuckets({ schema: 0, maxBuckets: 160, zeroThreshold: 0, maxZeroThreshold: 0 });
    native.add(0.25, 3);
    for (let i = 0; i < 5; i++) native.add(0.3 + i * 0.04, 1); // all in (0.25, 0.5]
    native.add(3.5, 1);
    native.add(16, 3);
    native.add(17, 1);
    native.add(32, 1);
    const snapshot = native.snapshot(1);
    expect(snapshot.schema).toBe(0);
    expect(snapshot.positive).toEqual({ deltas: [3, 2, -4, -1, 3, -1], spans: [{ offset: -2, length: 2 }, { offset: 2, length: 4 }] });
    expect(snapshot.negative).toEqual({ deltas: [], spans: [] });
  });
});

describe('zero bucket and negative observations', () => {
  it('counts every observation in [-threshold, +threshold] in the zero bucket and none of them in a regular bucket', () => {
    const native = new NativeBuckets({ schema: 3, maxBuckets: 160, zeroThreshold: 0.001, maxZeroThreshold: 0.001 });
    for (const v of [0, 0.001, -0.001, 0.0005]) native.add(v, 1);
    native.add(0.0011, 2);
    const snapshot = native.snapshot();
    expect(snapshot.zeroCount).toBe(4);
    expect(snapshot.zeroThreshold).toBe(0.001);
    expect(snapshot.positive.deltas).toEqual([2]);
    expect(snapshot.positive.spans).toEqual([{ offset: bucketIndex(0.0011, 3), length: 1 }]);
  });

  it('mirrors negative observations into the negative buckets by absolute value', () => {
    const native = new NativeBuckets({ schema: 1, maxBuckets: 160, zeroThreshold: 0, maxZeroThreshold: 0 });
    native.add(-1, 2);
    native.add(-3, 1);
    native.add(2, 1);
    const snapshot = native.snapshot(0);
    // -1 has index 0; 3 is in (2^1.5, 2^2], index 4: a gap of 3.
    expect(snapshot.negative.spans).toEqual([{ offset: 0, length: 1 }, { offset: 3, length: 1 }]);
    expect(snapshot.negative.deltas).toEqual([2, -1]);
    expect(snapshot.positive.spans).toEqual([{ offset: 2, length: 1 }]);
  });

  it('ignores NaN (the owner counts it) and counts +Inf in the overflow bucket', () => {
    const native = new NativeBuckets({ schema: 0, maxBuckets: 160, zeroThreshold: 0, maxZeroThreshold: 0 });
    native.add(Number.NaN, 1);
    native.add(Infinity, 1);
    expect(native.bucketCount).toBe(1);
    expect(native.snapshot().positive.spans).toEqual([{ offset: bucketIndex(Infinity, 0), length: 1 }]);
  });
});

describe('bucket limit (specification "Limit the bucket count": widen the zero bucket, then decrement the schema)', () => {
  it('decrements the schema until the buckets fit, with the counts a histogram recorded at the lower schema has', () => {
    const values = Array.from({ length: 300 }, (_, i) => 0.001 * 1.05 ** i);
    const limited = new NativeBuckets({ schema: 5, maxBuckets: 40, zeroThreshold: 0, maxZeroThreshold: 0 });
    for (const v of values) limited.add(v, 1);
    expect(limited.schema).toBeLessThan(5);
    expect(limited.bucketCount).toBeLessThanOrEqual(40);
    const reference = new NativeBuckets({ schema: limited.schema, maxBuckets: 10_000, zeroThreshold: 0, maxZeroThreshold: 0 });
    for (const v of values) reference.add(v, 1);
    expect(limited.snapshot()).toEqual(reference.snapshot());
    // One schema more would not have fitted.
    const finer = new NativeBuckets({ schema: limited.schema + 1, maxBuckets: 10_000, zeroThreshold: 0, maxZeroThreshold: 0 });
    for (const v of values) finer.add(v, 1);
    expect(finer.bucketCount).toBeGreaterThan(40);
  });

  it('first widens the zero threshold to a bucket boundary, up to its maximum, before it lowers the schema', () => {
    const native = new NativeBuckets({ schema: 0, maxBuckets: 3, zeroThreshold: 0, maxZeroThreshold: 0.25 });
    for (const v of [0.1, 0.2, 1, 2]) native.add(v, 1); // buckets -3, -2, 0, 1: one too many
    expect(native.schema).toBe(0);
    expect(native.zeroThreshold).toBe(0.125); // the upper bound of bucket -3
    expect(native.zeroCount).toBe(1);
    native.add(4, 1); // buckets -2, 0, 1, 2: widen to 0.25 (allowed)
    expect(native.zeroThreshold).toBe(0.25);
    expect(native.zeroCount).toBe(2);
    expect(native.schema).toBe(0);
    native.add(8, 1); // buckets 0, 1, 2, 3: widening to 1 exceeds 0.25, so the schema drops
    expect(native.schema).toBe(-1);
    expect(native.zeroThreshold).toBe(0.25);
    expect(native.bucketCount).toBeLessThanOrEqual(3);
  });

  it('stops at schema -4 even when the buckets still do not fit', () => {
    const native = new NativeBuckets({ schema: 0, maxBuckets: 1, zeroThreshold: 0, maxZeroThreshold: 0 });
    native.add(1e-300, 1);
    native.add(1e300, 1);
    expect(native.schema).toBe(MIN_SCHEMA);
    expect(native.bucketCount).toBe(2);
  });
});
