/**
 * The buckets of one Prometheus native histogram with a standard exponential schema, as the
 * native-histogram specification defines them (prometheus/docs, specs/native_histograms.md,
 * "Schema", "Buckets", "Zero bucket", "Limit the bucket count"):
 *
 * - schema n in -4..8; the positive bucket with index i holds (base^(i-1), base^i] with
 *   base = 2^(2^-n), so every power of two is a boundary at every schema, and schema n+1 splits
 *   each bucket of schema n in two;
 * - negative buckets mirror them: index i holds [-base^i, -base^(i-1));
 * - the zero bucket holds every observation in [-zeroThreshold, +zeroThreshold];
 * - beyond `maxBuckets` populated buckets the resolution goes down, in the order client_golang and
 *   the specification give: first the zero threshold widens (up to `maxZeroThreshold`, merging
 *   the buckets nearest zero into the zero bucket), then the schema decrements (pairs of buckets
 *   merge), down to schema -4. The histogram is never reset to win its resolution back: a reset
 *   is a counter reset to Prometheus and loses the observations between two scrapes.
 *
 * Count and sum are not kept here: the owner (direct-metrics.ts HistogramSeries) keeps them once
 * for the classic and the native view alike, so histogram_count equals the classic _count exactly.
 *
 * Cost per sample (the hot path): the bucket index comes from the float's exponent and mantissa
 * (frexp, read through a DataView, no allocation) and a binary search in a table of 2^n mantissa
 * boundaries built once per schema, then one typed-array increment. Encoding (spans and deltas)
 * is paid per scrape.
 */

export interface NativeHistogramSettings {
  /** Initial resolution, -4..8; each bucket's upper bound is the previous one's times 2^(2^-schema). */
  readonly schema: number;
  /** Populated buckets (positive and negative together) before the resolution is reduced. */
  readonly maxBuckets: number;
  /** Observations in [-t, +t] go to the zero bucket. */
  readonly zeroThreshold: number;
  /** How far the zero threshold may widen to stay within maxBuckets before the schema drops; equal to zeroThreshold: never. */
  readonly maxZeroThreshold: number;
}

export const MIN_SCHEMA = -4;
export const MAX_SCHEMA = 8;

/**
 * Defaults: schema 3 (bucket factor 2^(1/8) = 1.0905, client_golang's default factor 1.1 gives the
 * same schema), 160 buckets (the limit client_golang's docs and the OTel SDK's exponential
 * histogram use), the specification's default zero threshold 2^-128, no widening. Schema 3 spans
 * 1 ms..128 s (2^-10..2^7) in 136 buckets, inside the limit.
 */
export const NATIVE_DEFAULTS: NativeHistogramSettings = Object.freeze({
  schema: 3,
  maxBuckets: 160,
  zeroThreshold: 2 ** -128,
  maxZeroThreshold: 2 ** -128,
});

/** Growth factor from one bucket boundary to the next at `schema`: 2^(2^-schema). */
export function bucketFactor(schema: number): number {
  return 2 ** (2 ** -schema);
}

/**
 * The worst relative error of a value reported as the arithmetic middle of its bucket (what
 * histogram_quantile's interpolation tends to within a bucket): (f - 1) / (f + 1). Schema 3: 4.3 %.
 */
export function relativeError(schema: number): number {
  const f = bucketFactor(schema);
  return (f - 1) / (f + 1);
}

/**
 * The lowest resolution whose bucket factor is at most `factor` (the specification's
 * NativeHistogramBucketFactor rule: 1.1 gives schema 3, 2 gives 0); factors below schema 8's give 8.
 */
export function schemaForFactor(factor: number): number {
  for (let schema = MIN_SCHEMA; schema < MAX_SCHEMA; schema++) if (bucketFactor(schema) <= factor) return schema;
  return MAX_SCHEMA;
}

/** Upper bound of positive bucket `index` at `schema` (the specification's `(2**2**-n)**i`). */
export function upperBound(index: number, schema: number): number {
  // Exact for powers of two: 2^(index / 2^schema) when the exponent is an integer.
  return 2 ** (index * 2 ** -schema);
}

