import type { Clock } from '../clock/clock.js';

/**
 * Which requests to a LoRA adapter are cold starts: the first after the adapter had no request for
 * `idleAfterMs`. vLLM keeps at most `--max-loras` adapters on the GPU (default 1) and
 * `--max-cpu-loras` in host memory, evicting the least recently used; a request to an evicted
 * adapter waits for its weights to load before its first token, the known TTFT outlier of
 * multi-adapter serving. The eviction follows the other adapters' traffic, not a timer, so the
 * sidecar cannot know it: an idle time is the proxy it can measure (docs/model-discovery.md#lora-adapters).
 *
 * An adapter's idle time counts from its last request's start or end (an adapter serving a long
 * request is in use), or from when discovery first listed it (vLLM
 * loads an adapter when it is added, `load_lora_adapter`, so the first request right after is
 * warm). Only adapters in the current listing are tracked: at most metrics.max_models entries.
 */
export class AdapterColdStarts {
  /** Listed adapter -> when a request to it last started or ended (or it was first listed); nothing else. */
  private readonly lastRequestMs = new Map<string, number>();

  constructor(
    private readonly clock: Clock,
    private readonly idleAfterMs: number,
  ) {}

  /** Discovery's new listing: the adapters kept (ModelLabels.servedAdapters), which replace the tracked set. */
  listed(adapters: readonly string[]): void {
    const now = this.clock.nowMs();
    const current = new Set(adapters);
    for (const adapter of this.lastRequestMs.keys()) if (!current.has(adapter)) this.lastRequestMs.delete(adapter);
    for (const adapter of current) if (!this.lastRequestMs.has(adapter)) this.lastRequestMs.set(adapter, now);
  }

  /**
   * At a request's start, with its model label: true when it is a listed adapter idle for longer
   * than `idleAfterMs`. One Map lookup and, for an adapter, one update; nothing for other models.
   */
  requestStarted(model: string): boolean {
    const last = this.lastRequestMs.get(model);
    if (last === undefined) return false;
    const now = this.clock.nowMs();
    this.lastRequestMs.set(model, now);
    return now - last > this.idleAfterMs;
  }

  /** At a request's end: the adapter was in use until now. One Map lookup; nothing for other models. */
  requestEnded(model: string): void {
    if (this.lastRequestMs.has(model)) this.lastRequestMs.set(model, this.clock.nowMs());
  }
}
