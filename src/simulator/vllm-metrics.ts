/**
 * The simulator's `GET /metrics`: a vLLM-format Prometheus exposition (text format 0.0.4) with the
 * engine series the dashboards' engine rows read, under vLLM's real names, help texts and label set
 * (`engine`, `model_name`), as a vLLM V1 server exposes them
 * (test/fixtures/streams/vllm/server-metrics.prom; vllm/v1/metrics/loggers.py):
 * - `vllm:num_requests_running`: generations in progress; `vllm:num_requests_waiting`: 0, the
 *   simulator has no queue;
 * - `vllm:kv_cache_usage_perc`: running / 256 (vLLM's default `max_num_seqs`), capped at 1;
 * - `vllm:num_preemptions_total`: 0, it never preempts;
 * - `vllm:prefix_cache_queries_total`: prompt tokens of every request; `vllm:prefix_cache_hits_total`:
 *   none of them (no prefix cache);
 * - `vllm:request_queue_time_seconds`, `vllm:request_prefill_time_seconds`: one sample per finished
 *   generation, the queue and prefill the request was told to report (`engineQueueMs`,
 *   `enginePrefillMs`; `measured` prefill is its TTFT less the queue), with vLLM's
 *   request-latency buckets.
 */

/** vLLM's request_latency_buckets (seconds). */
const LATENCY_BUCKETS = [0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0] as const;
const MAX_NUM_SEQS = 256;

/** A number as Python's repr of a float writes it: `4.0`, `0.25`. */
function float(value: number): string {
  return Number.isInteger(value) ? value.toFixed(1) : String(value);
}

class LatencyHistogram {
  private readonly counts = new Array<number>(LATENCY_BUCKETS.length).fill(0);
  private total = 0;
  private sum = 0;

  observe(seconds: number): void {
    for (let i = 0; i < LATENCY_BUCKETS.length; i++) {
      if (seconds <= (LATENCY_BUCKETS[i] as number)) this.counts[i] = (this.counts[i] as number) + 1;
    }
    this.total += 1;
    this.sum += seconds;
  }

  lines(name: string, labels: string): string[] {
    // Python's prometheus_client writes labels in sorted order (engine, le, model_name) and floats as floats.
    const bucket = (le: string, count: number): string => `${name}_bucket{${labels.replace(',model_name', `,le="${le}",model_name`)}} ${float(count)}`;
    const out = LATENCY_BUCKETS.map((le, i) => bucket(float(le), this.counts[i] as number));
    out.push(bucket('+Inf', this.total), `${name}_count{${labels}} ${float(this.total)}`, `${name}_sum{${labels}} ${float(this.sum)}`);
    return out;
  }
}

export class VllmServerMetrics {
  private running = 0;
  private promptTokens = 0;
  private readonly queueTime = new LatencyHistogram();
  private readonly prefillTime = new LatencyHistogram();
  private readonly labels: string;

  constructor(model: string) {
    // Label values escaped as the exposition format requires (backslash, quote, newline).
    this.labels = `engine="0",model_name="${model.replace(/[\\"]/g, '\\$&').replace(/\n/g, '\\n')}"`;
  }

  started(promptTokens: number): void {
    this.running += 1;
    this.promptTokens += promptTokens;
  }

  finished(queueMs: number, prefillMs: number): void {
    this.running -= 1;
    this.queueTime.observe(queueMs / 1000);
    this.prefillTime.observe(prefillMs / 1000);
  }

  text(): string {
    const l = this.labels;
    const gauge = (name: string, help: string, value: number): string[] => [`# HELP ${name} ${help}`, `# TYPE ${name} gauge`, `${name}{${l}} ${float(value)}`];
    const counter = (name: string, help: string, value: number): string[] => [`# HELP ${name} ${help}`, `# TYPE ${name} counter`, `${name}{${l}} ${float(value)}`];
    const histogram = (name: string, help: string, h: LatencyHistogram): string[] => [`# HELP ${name} ${help}`, `# TYPE ${name} histogram`, ...h.lines(name, l)];
    return `${[
      ...gauge('vllm:num_requests_running', 'Number of requests in model execution batches.', this.running),
      ...gauge('vllm:num_requests_waiting', 'Number of requests waiting to be processed.', 0),
      ...gauge('vllm:kv_cache_usage_perc', 'KV-cache usage. 1 means 100 percent usage.', Math.min(1, this.running / MAX_NUM_SEQS)),
      ...counter('vllm:prefix_cache_queries_total', 'Prefix cache queries, in terms of number of queried tokens.', this.promptTokens),
      ...counter('vllm:prefix_cache_hits_total', 'Prefix cache hits, in terms of number of cached tokens.', 0),
      ...counter('vllm:num_preemptions_total', 'Cumulative number of preemption from the engine.', 0),
      ...histogram('vllm:request_queue_time_seconds', 'Histogram of time spent in WAITING phase for request.', this.queueTime),
      ...histogram('vllm:request_prefill_time_seconds', 'Histogram of time spent in PREFILL phase for request.', this.prefillTime),
    ].join('\n')}\n`;
  }
}
