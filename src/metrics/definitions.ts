/**
 * Every metric tokentap emits, as data: the recorder creates instruments from this table and the
 * renderers (rules, dashboards) read the same table, so nothing can name a metric, label or bucket
 * that is not emitted (DESIGN.md section 3, STYLE.md habit 6).
 *
 * Names follow the OpenTelemetry GenAI semantic conventions where they exist
 * (https://opentelemetry.io/docs/specs/semconv/gen-ai/gen-ai-metrics/); everything else lives
 * under `tokentap.`. `promName` is the name Prometheus sees. The OTel Prometheus exporter in use
 * does not append unit suffixes, so the exporter layer renames OTel names to these (see
 * telemetry.ts); OTLP keeps the semantic-convention names.
 */

export type MetricKind = 'histogram' | 'counter' | 'updowncounter';

/** Label keys as OpenTelemetry attribute names; Prometheus renders `.` as `_`. */
export const ATTR = {
  workload: 'workload',
  model: 'gen_ai.request.model',
  outcome: 'outcome',
  statusClass: 'http_status_class',
  tokenType: 'gen_ai.token.type',
  tokenSource: 'token_source',
  reason: 'reason',
  slo: 'slo',
  sloResult: 'result',
  limit: 'limit',
  operation: 'operation',
  inFlight: 'in_flight',
  phase: 'phase',
  currency: 'currency',
} as const;

/**
 * The `operation` label of tokentap_requests_total: `generation` for a request on an inference
 * route (the route table's, built-in or configured) or answered with a stream or completion body a
 * tap reads; `other` for the rest (health checks, `/v1/models`, tokenizer endpoints), which are
 * counted there only, never in the latency histograms, token counters or SLO events.
 */
export type Operation = 'generation' | 'other';

export interface MetricDefinition {
  readonly kind: MetricKind;
  /** OpenTelemetry instrument name. */
  readonly otelName: string;
  /** Name in the Prometheus exposition (what dashboards and rules query). */
  readonly promName: string;
  readonly unit: string;
  readonly description: string;
  /** Attribute keys besides `workload` and `gen_ai.request.model`, which every series carries. */
  readonly extraLabels: readonly string[];
  /** Histograms only: default bucket boundaries, before configured SLO thresholds are inserted. */
  readonly defaultBuckets?: readonly number[];
}

/**
 * Default TTFT boundaries: about ten per decade (steps of 1.2-1.33) from 10 ms to 5 s, where
 * servers' TTFT lives, coarse outside it. With the OTel advice list (vLLM's), nearly every sample of
 * a 150 ms server fell in (0.1, 0.2] and histogram_quantile answered about 150 ms whatever the data
 * (issue 14); with these, p50 and p99 of a 40 ms, 150 ms or 1 s server are within 6.8 % of the
 * exact quantiles (test/unit/metrics/default-buckets.test.ts, docs/measurement.md). The common SLO
 * thresholds (0.2, 0.3, 0.5, 1, 2 s) are boundaries; configured ones are inserted (config/load.ts).
 */
const TTFT_BUCKETS = [
  0.001, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.06, 0.075, 0.1, 0.125, 0.15, 0.2, 0.25, 0.3,
  0.35, 0.4, 0.5, 0.6, 0.75, 1, 1.25, 1.5, 2, 2.5, 3, 4, 5, 7.5, 10, 20, 40, 80,
] as const;

/**
 * Default inter-token boundaries: about ten per decade from 2 ms to 100 ms (decode steps of small
 * and large models, speculative decoding), coarse above; the usual ITL budgets (0.05, 0.1 s) are
 * boundaries. p50 and p99 of a 5 ms, 20 ms or 50 ms server are within 4.3 % of the exact quantiles
 * (test/unit/metrics/default-buckets.test.ts).
 */
const ITL_BUCKETS = [
  0.001, 0.002, 0.0025, 0.003, 0.004, 0.005, 0.006, 0.0075, 0.01, 0.0125, 0.015, 0.02, 0.025, 0.03, 0.04,
  0.05, 0.06, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1, 2.5, 5, 10, 20, 40, 80,
] as const;

/** OTel semconv advice for gen_ai.server.time_per_output_token, extended down to 1 ms. */
const TPOT_BUCKETS = [
  0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5,
] as const;

/** OTel semconv advice for gen_ai.server.request.duration, plus round SLO thresholds (1 s, 3 s...). */
const E2E_BUCKETS = [
  0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.5, 0.64, 1, 1.28, 2, 2.56, 3, 5, 5.12, 10, 10.24, 20, 20.48, 30,
  40.96, 60, 81.92, 120, 300,
] as const;

/** OTel semconv advice for gen_ai.client.token.usage. */
const TOKEN_BUCKETS = [
  1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864,
] as const;

