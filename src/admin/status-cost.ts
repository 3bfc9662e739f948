import type { CostSettings, Workload } from '../config/load.js';
import type { PodCounts, WorkloadCounts } from './status-counts.js';

/**
 * Cost of this pod's requests over the status page's SLO window (docs/capacity-and-cost.md
 * "Accelerator time and cost"), from the differences of the sidecar's own counters between two
 * collections: the definitions of the cost recording rules (render/cost-rules.ts) over one pod, the
 * window's increases in place of their rates (the rates' common window length cancels in every
 * ratio). Every figure the page cannot give comes with the reason, in `absent`.
 */

export type CostBasis = 'usage' | 'allocation';

/** One basis's figures, in the configured currency. */
export interface BasisCost {
  /** The window's cost. */
  readonly cost: number | null;
  /** Cost / finished generation requests (every outcome). */
  readonly per_request: number | null;
  /** The prefill part of the cost, of the requests that reported their input tokens, x 10^6 / input tokens. */
  readonly per_million_input_tokens: number | null;
  /** The decode part of the cost x 10^6 / output tokens. */
  readonly per_million_output_tokens: number | null;
  /** The whole cost / requests that met every SLO (goodput). */
  readonly per_good_request: number | null;
}

export type CostField = keyof BasisCost | 'requests_with_cached_input_ratio' | 'mean_cached_input_ratio';

export interface CostFigures {
  /** Finished generation requests in the window. */
  readonly requests: number;
  readonly input_tokens: number;
  readonly output_tokens: number;
  /** Accelerator-seconds attributed to the requests that ended in the window (0 without `cost:`). */
  readonly accelerator_seconds: number;
  readonly usage: BasisCost;
  readonly allocation: BasisCost;
  /** Requests with at least one cached input token / requests that reported their cached input. */
  readonly requests_with_cached_input_ratio: number | null;
  /** Mean of cached input tokens / input tokens over those requests. */
  readonly mean_cached_input_ratio: number | null;
  /** Why a figure is null, by field name; for a basis's figure, by `usage.per_request` and the like. */
  readonly absent: Partial<Record<string, string>>;
}

export interface WorkloadCost extends CostFigures {
  readonly name: string;
}

export interface CostStatus {
  /** Whether `cost:` is configured; without it every money figure is null with the reason "no cost: configured". */
  readonly configured: boolean;
  readonly currency: string | null;
  readonly price_per_hour: number | null;
  /** The accelerator count in use (`tokentap_accelerators`); null without `cost:` or while DCGM has not answered. */
  readonly accelerators: number | null;
  /** The window the figures are over (the status page's SLO window). */
  readonly window_s: number;
  /** Busy seconds / (busy + idle seconds) over the window; null when no time passed. */
  readonly busy_ratio: number | null;
  readonly absent: Partial<Record<'busy_ratio', string>>;
  /** Every workload together. */
  readonly pod: CostFigures;
  /** Every configured workload, in configuration order. */
  readonly workloads: readonly WorkloadCost[];
}

export interface CostInputs {
  readonly cost: CostSettings | undefined;
  readonly workloads: readonly Workload[];
  readonly windowS: number;
  readonly now: { readonly pod: PodCounts | undefined; readonly workload: (name: string) => WorkloadCounts };
  readonly base: { readonly pod: PodCounts | undefined; readonly workload: (name: string) => WorkloadCounts };
}

/** The window's increases of one workload's (or every workload's) counters. */
interface Increase {
  readonly generations: number;
  readonly goodput: number;
  readonly inputTokens: number;
  readonly outputTokens: number;
  readonly prefillS: number;
  readonly decodeS: number;
  /** The prefill of the requests that reported their input tokens: what `inputTokens` were paid with. */
  readonly reportedInputS: number;
  readonly cachedRatioSum: number;
  readonly cachedRatioCount: number;
  readonly withCachedInput: number;
  /** Whether the workload has an SLO: without one, no request "met its SLOs". */
  readonly hasSlo: boolean;
}

