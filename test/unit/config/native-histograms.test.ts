import { describe, expect, it } from 'vitest';
import { loadSettings } from '../../../src/config/load.js';
import { problemsOf } from '../../helpers/problems.js';

const load = (yaml: string) => loadSettings({ flags: { config: 'c.yaml' }, env: {}, readFile: () => yaml });

describe('metrics.histograms, metrics.native and metrics.otlp_histograms', () => {
  it('defaults to both, schema 3 with 160 buckets and a 2^-128 zero threshold, exponential OTLP histograms', () => {
    const settings = load('');
    expect(settings.histograms).toBe('both');
    expect(settings.native).toEqual({ schema: 3, maxBuckets: 160, zeroThreshold: 2 ** -128, maxZeroThreshold: 2 ** -128 });
    expect(settings.otlpHistograms).toBe('exponential');
  });

  it('takes a schema or a bucket factor, the bucket limit and the zero bucket bounds', () => {
    expect(load('metrics: { native: { schema: 5, max_buckets: 300, zero_threshold: 0.0001, max_zero_threshold: 0.001 } }').native).toEqual({
      schema: 5,
      maxBuckets: 300,
      zeroThreshold: 0.0001,
      maxZeroThreshold: 0.001,
    });
    expect(load('metrics: { native: { bucket_factor: 1.1 } }').native.schema).toBe(3);
    expect(load('metrics: { native: { bucket_factor: 2 } }').native.schema).toBe(0);
  });

  it('pushes explicit buckets over OTLP when only classic histograms are asked for, unless told otherwise', () => {
    expect(load('metrics: { histograms: classic }').otlpHistograms).toBe('explicit');
    expect(load('metrics: { histograms: classic, otlp_histograms: exponential }').otlpHistograms).toBe('exponential');
    expect(load('metrics: { otlp_histograms: explicit }').otlpHistograms).toBe('explicit');
  });

  it('names every bad setting with its path', () => {
    const problems = problemsOf(() =>
      load('metrics:\n  histograms: sparse\n  otlp_histograms: fancy\n  native: { schema: 9, bucket_factor: 1.1, max_zero_threshold: 0 }\n'),
    );
    expect(problems).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/metrics\.histograms: expected "classic", "native" or "both"/),
        expect.stringMatching(/metrics\.otlp_histograms: expected "explicit" or "exponential"/),
        expect.stringMatching(/metrics\.native\.schema: expected an integer from -4 to 8/),
      ]),
    );
    expect(problemsOf(() => load('metrics: { native: { schema: 2, bucket_factor: 1.1 } }'))).toEqual([expect.stringMatching(/metrics\.native\.bucket_factor: give either schema or bucket_factor, not both/)]);
    expect(problemsOf(() => load('metrics: { native: { zero_threshold: 0.01, max_zero_threshold: 0.001 } }'))).toEqual([expect.stringMatching(/metrics\.native\.max_zero_threshold: must not be below zero_threshold/)]);
    expect(problemsOf(() => load('metrics: { native: { bucket_factor: 1 } }'))).toEqual([expect.stringMatching(/metrics\.native\.bucket_factor: expected a number above 1/)]);
    expect(problemsOf(() => load('metrics: { native: { max_buckets: 0, zero_threshold: -1 } }'))).toEqual([
      expect.stringMatching(/metrics\.native\.max_buckets: expected a whole number of buckets from 1 to 100000/),
      expect.stringMatching(/metrics\.native\.zero_threshold: expected a number of seconds \(or tokens\), 0 or more/),
    ]);
  });
});
