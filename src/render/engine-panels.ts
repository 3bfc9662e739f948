import * as dashboard from '@grafana/grafana-foundation-sdk/dashboard';
import type { Workload } from '../config/load.js';
import { timeSeriesPanel, type Placement, type Query } from './dashboard-panels.js';
import { forSelectedWorkloads } from './dashboard-queries.js';
import type { SloLinks } from './dashboard-runbook-links.js';
import { thresholds } from './dashboard-slo-constants.js';
import { WORKLOAD_VARIABLE } from './dashboard-variables.js';
import * as e from './engine-queries.js';
import { NAMESPACE_LABEL } from './promql.js';

/**
 * Per selected workload, the row that tells the causes of a slow or burning SLO apart
 * (docs/engine-timings.md): goodput beside RPS, where the TTFT goes (engine queue, prefill, outside
 * the engine), TTFT and ITL p99 against the requests in flight (capacity at SLO), and the engine's
 * own series (running and waiting requests, KV cache, preemptions, prefix cache, its queue and
 * prefill time). The GPU rows after the workloads show the same pods' DCGM panels.
 */
export const ENGINE_ROW_TITLE = (name: string): string => `Workload ${name}: where the time goes (goodput, TTFT split, capacity, engine)`;

/** Titles of the panels, for the runbooks and alert descriptions that point at them. */
export const ENGINE_PANEL = {
  goodput: (name: string) => `${name}: requests per second and goodput`,
  ttftSplit: (name: string) => `${name}: where TTFT goes`,
  ttftByInFlight: (name: string) => `${name}: TTFT p99 by requests in flight`,
  itlByInFlight: (name: string) => `${name}: ITL p99 by requests in flight`,
  engineRequests: (name: string) => `${name}: engine running and waiting requests`,
  kvCache: (name: string) => `${name}: engine KV cache usage`,
  preemptions: (name: string) => `${name}: engine preemptions per second`,
  prefixCache: (name: string) => `${name}: engine prefix cache hit rate`,
  engineQueuePrefill: (name: string) => `${name}: engine queue and prefill time (engine's own histograms)`,
} as const;

const NS = `{{${NAMESPACE_LABEL}}}`;

/** Shown by the engine panels without series: their data come from the engine container's own /metrics. */
const NO_ENGINE_DATA = "No data: is the engine container scraped (with the pod's namespace and pod labels)?";

/**
 * The row of the workload in `$workload`, collapsed; the dashboard repeats it per selected workload
 * (`repeat: workload`), so every panel reads the variable and the budget lines come from the
 * per-workload constants of the configuration (dashboard-slo-constants.ts).
 */