/** Mantissa boundaries per schema > 0: 0.5 * 2^(j / 2^schema), j = 0..2^schema-1 (client_golang's nativeHistogramBounds). */
const MANTISSA_BOUNDS: readonly Float64Array[] = Array.from({ length: MAX_SCHEMA + 1 }, (_, schema) => {
  const n = 2 ** schema;
  const bounds = new Float64Array(n);
  for (let j = 0; j < n; j++) bounds[j] = j === 0 ? 0.5 : 2 ** (j / n) / 2;
  return bounds;
});

/**
 * frexp scratch: one 8-byte buffer for the whole process, seen as a double and as two 32-bit words;
 * the hot path allocates nothing. HIGH is the word with sign, exponent and top of the mantissa: index
 * 1 on little-endian machines (every platform Node supports but s390x), 0 on big-endian ones.
 */
const SCRATCH_F64 = new Float64Array(1);
const SCRATCH_U32 = new Uint32Array(SCRATCH_F64.buffer);
const HIGH = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1 ? 1 : 0;
const TWO_64 = 2 ** 64;

/**
 * The index of the positive bucket holding `a` (a > 0, finite or +Inf) at `schema`, as
 * client_golang computes it: a = frac * 2^exp with frac in [0.5, 1), then for schema > 0 the
 * first mantissa bound >= frac plus (exp - 1) * 2^schema, for schema <= 0 ceil(exp' / 2^-schema)
 * where exp' = exp - 1 for an exact power of two.
 */
export function bucketIndex(a: number, schema: number): number {
  if (a === Infinity) return overflowIndex(schema);
  SCRATCH_F64[0] = a;
  let high = SCRATCH_U32[HIGH] as number;
  let biased = (high >>> 20) & 0x7ff;
  let shift = 0;
  if (biased === 0) {
    // Subnormal: scale into the normal range first.
    SCRATCH_F64[0] = a * TWO_64;
    high = SCRATCH_U32[HIGH] as number;
    biased = (high >>> 20) & 0x7ff;
    shift = 64;
  }
  const exp = biased - 1022 - shift;
  SCRATCH_U32[HIGH] = (high & 0x800fffff) | (1022 << 20);
  const frac = SCRATCH_F64[0] as number;
  if (schema > 0) {
    const bounds = MANTISSA_BOUNDS[schema] as Float64Array;
    let lo = 0;
    let hi = bounds.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if ((bounds[mid] as number) < frac) lo = mid + 1;
      else hi = mid;
    }
    return lo + (exp - 1) * bounds.length;
  }
  const key = frac === 0.5 ? exp - 1 : exp;
  // ceil(key / 2^-schema) in integers; >> floors, also for negative keys.
  return (key + (1 << -schema) - 1) >> -schema;
}

/** The +Inf bucket: one past the bucket holding Number.MAX_VALUE (the specification's "positive overflow bucket"). */
function overflowIndex(schema: number): number {
  return bucketIndex(Number.MAX_VALUE, schema) + 1;
}

/** One sign's buckets: a dense window of counts over consecutive indices, grown on demand. */
class BucketWindow {
  /** Index of counts[0]. */
  base = 0;
  counts = new Float64Array(0);
  /** Buckets with a count above zero. */
  populated = 0;

  add(index: number, n: number): void {
    let offset = index - this.base;
    if (offset < 0 || offset >= this.counts.length) {
      this.cover(index);
      offset = index - this.base;
    }
    if (this.counts[offset] === 0) this.populated++;
    (this.counts[offset] as number) += n;
  }

  holds(index: number): boolean {
    const offset = index - this.base;
    return offset >= 0 && offset < this.counts.length;
  }

  /** Span of indices the window would need to hold `index` too. */
  spanWith(index: number): number {
    if (this.populated === 0) return 1;
    const [first, last] = this.range();
    return Math.max(last, index) - Math.min(first, index) + 1;
  }

  /** First and last populated index; only when populated > 0. */
  range(): [number, number] {
    let first = 0;
    while (this.counts[first] === 0) first++;
    let last = this.counts.length - 1;
    while (this.counts[last] === 0) last--;
    return [this.base + first, this.base + last];
  }