/**
 * Accelerator-seconds of one request (docs/capacity-and-cost.md): its processor-sharing share of the
 * pod's time times the accelerator count. A 1-accelerator pod's request lives between a few
 * milliseconds alone and minutes shared by hundreds (a 30 s stream shared by 64 is 0.47 s), and an
 * 8-GPU pod multiplies that by 8: about five per decade (1, 2, 2.5, 5 steps) from 1 ms to 10 min,
 * so p50 and p99 read within a factor of 1.25 to 2 of the truth wherever they fall.
 */
const ACCELERATOR_SECONDS_BUCKETS = [
  0.001, 0.002, 0.005, 0.01, 0.02, 0.025, 0.05, 0.1, 0.2, 0.25, 0.5, 1, 2, 2.5, 5, 10, 20, 25, 50, 100,
  200, 250, 600,
] as const;

/** A share of input from 0 to 1 by tenths; `le="0"` counts the requests with no cached input at all. */
const RATIO_BUCKETS = [0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1] as const;

export const METRICS = {
  /** TTFB: request received by the proxy -> first response body byte. One sample per request with a body. */
  ttfb: {
    kind: 'histogram',
    otelName: 'tokentap.time_to_first_byte',
    promName: 'tokentap_time_to_first_byte_seconds',
    unit: 's',
    description: 'Time from the request reaching the proxy to the first response body byte from the upstream.',
    extraLabels: [],
    defaultBuckets: TTFT_BUCKETS,
  },
  /**
   * TTFT: request received by the proxy -> first content-bearing event (text, reasoning or tool-call
   * delta; not a role-only prelude, empty delta or comment). One sample per streamed request that
   * produced a token. Semconv: gen_ai.server.time_to_first_token.
   */
  ttft: {
    kind: 'histogram',
    otelName: 'gen_ai.server.time_to_first_token',
    promName: 'gen_ai_server_time_to_first_token_seconds',
    unit: 's',
    description: 'Time from the request reaching the proxy to the first content-bearing streamed event.',
    extraLabels: [],
    defaultBuckets: TTFT_BUCKETS,
  },
  /**
   * Time to first answer token: request received by the proxy -> first content-bearing event that
   * is not reasoning (text, refusal or tool-call delta; not `reasoning_content`/`reasoning`,
   * Responses reasoning deltas, Anthropic `thinking_delta` or Ollama `thinking`). One sample per
   * streamed request that produced an answer token; equal to TTFT for a stream without reasoning.
   */
  ttftAnswer: {
    kind: 'histogram',
    otelName: 'tokentap.time_to_first_answer_token',
    promName: 'tokentap_time_to_first_answer_token_seconds',
    unit: 's',
    description: 'Time from the request reaching the proxy to the first streamed answer event (reasoning excluded).',
    extraLabels: [],
    defaultBuckets: TTFT_BUCKETS,
  },
  /**
   * Engine TTFT: the engine's own queue + model load + prefill for the request, each where the
   * engine reports it at the end of the stream (vLLM `metrics.queue_time_ms` +
   * `metrics.time_to_first_token_ms`; llama.cpp `timings.prompt_ms`; Ollama `load_duration` +
   * `prompt_eval_duration`). One sample per request whose engine reported its prefill; none otherwise.
   */
  engineTtft: {
    kind: 'histogram',
    otelName: 'tokentap.engine.time_to_first_token',
    promName: 'tokentap_engine_time_to_first_token_seconds',
    unit: 's',
    description: "The engine's own time to first token (queue + model load + prefill, each where reported), from the timings it put in the stream.",
    extraLabels: [],
    defaultBuckets: TTFT_BUCKETS,
  },
  /**
   * Outside-engine TTFT: wire TTFT (gen_ai.server.time_to_first_token) - engine TTFT, for the same
   * request, when the engine reported its queue time (vLLM): tokenisation, the engine's HTTP
   * server, anything between it and tokentap. One sample per such request; none when the
   * difference is negative (see clock/engine-timings.ts).
   */
  outsideEngineTtft: {
    kind: 'histogram',
    otelName: 'tokentap.outside_engine.time_to_first_token',
    promName: 'tokentap_outside_engine_time_to_first_token_seconds',
    unit: 's',
    description: 'Wire TTFT minus the engine-reported TTFT (queue included) of the same request: time to first token spent outside the engine. Only for engines that report their queue time (vLLM).',
    extraLabels: [],
    defaultBuckets: TTFT_BUCKETS,
  },
  /**
   * The same difference for engines that report no queue time (llama.cpp, Ollama): their engine
   * TTFT is the prefill (and model load) alone, so the rest holds the wait for a free slot as well
   * as everything outside the engine, and under load the wait dominates. Kept apart so that
   * `tokentap_outside_engine_time_to_first_token_seconds` never counts a queue as outside.
   */
  queueOrOutsideEngineTtft: {
    kind: 'histogram',
    otelName: 'tokentap.queue_or_outside_engine.time_to_first_token',
    promName: 'tokentap_queue_or_outside_engine_time_to_first_token_seconds',
    unit: 's',
    description: "Wire TTFT minus the engine-reported TTFT of the same request, for engines that report no queue time (llama.cpp, Ollama): the engine's queue plus everything outside the engine.",
    extraLabels: [],
    defaultBuckets: TTFT_BUCKETS,
  },
  /** The engine's queue time as it reported it (vLLM `metrics.queue_time_ms`). One sample per request that reported it. */
  engineQueue: {
    kind: 'histogram',
    otelName: 'tokentap.engine.queue_time',
    promName: 'tokentap_engine_queue_time_seconds',
    unit: 's',
    description: "The engine's own queue time for the request (vLLM queue_time_ms), from the stream.",
    extraLabels: [],
    defaultBuckets: TTFT_BUCKETS,
  },
  /**
   * The engine's prefill up to its first token as it reported it (vLLM `time_to_first_token_ms`,
   * llama.cpp `prompt_ms`, Ollama `prompt_eval_duration`). One sample per request that reported it.
   */
  enginePrefill: {
    kind: 'histogram',
    otelName: 'tokentap.engine.prefill_time',
    promName: 'tokentap_engine_prefill_time_seconds',
    unit: 's',
    description: "The engine's own prefill time up to its first token (vLLM time_to_first_token_ms, llama.cpp prompt_ms, Ollama prompt_eval_duration), from the stream.",
    extraLabels: [],
    defaultBuckets: TTFT_BUCKETS,
  },
  /**
   * ITL per token: gap between consecutive content events divided by the tokens in the later one;
   * an n-token chunk yields n equal samples.
   */
  itlToken: {
    kind: 'histogram',
    otelName: 'tokentap.inter_token_latency',
    promName: 'tokentap_inter_token_latency_seconds',
    unit: 's',
    description: 'Gap between consecutive content events divided by the tokens in the later event; one sample per token.',
    extraLabels: [],
    defaultBuckets: ITL_BUCKETS,
  },
  /** ITL per chunk: gap between consecutive content events, one sample per event (what the wire shows). */
  itlChunk: {
    kind: 'histogram',
    otelName: 'tokentap.inter_chunk_latency',
    promName: 'tokentap_inter_chunk_latency_seconds',
    unit: 's',
    description: 'Gap between consecutive content events; one sample per event after the first.',
    extraLabels: [],
    defaultBuckets: ITL_BUCKETS,
  },
  /**
   * TPOT: (last token time - first token time) / (output tokens - 1), one sample per streamed request
   * with at least two output tokens. Semconv and vLLM: gen_ai.server.time_per_output_token.
   */
  tpot: {
    kind: 'histogram',
    otelName: 'gen_ai.server.time_per_output_token',
    promName: 'gen_ai_server_time_per_output_token_seconds',
    unit: 's',
    description: 'Time between the first and last token divided by output tokens minus one, per streamed request.',
    extraLabels: [],
    defaultBuckets: TPOT_BUCKETS,
  },
  /** e2e: request received by the proxy -> last byte handed to the client (or the request's end). Every request. */
  e2e: {
    kind: 'histogram',
    otelName: 'gen_ai.server.request.duration',
    promName: 'gen_ai_server_request_duration_seconds',
    unit: 's',
    description: 'Time from the request reaching the proxy to the last response byte written to the client, every request.',
    extraLabels: [ATTR.outcome],
    defaultBuckets: E2E_BUCKETS,
  },
  /**
   * Capacity at SLO: the TTFT sample of gen_ai.server.time_to_first_token (to the first answer
   * token with the workload's `ttft_on: first_answer`) again, by `in_flight`, the band of the
   * sidecar's requests in flight when the request started (metrics/in-flight-band.ts: 1, 2, 3-4,
   * ... 129-256, 257+). The only TTFT series with that label.
   */
  ttftByConcurrency: {
    kind: 'histogram',
    otelName: 'tokentap.time_to_first_token.by_concurrency',
    promName: 'tokentap_time_to_first_token_by_concurrency_seconds',
    unit: 's',
    description: "TTFT (as the workload's SLO measures it) by the band of requests in flight in the sidecar when the request started.",
    extraLabels: [ATTR.inFlight],
    defaultBuckets: TTFT_BUCKETS,
  },
  /**
   * Capacity at SLO: the generation requests of a workload with a TTFT SLO that got no first token
   * and count bad for that SLO (slo/slo-events.ts: the server failed or refused, 429 included, or the
   * client left after the threshold), by `in_flight` as above; 0 added for its other requests, so
   * every band's series exists. A band is judged on them too: a server that sheds load with fast
   * refusals has no slow first token to break a band with.
   */
  ttftFailedByConcurrency: {
    kind: 'counter',
    otelName: 'tokentap.time_to_first_token.failed.by_concurrency',
    promName: 'tokentap_time_to_first_token_failed_by_concurrency_total',
    unit: '{request}',
    description: 'Requests with no first token that count bad for the TTFT SLO (failed, refused, or left after the threshold), by the band of requests in flight in the sidecar when the request started.',
    extraLabels: [ATTR.inFlight],
  },
  /**
   * LoRA adapter cold starts (metrics/adapter-cold-starts.ts): a request to a served adapter (a
   * model whose listing entry names a parent, vLLM) that came after no request to that adapter for
   * `model_discovery.adapter_idle_after`, counted when the request starts. The engine has likely
   * evicted the adapter meanwhile and loads it again before the first token.
   */
  adapterColdStarts: {
    kind: 'counter',
    otelName: 'tokentap.adapter.cold_starts',
    promName: 'tokentap_adapter_cold_starts_total',
    unit: '{request}',
    description: 'Requests to a LoRA adapter after it had no request for model_discovery.adapter_idle_after (its weights likely loaded again first).',
    extraLabels: [],
  },
  /**
   * The TTFT of those cold-start requests alone, the same samples and buckets as
   * gen_ai_server_time_to_first_token_seconds, so subtracting it bucket by bucket leaves the warm
   * requests' TTFT (the adapter-loading outlier excluded).
   */
  adapterColdStartTtft: {
    kind: 'histogram',
    otelName: 'tokentap.adapter.cold_start.time_to_first_token',
    promName: 'tokentap_adapter_cold_start_time_to_first_token_seconds',
    unit: 's',
    description: 'TTFT of the requests counted in tokentap_adapter_cold_starts_total (also counted in the TTFT histogram).',
    extraLabels: [],
    defaultBuckets: TTFT_BUCKETS,
  },
  /** Capacity at SLO: the per-token ITL samples again, by the `in_flight` band at their request's start. */
  itlByConcurrency: {
    kind: 'histogram',
    otelName: 'tokentap.inter_token_latency.by_concurrency',
    promName: 'tokentap_inter_token_latency_by_concurrency_seconds',
    unit: 's',
    description: "Per-token ITL by the band of requests in flight in the sidecar when the token's request started.",
    extraLabels: [ATTR.inFlight],
    defaultBuckets: ITL_BUCKETS,
  },
  /** Tokens per request by type (input/output). Semconv: gen_ai.client.token.usage. */
  tokenUsage: {
    kind: 'histogram',
    otelName: 'gen_ai.client.token.usage',
    promName: 'gen_ai_client_token_usage',
    unit: '{token}',
    description: 'Input and output tokens per request, from the reported usage when present, else counted.',
    extraLabels: [ATTR.tokenType],
    defaultBuckets: TOKEN_BUCKETS,
  },
  /**
   * Accelerator time per request (docs/capacity-and-cost.md): between two events (a request starts
   * or ends) the pod's time is divided equally among the requests in flight
   * (metrics/processor-sharing.ts), and the request's share times the pod's accelerators is added
   * once, at its end: `phase="prefill"` up to its first content event (all of it when it had none),
   * `phase="decode"` the rest. Only with `cost:` configured; generation requests only.
   */
  acceleratorSeconds: {
    kind: 'counter',
    otelName: 'tokentap.accelerator.time',
    promName: 'tokentap_accelerator_seconds_total',
    unit: 's',
    description: "Accelerator-seconds attributed to requests: each request's equal share of the pod's busy time among the requests in flight, times the accelerator count, by phase (prefill up to the first token, decode after it).",
    extraLabels: [ATTR.phase],
  },
  /**
   * The prefill part of tokentap_accelerator_seconds_total of the requests whose server reported
   * their input tokens (zero added for the others): what the input tokens of tokentap_tokens_total
   * were paid with. A request streamed without a usage report has prefill time but no input count;
   * dividing every request's prefill by the reported tokens overstated the cost per input token
   * (two equal requests, one without usage: twice the figure).
   */
  inputTokensAcceleratorSeconds: {
    kind: 'counter',
    otelName: 'tokentap.accelerator.time.reported_input',
    promName: 'tokentap_reported_input_accelerator_seconds_total',
    unit: 's',
    description: 'Prefill accelerator-seconds of the requests whose server reported their input tokens: the cost basis of the input tokens counted in tokentap_tokens_total.',
    extraLabels: [],
  },
  /** The same accelerator-seconds, one sample per request (both phases): times the price / 3600, its cost. */
  requestAcceleratorSeconds: {
    kind: 'histogram',
    otelName: 'tokentap.request.accelerator_time',
    promName: 'tokentap_request_accelerator_seconds',
    unit: 's',
    description: "Accelerator-seconds attributed to each request (its processor-sharing share of the pod's time times the accelerator count); times the price per accelerator-hour / 3600, its cost.",
    extraLabels: [],
    defaultBuckets: ACCELERATOR_SECONDS_BUCKETS,
  },
  /**
   * Prefix-cache hits per request: cached input tokens / input tokens, from the server's usage report
   * (`prompt_tokens_details.cached_tokens`, Anthropic `cache_read_input_tokens`, llama.cpp
   * `timings.cache_n`). One sample per request that reported both, with input > 0.
   */
  cachedInputRatio: {
    kind: 'histogram',
    otelName: 'tokentap.request.cached_input_ratio',
    promName: 'tokentap_request_cached_input_ratio',
    unit: '1',
    description: "Share of each request's input tokens the server served from its prefix cache, as its usage report says; requests that reported both counts.",
    extraLabels: [],
    defaultBuckets: RATIO_BUCKETS,
  },
  /** One per request that reported at least one cached input token. */
  requestsWithCachedInput: {
    kind: 'counter',
    otelName: 'tokentap.requests.with_cached_input',
    promName: 'tokentap_requests_with_cached_input_total',
    unit: '{request}',
    description: 'Requests whose usage report says at least one input token came from the prefix cache.',
    extraLabels: [],
  },
  /** Token totals; `rate()` of it is tokens per second. `token_source` says usage or counted. */
  tokens: {
    kind: 'counter',
    otelName: 'tokentap.tokens',
    promName: 'tokentap_tokens_total',
    unit: '{token}',
    description: 'Input and output tokens, with where the count came from (usage reported by the server, or counted from content events).',
    extraLabels: [ATTR.tokenType, ATTR.tokenSource],
  },
  /**
   * One per finished request, by outcome (completed, client_cancelled, upstream_error, truncated,
   * timeout, shutdown) and operation (generation, other: see Operation). Rules and dashboards count
   * requests per second with `operation!="other"`.
   */
  requests: {
    kind: 'counter',
    otelName: 'tokentap.requests',
    promName: 'tokentap_requests_total',
    unit: '{request}',
    description: 'Finished requests by outcome, HTTP status class and operation (generation, or other: health checks, model listings); the source of requests per second.',
    extraLabels: [ATTR.outcome, ATTR.statusClass, ATTR.operation],
  },
  inFlight: {
    kind: 'updowncounter',
    otelName: 'tokentap.requests.in_flight',
    promName: 'tokentap_requests_in_flight',
    unit: '{request}',
    description: 'Requests received by the proxy and not yet finished.',
    extraLabels: [],
  },
  /**
   * SLO events per workload: `slo` is ttft, itl or e2e, `result` good or bad against the workload's
   * threshold. TTFT and e2e: one event per request; ITL: one per token. Exact for any threshold, and
   * it counts requests abandoned without a first token after waiting longer than the TTFT threshold
   * as bad (DESIGN.md section 2), which the latency histograms cannot.
   */
  sloEvents: {
    kind: 'counter',
    otelName: 'tokentap.slo.events',
    promName: 'tokentap_slo_events_total',
    unit: '{event}',
    description: 'Good and bad events per workload SLO (ttft, itl, e2e) against the configured thresholds.',
    extraLabels: [ATTR.slo, ATTR.sloResult],
  },
  /**
   * Requests of a workload with an ITL SLO that had at least one token over its threshold: every
   * request with an ITL event adds 0 or 1, so the series exists from the first. ITL events are one
   * per token, so one long slow request can hold most of a quiet hour's bad share; the ITL burn
   * alerts need this many distinct slow requests as well (render/burn-rate-alerts.ts).
   */
  itlSlowRequests: {
    kind: 'counter',
    otelName: 'tokentap.slo.itl_slow_requests',
    promName: 'tokentap_slo_itl_slow_requests_total',
    unit: '{request}',
    description: 'Requests of a workload with an ITL SLO that had at least one token slower than its threshold.',
    extraLabels: [],
  },
  /**
   * Goodput: one per finished generation request of a workload with an SLO that met every SLO the
   * workload defines (slo/goodput.ts: completed; TTFT good or not applicable; e2e good; ITL at the
   * workload's `itl_percentile` within the threshold). Every such request adds 0 or 1, so the series
   * exists from the first request and `rate()` is requests per second served within SLO.
   */
  goodput: {
    kind: 'counter',
    otelName: 'tokentap.goodput.requests',
    promName: 'tokentap_goodput_requests_total',
    unit: '{request}',
    description: 'Finished requests that met every SLO of their workload (TTFT, ITL at the configured percentile, e2e); rate() is goodput in requests per second.',
    extraLabels: [],
  },
  /**
   * Streams that carried more tokens (counted from content events: one per delta, or per-chunk
   * usage deltas) than the output tokens the server reported in its usage: a disagreement a healthy
   * stream never shows (TokenTimeline.tokenCountMismatch says why fewer is not one). One per such
   * stream, judged at its end when both exist. Rising means a server whose usage undercounts, a
   * stream with repeated or foreign events, or a tap that misreads.
   */
  tokenCountMismatches: {
    kind: 'counter',
    otelName: 'tokentap.token_count.mismatches',
    promName: 'tokentap_token_count_mismatches_total',
    unit: '{request}',
    description: 'Streams that carried more output tokens (counted from content events) than the usage the server reported.',
    extraLabels: [],
  },
  /**
   * Requests sent a second time, on a fresh upstream connection, because the reused connection they
   * were written on closed before any response byte (the server closed the kept-alive connection as
   * the request crossed it), when that cannot run them twice (src/proxy/exchange.ts retryable()).
   * One per retried request; a request is retried at most once.
   */
  upstreamRetries: {
    kind: 'counter',
    otelName: 'tokentap.upstream.retries',
    promName: 'tokentap_upstream_retries_total',
    unit: '{request}',
    description: 'Requests retried once on a fresh upstream connection after their reused connection closed before any response byte.',
    extraLabels: [],
  },
  /**
   * Upstream connections closed by tokentap after a clean response instead of pooled, by reason:
   * `upstream_closes_after_response` when the pool has learnt that the upstream closes connections
   * right after their response (llama-server does, without `Connection: close`);
   * `upstream_delays_body_on_reuse` when its bodies stall on reused connections (head and body in
   * two writes with Nagle on: src/proxy/upstream-pool.ts).
   */
  upstreamNotReused: {
    kind: 'counter',
    otelName: 'tokentap.upstream.connections.not_reused',
    promName: 'tokentap_upstream_connections_not_reused_total',
    unit: '{connection}',
    description: 'Upstream connections closed after a clean response instead of being kept for the next request, by reason.',
    extraLabels: [ATTR.reason],
  },
  /** A tap that threw: counted, disabled for that request, the stream itself untouched. */
  tapErrors: {
    kind: 'counter',
    otelName: 'tokentap.tap.errors',
    promName: 'tokentap_tap_errors_total',
    unit: '{error}',
    description: 'Observation failures (undecodable event, tap exception); the stream is forwarded regardless.',
    extraLabels: [ATTR.reason],
  },
} as const satisfies Record<string, MetricDefinition>;

