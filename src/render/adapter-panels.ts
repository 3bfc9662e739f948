import * as dashboard from '@grafana/grafana-foundation-sdk/dashboard';
import { timeSeriesPanel, type Placement } from './dashboard-panels.js';
import * as a from './adapter-queries.js';
import { NAMESPACE_LABEL } from './promql.js';

/**
 * The LoRA adapter row (docs/model-discovery.md#lora-adapters): latency and traffic grouped by the
 * base model each adapter runs on (tokentap_model_info), TTFT with and without the adapter cold
 * starts, and how often an adapter is requested after idle. Not repeated per workload: a base
 * model's load is every workload's. Collapsed, like the rows after the first.
 */
export const ADAPTER_ROW_TITLE = 'LoRA adapters and base models (selected workloads)';

const NS = `{{${NAMESPACE_LABEL}}}`;
const NO_ADAPTER_DATA = "No data: are the sidecars scraped with model discovery on, and does the upstream's /v1/models list adapters with a parent (vLLM)?";

export function adapterRow(at: (width: number, height?: number) => Placement): dashboard.RowBuilder {
  const row = new dashboard.RowBuilder(ADAPTER_ROW_TITLE).id(at(24).id).collapsed(true);
  row.withPanel(
    timeSeriesPanel(
      {
        title: 'TTFT p99 by base model, with and without adapter cold starts',
        description:
          'TTFT p99 of the requests to each base model and its LoRA adapters together (base_model from tokentap_model_info, as the upstream lists each adapter\'s parent), per namespace; ' +
          '"warm" leaves out the requests counted as adapter cold starts (tokentap_adapter_cold_start_time_to_first_token_seconds), the outlier of an adapter loaded again after idle. ' +
          'Requests labelled other or unknown have no base model and are not shown.',
        unit: 's',
        min: 0,
        noData: NO_ADAPTER_DATA,
        queries: [
          { expr: a.ttftQuantileByBaseModel(0.99), legend: `{{${a.BASE_MODEL}}} all ${NS}` },
          { expr: a.warmTtftQuantileByBaseModel(0.99), legend: `{{${a.BASE_MODEL}}} warm ${NS}` },
        ],
      },
      at(12),
    ),
  );
  row.withPanel(
    timeSeriesPanel(
      {
        title: 'Requests per second by base model',
        description: 'Generation requests per second to each base model and its LoRA adapters together, per namespace: the load each set of base weights carries.',
        unit: 'reqps',
        min: 0,
        noData: NO_ADAPTER_DATA,
        queries: [{ expr: a.requestsPerSecondByBaseModel(), legend: `{{${a.BASE_MODEL}}} ${NS}` }],
      },
      at(6),
    ),
  );
  row.withPanel(
    timeSeriesPanel(
      {
        title: 'Adapter cold starts per second',
        description:
          'Requests to a LoRA adapter that had no request for model_discovery.adapter_idle_after (tokentap_adapter_cold_starts_total), per adapter and namespace. ' +
          'Steady cold starts mean the engine keeps evicting adapters: with vLLM, raise --max-loras (GPU) or --max-cpu-loras, or route each adapter to fewer pods.',
        unit: 'reqps',
        min: 0,
        noData: NO_ADAPTER_DATA,
        queries: [{ expr: a.adapterColdStartsPerSecond(), legend: `{{gen_ai_request_model}} ${NS}` }],
      },
      at(6),
    ),
  );
  return row;
}
