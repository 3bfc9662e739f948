/** Outcomes as stored (one byte each); the index is what the ring keeps. Matches recorder.ts's Outcome. */
export const OUTCOMES = ['completed', 'client_cancelled', 'client_error', 'upstream_error', 'truncated', 'timeout', 'shutdown'] as const;
export type StoredOutcome = (typeof OUTCOMES)[number];

/** One finished request, numbers only. Token counts are NaN when unknown. */
export interface RequestShape {
  readonly startUnixMs: number;
  readonly durationMs: number;
  readonly inputTokens: number;
  readonly outputTokens: number;
  readonly cachedInputTokens: number;
  readonly outcome: StoredOutcome;
  /** The prompt's block hashes (prompt-fingerprint.ts), at most the ring's per-request cap. */
  readonly blockHashes: readonly number[];
}

/** Bytes each request costs in the ring besides its block hashes: the typed arrays' element sizes below. */
export const BYTES_PER_REQUEST = 8 + 4 + 4 + 4 + 4 + 1 + 4 + 2;
/** Bytes each stored block hash costs (a double: 48 bits of HMAC held exactly). */
export const BYTES_PER_BLOCK_HASH = 8;

/** Stored token counts: -1 for unknown. Counts above 2^31 - 1 cannot be real and are stored as unknown. */
const UNKNOWN = -1;

/**
 * A workload's rolling record of finished requests: numbers in preallocated typed arrays (so its
 * memory is fixed at construction, whatever the traffic), and block hashes in a circular arena
 * beside them. Adding a request when either is full drops the oldest requests first; the count of
 * those dropped is kept for the counter. Never holds text, and nothing here grows.
 */
export class RequestShapeRing {
  readonly capacity: number;
  readonly hashCapacity: number;
  readonly maxHashesPerRequest: number;
  private readonly start: Float64Array;
  private readonly duration: Float32Array;
  private readonly input: Int32Array;
  private readonly output: Int32Array;
  private readonly cached: Int32Array;
  private readonly outcome: Uint8Array;
  private readonly hashStart: Uint32Array;
  private readonly hashCount: Uint16Array;
  private readonly hashes: Float64Array;
  /** Slot of the oldest request, and how many are held. */
  private head = 0;
  private size = 0;
  /** Arena slot of the oldest held hash, and how many are held. */
  private hashHead = 0;
  private hashesHeld = 0;
  /** Requests dropped to make room, since start. */
  evicted = 0;
  /**
   * The latest start of any request dropped (-Infinity before the first): requests are dropped in
   * the order they finished, so a long request can outlive shorter ones that started after it, and
   * only the requests that started after this one are all held.
   */
  droppedStartUnixMs = Number.NEGATIVE_INFINITY;

  /** `capacity` requests and `hashCapacity` block hashes; no request keeps more than `maxHashesPerRequest` (at most 65,535). */
  constructor(capacity: number, hashCapacity: number, maxHashesPerRequest: number) {
    this.capacity = capacity;
    this.maxHashesPerRequest = maxHashesPerRequest;
    this.hashCapacity = hashCapacity;
    this.start = new Float64Array(capacity);
    this.duration = new Float32Array(capacity);
    this.input = new Int32Array(capacity);
    this.output = new Int32Array(capacity);
    this.cached = new Int32Array(capacity);
    this.outcome = new Uint8Array(capacity);
    this.hashStart = new Uint32Array(capacity);
    this.hashCount = new Uint16Array(capacity);
    this.hashes = new Float64Array(hashCapacity);
  }

  /** Bytes held by the ring, fixed at construction: the documented cap (docs/workload-profiles.md). */
  get bytes(): number {
    return this.capacity * BYTES_PER_REQUEST + this.hashCapacity * BYTES_PER_BLOCK_HASH;
  }

  get length(): number {
    return this.size;
  }

  push(shape: RequestShape): void {
    const kept = Math.min(shape.blockHashes.length, this.maxHashesPerRequest, this.hashCapacity);
    while (this.size === this.capacity || this.hashesHeld + kept > this.hashCapacity) this.dropOldest();
    const slot = (this.head + this.size) % this.capacity;
    this.start[slot] = shape.startUnixMs;
    this.duration[slot] = shape.durationMs;
    this.input[slot] = storedCount(shape.inputTokens);
    this.output[slot] = storedCount(shape.outputTokens);
    this.cached[slot] = storedCount(shape.cachedInputTokens);
    this.outcome[slot] = OUTCOMES.indexOf(shape.outcome);
    const first = (this.hashHead + this.hashesHeld) % this.hashCapacity;
    this.hashStart[slot] = first;
    this.hashCount[slot] = kept;
    for (let i = 0; i < kept; i++) this.hashes[(first + i) % this.hashCapacity] = shape.blockHashes[i] as number;
    this.hashesHeld += kept;
    this.size++;
  }

  /** Every held request that started at or after `fromUnixMs`, oldest first. */
  since(fromUnixMs: number): RequestShape[] {
    const shapes: RequestShape[] = [];
    for (let i = 0; i < this.size; i++) {
      const slot = (this.head + i) % this.capacity;
      if ((this.start[slot] as number) < fromUnixMs) continue;
      shapes.push(this.shapeAt(slot));
    }
    return shapes;
  }

  private shapeAt(slot: number): RequestShape {
    const count = this.hashCount[slot] as number;
    const first = this.hashStart[slot] as number;
    const blockHashes = new Array<number>(count);
    for (let i = 0; i < count; i++) blockHashes[i] = this.hashes[(first + i) % this.hashCapacity] as number;
    return {
      startUnixMs: this.start[slot] as number,
      durationMs: this.duration[slot] as number,
      inputTokens: loadedCount(this.input[slot] as number),
      outputTokens: loadedCount(this.output[slot] as number),
      cachedInputTokens: loadedCount(this.cached[slot] as number),
      outcome: OUTCOMES[this.outcome[slot] as number] as StoredOutcome,
      blockHashes,
    };
  }

  private dropOldest(): void {
    this.droppedStartUnixMs = Math.max(this.droppedStartUnixMs, this.start[this.head] as number);
    const count = this.hashCount[this.head] as number;
    this.hashHead = (this.hashHead + count) % this.hashCapacity;
    this.hashesHeld -= count;
    this.head = (this.head + 1) % this.capacity;
    this.size--;
    this.evicted++;
  }
}

function storedCount(value: number): number {
  return Number.isInteger(value) && value >= 0 && value <= 0x7fffffff ? value : UNKNOWN;
}

function loadedCount(value: number): number {
  return value === UNKNOWN ? Number.NaN : value;
}