export type MetricKey = keyof typeof METRICS;
export type HistogramKey = { [K in MetricKey]: (typeof METRICS)[K]['kind'] extends 'histogram' ? K : never }[MetricKey];

/**
 * Metrics about the pod's GPUs, read from the node-local DCGM exporter when `dcgm.url` is set
 * (src/dcgm/). Unlike METRICS they carry no `workload` or `gen_ai.request.model`: a GPU serves
 * every workload of its pod, and a copy per workload would multiply any sum. Their workload
 * context is the pod itself: Prometheus attaches the sidecar's own target labels (`namespace`,
 * `pod`) to them, the same labels every tokentap series of that pod carries, so they join to the
 * per-workload series `on(namespace, pod)` wherever the exporter's own pod mapping is off. They
 * must never carry `pod` themselves, or Prometheus would rename it `exported_pod`.
 */
export interface GpuMetricDefinition {
  readonly kind: 'gauge' | 'counter';
  readonly otelName: string;
  readonly promName: string;
  readonly unit: string;
  readonly description: string;
  /** Every label the series carries. */
  readonly labels: readonly string[];
}

/** Labels of the GPU gauges; `gpu_instance`, `gpu_profile` only on MIG instances. */
export const GPU_ATTR = {
  gpu: 'gpu',
  uuid: 'uuid',
  gpuInstance: 'gpu_instance',
  gpuProfile: 'gpu_profile',
} as const;

