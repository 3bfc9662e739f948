import type { Attributes, Meter, ObservableResult } from '@opentelemetry/api';
import type { Clock } from '../clock/clock.js';
import { ATTR, PROFILE_METRICS } from '../metrics/definitions.js';
import { BytesPerToken } from './bytes-per-token.js';
import { buildProfile, type ProfileWindow } from './profile-builder.js';
import { PromptFingerprinter, type PromptBlocks } from './prompt-fingerprint.js';
import { RequestShapeRing, type RequestShape, type StoredOutcome } from './request-shape-ring.js';
import type { ProfileSet, WorkloadProfile } from './workload-profile.js';

/** `profiles:` as the program uses it (config/load.ts). */
export interface ProfileSettings {
  /** Requests each workload's record holds (`profiles.max_requests_per_workload`). */
  readonly maxRequestsPerWorkload: number;
  /** Tokens per fingerprint block and Mooncake hash id (`profiles.block_tokens`). */
  readonly blockTokens: number;
  /** Names of the workloads that keep a record (every one unless its `profile: false`, or `profiles.enabled: false`). */
  readonly workloads: readonly string[];
}

/**
 * Block hashes held per workload, as a multiple of its request cap: 16 blocks is 8,192 tokens at
 * 512 per block, so a workload whose prompts average more keeps proportionally fewer requests.
 */
export const BLOCK_HASHES_PER_REQUEST = 16;
/** Blocks hashed of one prompt (131,072 tokens at 512): the work per request is bounded with it. */
export const MAX_BLOCKS_PER_REQUEST = 256;

/** What the request monitor reports of a finished generation (once, from record()). */
export interface FinishedRequest {
  /** Monotonic, as the clock gives it (the timeline's startMs). */
  readonly startMs: number;
  readonly durationMs: number;
  readonly inputTokens: number;
  readonly outputTokens: number;
  readonly cachedInputTokens: number;
  readonly outcome: StoredOutcome;
  readonly blocks: PromptBlocks | undefined;
}

interface WorkloadRecord {
  readonly ring: RequestShapeRing;
  readonly bytesPerToken: BytesPerToken;
  readonly attributes: Attributes;
}

/**
 * Every workload's rolling, text-free record of finished requests (docs/workload-profiles.md), and
 * the profiles fitted from it. Its memory is fixed at start-up: `bytes` is the whole of what grows
 * with traffic, whatever the traffic.
 */
export class ProfileStore {
  readonly blockTokens: number;
  private readonly records = new Map<string, WorkloadRecord>();
  private readonly fingerprinter: PromptFingerprinter;
  private readonly clock: Clock;
  /** Unix ms at monotonic 0: the wall clock read once, then monotonic differences (STYLE.md, pino's lib/time.js). */
  private readonly unixOffsetMs: number;
  /** When the store was created: nothing before it was seen, so no window reaches further back. */
  private readonly createdUnixMs: number;

  /** `options.key`: the fingerprint key, for tests that prove it never leaves; `nowUnixMs`: the wall clock, read once. */
  constructor(settings: ProfileSettings, clock: Clock, options: { readonly key?: Buffer; readonly nowUnixMs?: number } = {}) {
    this.blockTokens = settings.blockTokens;
    this.clock = clock;
    this.unixOffsetMs = (options.nowUnixMs ?? Date.now()) - clock.nowMs();
    this.createdUnixMs = this.unixOffsetMs + clock.nowMs();
    this.fingerprinter = new PromptFingerprinter(options.key);
    for (const name of settings.workloads) {
      this.records.set(name, {
        ring: new RequestShapeRing(settings.maxRequestsPerWorkload, settings.maxRequestsPerWorkload * BLOCK_HASHES_PER_REQUEST, MAX_BLOCKS_PER_REQUEST),
        bytesPerToken: new BytesPerToken(),
        attributes: Object.freeze({ [ATTR.workload]: name }),
      });
    }
  }

  /** Whether `workload` keeps a record; the monitor does no profiling work for one that does not. */
  enabled(workload: string): boolean {
    return this.records.has(workload);
  }

  get workloads(): readonly string[] {
    return [...this.records.keys()];
  }

  /** The request body's prompt fingerprint, once per request at the body's end; undefined for a workload without a record. */
  fingerprint(workload: string, body: unknown): PromptBlocks | undefined {
    const record = this.records.get(workload);
    if (record === undefined) return undefined;
    const blockBytes = Math.max(1, Math.round(this.blockTokens * record.bytesPerToken.value));
    return this.fingerprinter.blocks(body, blockBytes, MAX_BLOCKS_PER_REQUEST);
  }