  /** Regrows the window to hold `index`, with headroom on both sides so growth is rare. */
  private cover(index: number): void {
    if (this.populated === 0) {
      this.counts = new Float64Array(16);
      this.base = index - 8;
      return;
    }
    const [first, last] = this.range();
    const lo = Math.min(first, index);
    const hi = Math.max(last, index);
    const headroom = Math.max(8, (hi - lo + 1) >> 1);
    const next = new Float64Array(hi - lo + 1 + 2 * headroom);
    const nextBase = lo - headroom;
    for (let i = first; i <= last; i++) next[i - nextBase] = this.counts[i - this.base] as number;
    this.counts = next;
    this.base = nextBase;
  }

  /** Moves every bucket whose index is <= `index` out; returns their total count. */
  takeUpTo(index: number): number {
    let taken = 0;
    for (let offset = 0; offset < this.counts.length && this.base + offset <= index; offset++) {
      const c = this.counts[offset] as number;
      if (c > 0) {
        taken += c;
        this.counts[offset] = 0;
        this.populated--;
      }
    }
    return taken;
  }

  /** Halves the resolution: bucket i becomes bucket ceil(i / 2) (the specification's merge of neighbours). */
  halve(): void {
    if (this.populated === 0) {
      this.counts = new Float64Array(0);
      return;
    }
    const [first, last] = this.range();
    const lo = Math.ceil(first / 2);
    const hi = Math.ceil(last / 2);
    const next = new Float64Array(hi - lo + 1 + 16);
    const nextBase = lo - 8;
    let populated = 0;
    for (let i = first; i <= last; i++) {
      const c = this.counts[i - this.base] as number;
      if (c === 0) continue;
      const j = Math.ceil(i / 2) - nextBase;
      if (next[j] === 0) populated++;
      (next[j] as number) += c;
    }
    this.counts = next;
    this.base = nextBase;
    this.populated = populated;
  }

  /** (index, count) of every populated bucket in index order. */
  *entries(): Generator<[number, number]> {
    for (let offset = 0; offset < this.counts.length; offset++) {
      const c = this.counts[offset] as number;
      if (c > 0) yield [this.base + offset, c];
    }
  }
}

/** A span of the exposition: `offset` from the end of the previous span (absolute index for the first), `length` buckets. */
export interface BucketSpan {
  readonly offset: number;
  readonly length: number;
}

/** One sign's buckets as the exposition writes them: spans plus each bucket's count as a delta to the previous one. */
export interface SpansAndDeltas {
  readonly spans: BucketSpan[];
  readonly deltas: number[];
}

/**
 * Spans and deltas of populated (index, count) pairs in index order. A gap of at most `maxGap`
 * empty buckets is written as explicit zero buckets rather than a new span (the specification's
 * example shows gap 0, 1 and unlimited; client_golang fills gaps of up to 2, since a span costs
 * two varints and a zero delta one).
 */
export function spansAndDeltas(buckets: Iterable<readonly [number, number]>, maxGap = 2): SpansAndDeltas {
  const spans: Array<{ offset: number; length: number }> = [];
  const deltas: number[] = [];
  let previousIndex = 0;
  let previousCount = 0;
  for (const [index, count] of buckets) {
    const gap = index - previousIndex - 1;
    const current = spans[spans.length - 1];
    if (current === undefined) {
      spans.push({ offset: index, length: 1 });
    } else if (gap <= maxGap) {
      for (let i = 0; i < gap; i++) {
        deltas.push(0 - previousCount); // not -previousCount: -0 for an empty bucket after an empty one
        previousCount = 0;
      }
      current.length += gap + 1;
    } else {
      spans.push({ offset: gap, length: 1 });
    }
    deltas.push(count - previousCount);
    previousCount = count;
    previousIndex = index;
  }
  return { spans, deltas };
}

/** What the exposition needs of one native histogram besides count and sum. */
export interface NativeSnapshot {
  readonly schema: number;
  readonly zeroThreshold: number;
  readonly zeroCount: number;
  readonly positive: SpansAndDeltas;
  readonly negative: SpansAndDeltas;
}