export const GPU_METRICS = {
  /** DCGM_FI_DEV_FB_USED (MiB) x 2^20, per GPU or MIG instance of this pod, as of the last scrape. */
  memoryUsed: {
    kind: 'gauge',
    otelName: 'tokentap.gpu.memory.used',
    promName: 'tokentap_gpu_memory_used_bytes',
    unit: 'By',
    description: 'GPU framebuffer memory in use (DCGM_FI_DEV_FB_USED), per GPU or MIG instance of this pod; absent when unknown.',
    labels: [GPU_ATTR.gpu, GPU_ATTR.uuid, GPU_ATTR.gpuInstance, GPU_ATTR.gpuProfile],
  },
  /** DCGM_FI_DEV_FB_TOTAL when reported, else FB_USED + FB_FREE + FB_RESERVED, in bytes. */
  memoryTotal: {
    kind: 'gauge',
    otelName: 'tokentap.gpu.memory.total',
    promName: 'tokentap_gpu_memory_total_bytes',
    unit: 'By',
    description: 'GPU framebuffer size (DCGM_FI_DEV_FB_TOTAL, else used + free + reserved), per GPU or MIG instance of this pod; absent when unknown.',
    labels: [GPU_ATTR.gpu, GPU_ATTR.uuid, GPU_ATTR.gpuInstance, GPU_ATTR.gpuProfile],
  },
  /** DCGM_FI_DEV_GPU_UTIL / 100; per physical GPU (DCGM does not report it per MIG instance). */
  utilization: {
    kind: 'gauge',
    otelName: 'tokentap.gpu.utilization',
    promName: 'tokentap_gpu_utilization_ratio',
    unit: '1',
    description: 'Share of the last sample period a kernel was running on the GPU (DCGM_FI_DEV_GPU_UTIL / 100); absent when unknown.',
    labels: [GPU_ATTR.gpu, GPU_ATTR.uuid],
  },
  /** One per failed or partly failed DCGM scrape; `reason` as in src/dcgm/dcgm-reader.ts. */
  scrapeErrors: {
    kind: 'counter',
    otelName: 'tokentap.dcgm.scrape.errors',
    promName: 'tokentap_dcgm_scrape_errors_total',
    unit: '{error}',
    description: 'DCGM exporter scrapes that failed (unreachable, timeout, http_status, bad_text, no_match) or found a blank value (sentinel).',
    labels: [ATTR.reason],
  },
} as const satisfies Record<string, GpuMetricDefinition>;