  record(workload: string, request: FinishedRequest): void {
    const record = this.records.get(workload);
    if (record === undefined) return;
    if (request.blocks !== undefined) record.bytesPerToken.observe(request.blocks.promptBytes, request.inputTokens);
    const shape: RequestShape = {
      startUnixMs: this.unixOffsetMs + request.startMs,
      durationMs: request.durationMs,
      inputTokens: request.inputTokens,
      outputTokens: request.outputTokens,
      cachedInputTokens: request.cachedInputTokens,
      outcome: request.outcome,
      blockHashes: request.blocks?.hashes ?? [],
    };
    record.ring.push(shape);
  }

  /** The requests of `workload` that started in the last `windowMs`, and the window they cover; undefined for a workload without a record. */
  shapes(workload: string, windowMs: number): { readonly shapes: RequestShape[]; readonly window: ProfileWindow } | undefined {
    const record = this.records.get(workload);
    if (record === undefined) return undefined;
    const window = this.window(windowMs, [record]);
    return { shapes: byStart(record.ring.since(window.startUnixMs)), window };
  }

  profile(workload: string, windowMs: number): WorkloadProfile | undefined {
    const held = this.shapes(workload, windowMs);
    return held === undefined ? undefined : buildProfile(workload, held.shapes, held.window, this.blockTokens);
  }

  /** Every recorded workload over one window, and the mix: each one's share of the requests in it. */
  profileSet(windowMs: number): ProfileSet {
    const window = this.window(windowMs, [...this.records.values()]);
    const workloads = [...this.records].map(([name, record]) => buildProfile(name, byStart(record.ring.since(window.startUnixMs)), window, this.blockTokens));
    const total = workloads.reduce((sum, p) => sum + p.requests, 0);
    const mix: Record<string, number> = {};
    for (const profile of workloads) mix[profile.workload] = total === 0 ? 0 : profile.requests / total;
    return { window, mix, workloads };
  }

  /** The arrivals of every recorded workload together over the last `windowMs` (the mixture's arrival process). */
  mergedArrivals(windowMs: number): WorkloadProfile['arrivals'] {
    const window = this.window(windowMs, [...this.records.values()]);
    const shapes = byStart([...this.records.values()].flatMap((record) => record.ring.since(window.startUnixMs)));
    return buildProfile('', shapes, window, this.blockTokens).arrivals;
  }

  /** Bytes of every workload's record: fixed at start-up, the cap docs/workload-profiles.md states. */
  get bytes(): number {
    let bytes = 0;
    for (const record of this.records.values()) bytes += record.ring.bytes;
    return bytes;
  }

  evicted(workload: string): number {
    return this.records.get(workload)?.ring.evicted ?? 0;
  }

  register(meter: Meter): void {
    const def = PROFILE_METRICS.requestsEvicted;
    meter.createObservableCounter(def.otelName, { unit: def.unit, description: def.description }).addCallback((result: ObservableResult) => {
      for (const record of this.records.values()) if (record.ring.evicted > 0) result.observe(record.ring.evicted, record.attributes);
    });
  }

  /**
   * The last `windowMs` up to now, starting no earlier than the store (the sidecar) did. Where a
   * record has dropped requests that started inside it, the window starts where the last of them
   * started: every finished request that started after that is held, so a profile never claims a
   * span it cannot see whole. A rate over a span it did not see would be diluted by it (30 minutes
   * asked of a sidecar up for one would give a thirtieth), and one over a span it saw in part
   * would miss the short requests a long one outlived in the record.
   */
  private window(windowMs: number, records: readonly WorkloadRecord[]): ProfileWindow {
    const endUnixMs = this.unixOffsetMs + this.clock.nowMs();
    let startUnixMs = Math.max(endUnixMs - windowMs, this.createdUnixMs);
    for (const { ring } of records) startUnixMs = Math.max(startUnixMs, ring.droppedStartUnixMs);
    return { startUnixMs, endUnixMs, seconds: (endUnixMs - startUnixMs) / 1000 };
  }
}

/** The ring holds requests in the order they finished; profiles and traces read them in the order they started. */
function byStart(shapes: RequestShape[]): RequestShape[] {
  return shapes.sort((a, b) => a.startUnixMs - b.startUnixMs);
}