export function engineRow(workloads: readonly Workload[], at: (width: number, height?: number) => Placement, links: SloLinks, native = false): dashboard.RowBuilder {
  const name = `$${WORKLOAD_VARIABLE}`;
  const row = new dashboard.RowBuilder(ENGINE_ROW_TITLE(name)).id(at(24).id).repeat(WORKLOAD_VARIABLE).collapsed(true);
  const budgetLine = (kind: 'ttft' | 'itl'): Query[] => {
    const constants = thresholds(workloads, kind);
    return constants === undefined ? [] : [{ expr: forSelectedWorkloads(constants), legend: `${kind === 'ttft' ? 'TTFT' : 'ITL'} budget` }];
  };
  row.withPanel(
    timeSeriesPanel(
      {
        title: ENGINE_PANEL.goodput(name),
        description:
          'Generation requests per second of the workload, and goodput: those that completed and met every SLO of the workload (TTFT, e2e, and ITL at its itl_percentile over the request\'s tokens) (tokentap_goodput_requests_total). The gap between the lines is traffic served out of SLO. A workload without an SLO has no goodput line.',
        unit: 'reqps',
        min: 0,
        queries: [
          { expr: e.requestsPerSecond(), legend: `requests ${NS}` },
          { expr: e.goodputPerSecond(), legend: `goodput ${NS}` },
        ],
      },
      at(8),
    ),
  );
  row.withPanel(
    timeSeriesPanel(
      {
        title: ENGINE_PANEL.ttftSplit(name),
        description:
          "Mean per request of the wire TTFT and its parts, as the engine reported them in its stream: engine queue (vLLM), engine prefill (vLLM, llama.cpp, Ollama), outside the engine (wire TTFT - engine TTFT, for engines that report their queue: tokenisation, the engine's HTTP server, the path to the sidecar) and queue or outside (the same remainder for llama.cpp and Ollama, which report no queue time: it holds the wait for a free slot, so read it beside the engine's waiting requests). A high queue means the engine is saturated (see in-flight and waiting), a high prefill long prompts or a cold prefix cache, a high outside share a problem outside the GPU. Empty parts: the engine does not report them (vLLM needs --enable-per-request-metrics).",
        unit: 's',
        min: 0,
        links: links.ttft,
        queries: [
          { expr: e.meanPerRequest('ttft', native), legend: `wire TTFT ${NS}` },
          { expr: e.meanPerRequest('engineQueue', native), legend: `engine queue ${NS}` },
          { expr: e.meanPerRequest('enginePrefill', native), legend: `engine prefill ${NS}` },
          { expr: e.meanPerRequest('outsideEngineTtft', native), legend: `outside the engine ${NS}` },
          { expr: e.meanPerRequest('queueOrOutsideEngineTtft', native), legend: `queue or outside the engine ${NS}` },
        ],
      },
      at(8),
    ),
  );
  const capacityNote =
    ' By the band of requests in flight in the sidecar (the pod) when each request started. The highest band still under the dashed budget line (the workload\'s threshold) is the concurrency one pod sustains within SLO; widen the time range so every band has samples (docs/engine-timings.md, "Capacity at SLO").';
  row.withPanel(
    timeSeriesPanel(
      {
        title: ENGINE_PANEL.ttftByInFlight(name),
        description: `p99 TTFT (as the SLO measures it) per in-flight band.${capacityNote}`,
        unit: 's',
        min: 0,
        links: links.ttft,
        queries: [{ expr: e.quantileByInFlight(0.99, 'ttftByConcurrency', native), legend: `{{in_flight}} in flight ${NS}` }],
        budgetQueries: budgetLine('ttft'),
      },
      at(4),
    ),
  );
  row.withPanel(
    timeSeriesPanel(
      {
        title: ENGINE_PANEL.itlByInFlight(name),
        description: `p99 per-token ITL per in-flight band.${capacityNote}`,
        unit: 's',
        min: 0,
        links: links.itl,
        queries: [{ expr: e.quantileByInFlight(0.99, 'itlByConcurrency', native), legend: `{{in_flight}} in flight ${NS}` }],
        budgetQueries: budgetLine('itl'),
      },
      at(4),
    ),
  );
  const engineNote = " The engine's own /metrics (vLLM, SGLang, TGI or llama.cpp, whichever the pod exports), for the pods that served the workload.";
  row.withPanel(
    timeSeriesPanel(
      {
        title: ENGINE_PANEL.engineRequests(name),
        description: `Requests in the engine's running batch and waiting in its queue, per pod: waiting above zero means TTFT now includes queueing.${engineNote}`,
        unit: 'short',
        min: 0,
        noData: NO_ENGINE_DATA,
        queries: [
          { expr: e.engineRunning(), legend: `running {{pod}} ${NS}` },
          { expr: e.engineWaiting(), legend: `waiting {{pod}} ${NS}` },
        ],
      },
      at(6),
    ),
  );
  row.withPanel(
    timeSeriesPanel(
      {
        title: ENGINE_PANEL.kvCache(name),
        description: `Share of the KV cache in use, per pod; near 1 the engine preempts or queues.${engineNote}`,
        unit: 'percentunit',
        min: 0,
        noData: NO_ENGINE_DATA,
        queries: [{ expr: e.engineKvCacheUsage(), legend: `{{pod}} ${NS}` }],
      },
      at(6),
    ),
  );
  row.withPanel(
    timeSeriesPanel(
      {
        title: ENGINE_PANEL.preemptions(name),
        description: `vLLM preemptions per second (vllm:num_preemptions_total), per pod: requests evicted for KV-cache memory, which stalls their tokens (ITL) and recomputes their prefill.${engineNote}`,
        unit: 'short',
        min: 0,
        noData: NO_ENGINE_DATA,
        queries: [{ expr: e.enginePreemptionsPerSecond(), legend: `{{pod}} ${NS}` }],
      },
      at(6),
    ),
  );
  row.withPanel(
    timeSeriesPanel(
      {
        title: ENGINE_PANEL.prefixCache(name),
        description: `Share of prompt tokens served from the prefix cache (vLLM prefix_cache_hits / prefix_cache_queries, SGLang cache_hit_rate), per pod; a drop raises prefill time.${engineNote}`,
        unit: 'percentunit',
        min: 0,
        noData: NO_ENGINE_DATA,
        queries: [{ expr: e.enginePrefixCacheHitRate(), legend: `{{pod}} ${NS}` }],
      },
      at(6),
    ),
  );
  row.withPanel(
    timeSeriesPanel(
      {
        title: ENGINE_PANEL.engineQueuePrefill(name),
        description: `Mean queue and prefill time per request from vLLM's own histograms (vllm:request_queue_time_seconds, vllm:request_prefill_time_seconds), per pod, all workloads of the pod together; compare with "where TTFT goes", which is per request of the workload.${engineNote}`,
        unit: 's',
        min: 0,
        noData: NO_ENGINE_DATA,
        queries: [
          { expr: e.engineHistogramMean('vllm:request_queue_time_seconds'), legend: `queue {{pod}} ${NS}` },
          { expr: e.engineHistogramMean('vllm:request_prefill_time_seconds'), legend: `prefill {{pod}} ${NS}` },
        ],
      },
      at(24),
    ),
  );
  return row;
}

/**
 * For the alert descriptions: the panels of the workload's "where the time goes" row that tell the
 * causes of a burning TTFT, ITL or e2e SLO apart. Plain text without quotes, so it sits in any
 * YAML scalar of the rendered rules and their promtool tests.
 */
export function causesHint(workload: string, slo: 'ttft' | 'itl' | 'e2e'): string {
  const row = `To tell the causes apart, see the dashboard row where the time goes of ${workload}:`;
  switch (slo) {
    case 'ttft':
      return `${row} where TTFT goes (engine queue, engine prefill, outside the engine, or queue or outside it where the engine reports no queue), engine running and waiting requests, TTFT p99 by requests in flight (capacity).`;
    case 'itl':
      return `${row} ITL p99 by requests in flight (capacity), engine preemptions and KV cache usage (memory pressure).`;
    case 'e2e':
      return `${row} requests per second and goodput, where TTFT goes, engine running and waiting requests.`;
  }
}