/**
 * The pod's time and price (docs/capacity-and-cost.md). Like GPU_METRICS they carry no workload or
 * model: they are the pod's, and the recording rules spread them over the workloads.
 */
export const POD_METRICS = {
  /** Wall time with at least one request in flight: the sum of every request's share (processor-sharing.ts). Current at each scrape. */
  busy: {
    kind: 'counter',
    otelName: 'tokentap.pod.busy_time',
    promName: 'tokentap_pod_busy_seconds_total',
    unit: 's',
    description: 'Wall time the sidecar had at least one request in flight (the time shared among requests as accelerator time).',
    labels: [],
  },
  /** Wall time with no request in flight; busy + idle is the sidecar's uptime. */
  idle: {
    kind: 'counter',
    otelName: 'tokentap.pod.idle_time',
    promName: 'tokentap_pod_idle_seconds_total',
    unit: 's',
    description: 'Wall time the sidecar had no request in flight; busy + idle is its uptime.',
    labels: [],
  },
  /** `cost.accelerators`, or the GPUs and MIG instances DCGM reports for this pod; only with `cost:`, absent while DCGM has not answered. */
  accelerators: {
    kind: 'gauge',
    otelName: 'tokentap.accelerators',
    promName: 'tokentap_accelerators',
    unit: '{accelerator}',
    description: "The pod's accelerators as the cost configuration counts them (a number, or DCGM's GPUs of this pod).",
    labels: [],
  },
  /** `cost.accelerator_price_per_hour`, labelled with `cost.currency`; only with `cost:`. */
  pricePerHour: {
    kind: 'gauge',
    otelName: 'tokentap.accelerator.price_per_hour',
    promName: 'tokentap_accelerator_price_per_hour',
    unit: '{currency}/h',
    description: 'Configured price of one accelerator for one hour, in the currency of the label.',
    labels: [ATTR.currency],
  },
} as const satisfies Record<string, GpuMetricDefinition>;

