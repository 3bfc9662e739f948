import type { LoraAdapter } from './options.js';

/**
 * The simulator's LoRA adapters, loaded and unloaded as a multi-adapter vLLM would: every adapter
 * is loaded at start (vLLM loads `--lora-modules` when it starts), one idle for longer than
 * `unloadAfterMs` is unloaded, and a request to an unloaded adapter waits `loadMs` before its
 * prefill. vLLM unloads by use (an LRU of `--max-loras` GPU slots), not by time; an idle time is
 * what stands in for the other adapters' traffic here. A second request arriving while the adapter
 * loads is not delayed: the simulator models the outlier, not the queue behind it.
 */
export class LoraAdapters {
  private readonly lastUsedMs = new Map<string, number>();

  constructor(
    readonly adapters: readonly LoraAdapter[],
    private readonly loadMs: number,
    private readonly unloadAfterMs: number,
    startMs: number,
  ) {
    for (const adapter of adapters) this.lastUsedMs.set(adapter.name, startMs);
  }

  /** The load time a request for `model` waits at `nowMs`: loadMs for an unloaded adapter, else 0. */
  loadDelayMs(model: string, nowMs: number): number {
    const last = this.lastUsedMs.get(model);
    if (last === undefined) return 0;
    const delayMs = nowMs - last > this.unloadAfterMs ? this.loadMs : 0;
    // In use from the end of its load: an adapter loading for a long time is not idle meanwhile.
    this.lastUsedMs.set(model, nowMs + delayMs);
    return delayMs;
  }
}
