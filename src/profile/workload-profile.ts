/**
 * A workload's fitted shape over a window (docs/workload-profiles.md): numbers only, never text.
 * The JSON that `GET /profile/<workload>?format=json` (admin listener) returns, and what
 * `tokentap profile compare` reads for the live side.
 */

/** A fitted standard distribution; `ks` is the Kolmogorov-Smirnov distance of the fit to the sample (smaller is better). */
export interface DistributionFit {
  readonly family: 'lognormal' | 'gamma' | 'normal' | 'exponential';
  /** lognormal: mu, sigma (of the log); gamma: shape, scale; normal: mean, stdev; exponential: rate. */
  readonly params: Readonly<Record<string, number>>;
  readonly ks: number;
}

/** Summary of one sample of whole numbers (token counts); every figure is undefined when `count` is 0. */
export interface Distribution {
  readonly count: number;
  readonly mean?: number;
  readonly stdev?: number;
  readonly min?: number;
  readonly max?: number;
  readonly p50?: number;
  readonly p90?: number;
  readonly p99?: number;
  /** The best of the fits tried (lowest ks); undefined with fewer samples than a fit needs. */
  readonly fit?: DistributionFit;
}

export interface WorkloadProfile {
  readonly workload: string;
  readonly window: { readonly startUnixMs: number; readonly endUnixMs: number; readonly seconds: number };
  /** Requests in the window (every outcome); the length distributions use only those with reported usage. */
  readonly requests: number;
  readonly inputTokens: Distribution;
  readonly outputTokens: Distribution;
  readonly arrivals: {
    readonly ratePerSecond: number;
    /** Coefficient of variation of inter-arrival times (1 for Poisson); undefined with fewer than 3 arrivals. */
    readonly interArrivalCv?: number;
    /** The gamma shape matching that burstiness: 1 / cv^2 (AIPerf's arrival smoothness). */
    readonly gammaShape?: number;
  };
  readonly concurrency: { readonly mean: number; readonly max: number };
  /** Share of requests whose server reported any cached input tokens, of those that reported the figure; undefined when none did. */
  readonly cachedInputShare?: number;
  readonly prefixSharing: {
    /** Tokens per fingerprint block (the hash-id block size of the Mooncake export). */
    readonly blockTokens: number;
    /** Share of requests whose first block's hash id is shared with another request in the window. */
    readonly sharedPrefixShare: number;
    /** Mean share of a request's blocks that some earlier request in the window also had. */
    readonly sharedBlockShare: number;
  };
  readonly outcomes: Readonly<Record<string, number>>;
}

/** Every workload's profile over one window, with the workload mix (share of requests per workload). */
export interface ProfileSet {
  readonly window: WorkloadProfile['window'];
  readonly mix: Readonly<Record<string, number>>;
  readonly workloads: readonly WorkloadProfile[];
}