/**
 * Metrics about the relay itself, not about one request: like GPU_METRICS they carry no `workload`
 * or model (a connection refused at the limit has neither).
 */
export const RELAY_METRICS = {
  /**
   * One per time a limit of `limits:` tripped (src/proxy/relay-limits.ts, docs/limits.md); `limit`
   * names it (connections, fds, request_head_timeout, request_body_idle_timeout, response_send_timeout, sniffed_body_bytes,
   * rewritten_body_bytes, held_body_bytes, pipelined_requests, min_request_chunk_bytes, interim_responses,
   * interim_response_bytes, log_buffer_bytes; HTTP/2: h2_max_header_list_bytes, h2_client_resets_per_second,
   * and the nghttp2 session bounds h2_continuation_frames, h2_flood, h2_invalid_frames). For
   * log_buffer_bytes, one per log line dropped; otlp_span_queue (OTEL_BSP_MAX_QUEUE_SIZE), one per
   * span dropped at a full span queue; model_listing_bytes and model_listing_timeout, one per model
   * listing refused past 1 MiB or abandoned at model_discovery.timeout (src/discovery/).
   */
  limitExceeded: {
    kind: 'counter',
    otelName: 'tokentap.limit.exceeded',
    promName: 'tokentap_limit_exceeded_total',
    unit: '{event}',
    description: 'Times a relay limit tripped (limits: in the configuration), by limit; log_buffer_bytes counts dropped log lines.',
    labels: [ATTR.limit],
  },
  /**
   * One per request whose reused upstream connection closed before any response byte and that was
   * answered 502 instead of being sent again (src/proxy/exchange.ts retryable()), by `reason`:
   * `request_sent`, a non-idempotent request (POST) the upstream had whole and may have processed;
   * `retry_body_limit`, more than upstream_retry_body_limit bytes had been sent.
   */
  upstreamNotRetried: {
    kind: 'counter',
    otelName: 'tokentap.upstream.requests.not_retried',
    promName: 'tokentap_upstream_requests_not_retried_total',
    unit: '{request}',
    description: 'Requests answered 502 after their reused upstream connection closed before any response byte, not sent again because the upstream may have processed them (request_sent) or they exceeded upstream_retry_body_limit (retry_body_limit).',
    labels: [ATTR.reason],
  },
} as const;