function sumOf(values: Iterable<number>): number {
  let total = 0;
  for (const v of values) total += v;
  return total;
}

function increaseOf(now: WorkloadCounts, base: WorkloadCounts, hasSlo: boolean): Increase {
  return {
    generations: sumOf(now.generations.values()) - sumOf(base.generations.values()),
    goodput: now.goodput - base.goodput,
    inputTokens: now.inputTokens - base.inputTokens,
    outputTokens: now.outputTokens - base.outputTokens,
    prefillS: now.prefillAcceleratorS - base.prefillAcceleratorS,
    decodeS: now.decodeAcceleratorS - base.decodeAcceleratorS,
    reportedInputS: now.reportedInputAcceleratorS - base.reportedInputAcceleratorS,
    cachedRatioSum: now.cachedRatioSum - base.cachedRatioSum,
    cachedRatioCount: now.cachedRatioCount - base.cachedRatioCount,
    withCachedInput: now.withCachedInput - base.withCachedInput,
    hasSlo,
  };
}

function addIncreases(all: readonly Increase[]): Increase {
  const total = (key: Exclude<keyof Increase, 'hasSlo'>) => sumOf(all.map((i) => i[key]));
  return {
    generations: total('generations'),
    goodput: total('goodput'),
    inputTokens: total('inputTokens'),
    outputTokens: total('outputTokens'),
    prefillS: total('prefillS'),
    decodeS: total('decodeS'),
    reportedInputS: total('reportedInputS'),
    cachedRatioSum: total('cachedRatioSum'),
    cachedRatioCount: total('cachedRatioCount'),
    withCachedInput: total('withCachedInput'),
    hasSlo: all.some((i) => i.hasSlo),
  };
}

const NO_INPUT_REPORTS = 'no request in the window reported its input tokens: ask the server for usage, e.g. inject_usage: true';

/** The pod's price and time over the window, or why there is no price. */
type Pricing = { readonly perAcceleratorS: number; readonly wallAcceleratorS: number; readonly podAcceleratorS: number } | { readonly reason: string };

/** A basis's figures from its window cost (null with `costReason`), the increase's denominators and phase shares. */
function basisCost(basis: CostBasis, cost: number | null, costReason: string | undefined, inc: Increase, absent: Record<string, string>): BasisCost {
  const acceleratorS = inc.prefillS + inc.decodeS;
  const ratio = (field: keyof BasisCost, numerator: number | null, denominator: number, whyZero: string, scale = 1): number | null => {
    const key = `${basis}.${field}`;
    if (numerator === null) absent[key] = costReason as string;
    else if (denominator <= 0) absent[key] = whyZero;
    else return (numerator * scale) / denominator;
    return null;
  };
  const phasePart = (seconds: number): number | null => (cost === null || acceleratorS <= 0 ? null : (cost * seconds) / acceleratorS);
  const noAcceleratorTime = 'no accelerator-seconds in the window to split the cost into prefill and decode';
  if (cost === null) absent[`${basis}.cost`] = costReason as string;
  // Input tokens pay for the prefill of the requests that reported them: a request without a usage
  // report has prefill time but no input count, and its time over the others' tokens would inflate it.
  const perInput = cost !== null && acceleratorS <= 0 ? ((absent[`${basis}.per_million_input_tokens`] = noAcceleratorTime), null) : ratio('per_million_input_tokens', phasePart(inc.reportedInputS), inc.inputTokens, NO_INPUT_REPORTS, 1e6);
  const perOutput = cost !== null && acceleratorS <= 0 ? ((absent[`${basis}.per_million_output_tokens`] = noAcceleratorTime), null) : ratio('per_million_output_tokens', phasePart(inc.decodeS), inc.outputTokens, 'no output tokens in the window', 1e6);
  return {
    cost,
    per_request: ratio('per_request', cost, inc.generations, 'no finished generation request in the window'),
    per_million_input_tokens: perInput,
    per_million_output_tokens: perOutput,
    per_good_request: inc.hasSlo ? ratio('per_good_request', cost, inc.goodput, 'no request met its SLOs in the window') : ((absent[`${basis}.per_good_request`] = 'no SLO: set slo: on the workload'), null),
  };
}