/**
 * Bound on the dense window's width, in bucket slots: a value far from the others (a token count
 * of 2^40 beside ones of 1..100) would otherwise make the window wide while few buckets are
 * populated. Beyond it the resolution drops as for too many buckets. 8 x the default 160 buckets
 * is 10 KiB of counts per sign and series.
 */
const MAX_WINDOW_FACTOR = 8;

export class NativeBuckets {
  private schemaNow: number;
  private zeroThresholdNow: number;
  private readonly maxBuckets: number;
  private readonly maxZeroThreshold: number;
  private readonly maxWindow: number;
  private zeroCountNow = 0;
  private readonly positive = new BucketWindow();
  private readonly negative = new BucketWindow();

  constructor(settings: NativeHistogramSettings = NATIVE_DEFAULTS) {
    this.schemaNow = settings.schema;
    this.zeroThresholdNow = settings.zeroThreshold;
    this.maxBuckets = settings.maxBuckets;
    this.maxZeroThreshold = Math.max(settings.maxZeroThreshold, settings.zeroThreshold);
    this.maxWindow = Math.max(64, MAX_WINDOW_FACTOR * settings.maxBuckets);
  }

  get schema(): number {
    return this.schemaNow;
  }

  get zeroThreshold(): number {
    return this.zeroThresholdNow;
  }

  get zeroCount(): number {
    return this.zeroCountNow;
  }

  /** Populated buckets, both signs. */
  get bucketCount(): number {
    return this.positive.populated + this.negative.populated;
  }

  /**
   * `n` observations of `value`. NaN goes to no bucket (the owner still counts it, as the
   * specification asks); +Inf and -Inf go to the overflow buckets.
   */
  add(value: number, n: number): void {
    if (Number.isNaN(value)) return;
    const a = value < 0 ? -value : value;
    if (a <= this.zeroThresholdNow) {
      this.zeroCountNow += n;
      return;
    }
    const window = value > 0 ? this.positive : this.negative;
    let index = bucketIndex(a, this.schemaNow);
    // Fast path, almost every sample: a bucket that is already populated; no limit can be crossed.
    const offset = index - window.base;
    const counts = window.counts;
    if (offset >= 0 && offset < counts.length && (counts[offset] as number) > 0) {
      (counts[offset] as number) += n;
      return;
    }
    // Only when the window must grow (rare): the width check scans the window.
    while (!window.holds(index) && window.spanWith(index) > this.maxWindow && this.schemaNow > MIN_SCHEMA) {
      this.halveResolution();
      index = bucketIndex(a, this.schemaNow);
    }
    window.add(index, n);
    if (this.bucketCount > this.maxBuckets) this.reduce();
  }

  /** Within maxBuckets again: widen the zero bucket while allowed, then lower the schema. */
  private reduce(): void {
    while (this.bucketCount > this.maxBuckets && this.widenZeroBucket()) {
      // each round merged the buckets nearest zero
    }
    while (this.bucketCount > this.maxBuckets && this.schemaNow > MIN_SCHEMA) this.halveResolution();
  }

  /**
   * Moves the bucket nearest zero (either sign) into the zero bucket, the threshold becoming its
   * upper bound, so the threshold stays a bucket boundary; false when that would exceed maxZeroThreshold.
   */
  private widenZeroBucket(): boolean {
    const lowest = Math.min(
      this.positive.populated > 0 ? this.positive.range()[0] : Infinity,
      this.negative.populated > 0 ? this.negative.range()[0] : Infinity,
    );
    if (lowest === Infinity) return false;
    const threshold = upperBound(lowest, this.schemaNow);
    if (threshold > this.maxZeroThreshold) return false;
    this.zeroCountNow += this.positive.takeUpTo(lowest) + this.negative.takeUpTo(lowest);
    this.zeroThresholdNow = threshold;
    return true;
  }

  private halveResolution(): void {
    this.positive.halve();
    this.negative.halve();
    this.schemaNow--;
  }

  snapshot(maxGap = 2): NativeSnapshot {
    return {
      schema: this.schemaNow,
      zeroThreshold: this.zeroThresholdNow,
      zeroCount: this.zeroCountNow,
      positive: spansAndDeltas(this.positive.entries(), maxGap),
      negative: spansAndDeltas(this.negative.entries(), maxGap),
    };
  }
}