/**
 * tokentap's own health. Like GPU_METRICS they carry no workload or model: they concern the whole
 * sidecar.
 */
export const SELF_METRICS = {
  /** One per failed OTLP export request (the SDK's export callback reported FAILED), by `signal` (metrics, traces). */
  otlpExportFailures: {
    kind: 'counter',
    otelName: 'tokentap.otlp.export.failures',
    promName: 'tokentap_otlp_export_failures_total',
    unit: '{export}',
    description: 'Failed OTLP export requests, by signal (metrics, traces); the collector did not take the batch.',
  },
} as const;

/**
 * What this process is: one series, value 1, in the Prometheus "info" pattern, so a query can join
 * any tokentap series to the build that produced it (`* on(pod) group_left(version) tokentap_build_info`).
 */
export const BUILD_INFO = {
  kind: 'gauge',
  otelName: 'tokentap.build.info',
  promName: 'tokentap_build_info',
  unit: '1',
  description: 'Always 1; the labels say which tokentap build, Node.js and commit this process runs.',
  labels: ['version', 'node_version', 'commit'],
} as const satisfies GpuMetricDefinition;

/**
 * The upstream's health as the last readiness probe (/readyz) found it: 1 when its health endpoint
 * answered below 500, 0 when it failed or did not answer. A model server that is down takes its pod
 * out of the Service through that probe, so no request reaches the sidecar to count as bad: this
 * series is what TokentapUpstreamDown reads instead (src/render/upstream-down-alert.ts). Absent
 * until the first probe.
 */
