import type { LimitCounters } from '../metrics/limit-counters.js';
import { BoundedBody } from '../taps/bounded-body.js';
import type { Protocol } from '../taps/route-table.js';
import type { HeldBytesBudget } from './held-bytes.js';

/** limits.sniffed_body_bytes by default. */
export const MAX_SNIFFED_BODY_BYTES = 1 << 20;

/** What the sniffers of one listener share: the per-body cap, the budget across bodies, the counters. */
export interface SnifferLimits {
  readonly maxBytes: number;
  readonly budget: HeldBytesBudget;
  readonly counters: LimitCounters;
}

/**
 * Finds the model a request asks for, beside the forwarded body, parsing it once when it ends.
 * Read when the content type says JSON, or whatever it says on a route to a generation protocol:
 * Ollama's own docs send `curl http://localhost:11434/api/chat -d '{...}'`, which curl labels
 * `application/x-www-form-urlencoded`, and Ollama parses the body as JSON anyway; such requests
 * were labelled `model="unknown"`. Off the routes (and on a route to `none`) the content type
 * decides, so an upload is not held. A body that is not JSON, larger than the cap or without a
 * string `model` yields undefined, and the request is forwarded as is either way. What it holds counts against the listener's held-bytes
 * budget; a body that does not fit in it (or in the per-body cap) is let go at once and counted
 * (`sniffed_body_bytes`, `held_body_bytes`), its model then unknown.
 */
export class RequestBodySniffer {
  private body: BoundedBody | undefined;
  private readonly limits: SnifferLimits;
  /** Bytes taken from the budget for this body. */
  private taken = 0;

  /** `protocol`: that of the route the request is on (undefined off the routes). */
  constructor(contentType: string | undefined, protocol: Protocol | undefined, limits: SnifferLimits) {
    this.limits = limits;
    const isJson = contentType !== undefined && /\bjson\b/i.test(contentType);
    const generationRoute = protocol !== undefined && protocol !== 'none';
    this.body = isJson || generationRoute ? new BoundedBody(limits.maxBytes) : undefined;
  }

  push(chunk: Buffer): void {
    const body = this.body;
    if (body === undefined) return;
    if (!this.limits.budget.take(chunk.length)) {
      this.limits.counters.tripped('held_body_bytes');
      this.release();
      return;
    }
    this.taken += chunk.length;
    body.push(chunk);
    if (body.oversized) {
      this.limits.counters.tripped('sniffed_body_bytes');
      this.release();
    }
  }

  /**
   * The body parsed as JSON, once, at its end (undefined when it was not JSON, oversized or cut);
   * lets go of the bytes. The caller reads the model (modelOf) and, for the workload-shape record,
   * the prompt's fingerprint from it, and keeps neither the bytes nor the parsed text.
   */
  parsed(): unknown {
    const body = this.body?.json();
    this.release();
    return body;
  }

  /** Lets go of what is held (the request ended or was cut); nothing more is held after it. */
  release(): void {
    this.body = undefined;
    this.limits.budget.give(this.taken);
    this.taken = 0;
  }
}

/** The `model` a parsed request body names, if it is a string. */
export function modelOf(body: unknown): string | undefined {
  const model = (body as { model?: unknown } | null | undefined)?.model;
  return typeof model === 'string' ? model : undefined;
}