function costFigures(inc: Increase, pricing: Pricing, podShare: number | null): CostFigures {
  const absent: Record<string, string> = {};
  const acceleratorS = inc.prefillS + inc.decodeS;
  let usage: number | null = null;
  let allocation: number | null = null;
  let usageReason: string | undefined;
  let allocationReason: string | undefined;
  if ('reason' in pricing) usageReason = allocationReason = pricing.reason;
  else {
    usage = acceleratorS * pricing.perAcceleratorS;
    // Allocation: the pod's whole wall time at its accelerators and price, spread by the workloads' accelerator-seconds.
    if (pricing.podAcceleratorS <= 0) allocationReason = 'no accelerator-seconds in the window to spread the pod\u2019s time by';
    else allocation = (podShare ?? acceleratorS / pricing.podAcceleratorS) * pricing.wallAcceleratorS * pricing.perAcceleratorS;
  }
  const noReports = 'no request in the window reported its cached input tokens';
  if (inc.cachedRatioCount <= 0) absent.requests_with_cached_input_ratio = absent.mean_cached_input_ratio = noReports;
  return {
    requests: inc.generations,
    input_tokens: inc.inputTokens,
    output_tokens: inc.outputTokens,
    accelerator_seconds: acceleratorS,
    usage: basisCost('usage', usage, usageReason, inc, absent),
    allocation: basisCost('allocation', allocation, allocationReason, inc, absent),
    requests_with_cached_input_ratio: inc.cachedRatioCount > 0 ? inc.withCachedInput / inc.cachedRatioCount : null,
    mean_cached_input_ratio: inc.cachedRatioCount > 0 ? inc.cachedRatioSum / inc.cachedRatioCount : null,
    absent,
  };
}

export function costStatus(inputs: CostInputs): CostStatus {
  const { now, base } = inputs;
  const busyS = (now.pod?.busyS ?? 0) - (base.pod?.busyS ?? 0);
  const idleS = (now.pod?.idleS ?? 0) - (base.pod?.idleS ?? 0);
  const increases = inputs.workloads.map((w) => increaseOf(now.workload(w.name), base.workload(w.name), w.slo !== undefined));
  const total = addIncreases(increases);
  const podAcceleratorS = total.prefillS + total.decodeS;
  const accelerators = now.pod?.accelerators;
  const price = now.pod?.pricePerHour;
  let pricing: Pricing;
  if (inputs.cost === undefined) pricing = { reason: 'no cost: configured' };
  else if (accelerators === undefined) pricing = { reason: 'the accelerator count is not known yet: DCGM has not answered (cost.accelerators: dcgm)' };
  else if (price === undefined) pricing = { reason: 'no price exported yet' };
  else pricing = { perAcceleratorS: price / 3600, wallAcceleratorS: (busyS + idleS) * accelerators, podAcceleratorS };
  return {
    configured: inputs.cost !== undefined,
    currency: now.pod?.currency ?? inputs.cost?.currency ?? null,
    price_per_hour: price ?? null,
    accelerators: accelerators ?? null,
    window_s: inputs.windowS,
    busy_ratio: busyS + idleS > 0 ? busyS / (busyS + idleS) : null,
    absent: busyS + idleS > 0 ? {} : { busy_ratio: 'no time in the window yet' },
    // The pod's allocation is its whole wall time when any request was attributed time.
    pod: costFigures(total, pricing, 1),
    workloads: inputs.workloads.map((w, i) => ({ name: w.name, ...costFigures(increases[i] as Increase, pricing, null) })),
  };
}