export const UPSTREAM_READY = {
  kind: 'gauge',
  otelName: 'tokentap.upstream.ready',
  promName: 'tokentap_upstream_ready',
  unit: '1',
  description: "1 when the upstream's health endpoint answered below 500 at the last readiness probe (/readyz), 0 when it failed or did not answer.",
  labels: [],
} as const satisfies GpuMetricDefinition;

/**
 * Which base model each served model and LoRA adapter runs on, as the upstream's model listing says
 * (vLLM's `/v1/models` `parent`; a base model is its own base): one series per model label value,
 * value 1, in the info pattern, so a query groups any request series by base model
 * (`* on(namespace, pod, gen_ai_request_model) group_left(base_model) tokentap_model_info`).
 */
export const MODEL_INFO = {
  kind: 'gauge',
  otelName: 'tokentap.model.info',
  promName: 'tokentap_model_info',
  unit: '1',
  description: 'Always 1; base_model is the base model the upstream lists for this model label (itself for a base model, other when the listing cannot say).',
  labels: [ATTR.model, 'base_model'],
} as const satisfies GpuMetricDefinition;

/** Metrics of the workload-shape record (src/profile/, docs/workload-profiles.md), per workload. */
export const PROFILE_METRICS = {
  /**
   * One per finished request dropped from its workload's record to make room for a newer one
   * (profiles.max_requests_per_workload, or its block hashes' share): a window longer than the
   * record reaches is answered over what is held, and says so in its `window.startUnixMs`.
   */
  requestsEvicted: {
    kind: 'counter',
    otelName: 'tokentap.profile.requests.evicted',
    promName: 'tokentap_profile_requests_evicted_total',
    unit: '{request}',
    description: 'Finished requests dropped from the workload-shape record to make room (profiles.max_requests_per_workload), by workload.',
    labels: [ATTR.workload],
  },
} as const satisfies Record<string, GpuMetricDefinition>;
