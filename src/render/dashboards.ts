import * as dashboard from '@grafana/grafana-foundation-sdk/dashboard';
import type { Settings, SloKind, Workload } from '../config/load.js';
import { BURN_RATE_POLICIES } from './burn-rate-windows.js';
import { statPanel, timeSeriesPanel, type Placement, type Query } from './dashboard-panels.js';
import * as q from './dashboard-queries.js';
import { sloRunbookLinks, type SloLinks } from './dashboard-runbook-links.js';
import { errorBudgetRatios, objectives, thresholds } from './dashboard-slo-constants.js';
import { dashboardVariables, WORKLOAD_VARIABLE } from './dashboard-variables.js';
import { adapterRow } from './adapter-panels.js';
import { capacityRow } from './capacity-panels.js';
import { engineRow } from './engine-panels.js';
import { classicOrNativeQuantile } from './native-dashboard-queries.js';
import { NAMESPACE_LABEL } from './promql.js';
import { QUANTILES } from './recording-rules.js';
import type { RenderOptions } from './rule-types.js';

/**
 * Grafana dashboards, rendered from the settings (workloads, objectives, thresholds) and the metric
 * definitions: `renderDashboards(settings)` is pure and deterministic; the render CLI writes each
 * dashboard to `DIR/grafana/<fileName>`. Built with @grafana/grafana-foundation-sdk (classic
 * dashboard JSON, which imports into Grafana 10 and later), with a datasource variable so the
 * same file works against any Prometheus data source.
 *
 * The first row (every selected workload together) is open; the rows below are collapsed, and the
 * per-workload ones are repeated by Grafana for each value of `$workload`, so the dashboard link
 * of an alert (`?var-workload=chat`) shows chat's rows only.
 */

export interface RenderedDashboard {
  /** e.g. `tokentap-slo-overview.json` */
  readonly fileName: string;
  readonly dashboard: dashboard.Dashboard;
}

/**
 * The window SLO attainment and error budget are reported over. 30 days is the usual SRE-book
 * window (and what Sloth and Pyrra default to); the recording rules' longest window is 3 d.
 */
const SLO_WINDOW = '30d';

/** Every burn-rate condition of the alerts (burn-rate-windows.ts), for the burn-rate panel's lines and text. */
const BURN_CONDITIONS = BURN_RATE_POLICIES.flatMap((policy) => policy.conditions.map((c) => ({ severity: policy.severity, ...c })));
const BURN_RATE_LINES = [...new Set(BURN_CONDITIONS.map((c) => c.factor))];
const BURN_RATE_LEGEND = BURN_CONDITIONS.map((c) => `${c.factor} (${c.severity}, over ${c.long} and ${c.short})`).join(', ');

export const SLO_OVERVIEW_UID = 'tokentap-slo-overview';

/**
 * Per-workload panels keep the namespace apart (dashboard-queries.ts), so the same workload in
 * staging and prod draws two lines under `$namespace` = All; the legend says which. Without a
 * namespace label it renders as nothing.
 */
const NAMESPACE_LEGEND = `{{${NAMESPACE_LABEL}}}`;

const QUANTILE_NOTE = ' Quantiles per namespace, over the selected pods and models together.';

const SLO_TITLE: Record<SloKind, string> = { ttft: 'TTFT', itl: 'ITL', e2e: 'e2e' };

/** What the SLO panels show without series: a workload without `slo` has no SLO events at all. */
const NO_SLO_DATA = 'No data: the workload has no SLO, or its sidecar is not scraped';

/** The DCGM exporter's panels read the exporter's own series, not the sidecar's. */
const NO_DCGM_DATA = 'No data: is the DCGM exporter scraped, and do the selected pods use a GPU?';

/** The sidecar's GPU gauges exist only with `dcgm.url` set. */
const NO_SIDECAR_GPU_DATA = 'No data: is dcgm.url set and the sidecar scraped?';

/**
 * `histograms` is the render's `--histograms`: with `native` the quantile panels also read the native
 * series, as they do for `metrics.histograms: native`. A `both` sidecar rendered `--histograms native`
 * is the switch docs/native-histograms.md describes, and a Prometheus 2.x that ingests the native
 * series stores no `_bucket` of them: classic-only panels showed "No data" there.
 */
export function renderDashboards(settings: Settings, histograms: RenderOptions['histograms'] = 'classic'): RenderedDashboard[] {
  return [{ fileName: `${SLO_OVERVIEW_UID}.json`, dashboard: sloOverview(settings, histograms === 'native' || settings.histograms === 'native') }];
}

/** The file text of a rendered dashboard: what the CLI writes and the committed grafana/ files hold. */
export function dashboardFileText(rendered: RenderedDashboard): string {
  return `${JSON.stringify(rendered.dashboard, null, 2)}\n`;
}

/** Hands out panel ids in build order, so they are unique and stable across renders. */
class PanelIds {
  private next = 1;
  take(): number {
    return this.next++;
  }
}

function sloOverview(settings: Settings, native: boolean): dashboard.Dashboard {
  const links = sloRunbookLinks(settings.alerts);
  const ids = new PanelIds();
  const at = (width: number, height = 8): Placement => ({ id: ids.take(), width, height });
  const builder = new dashboard.DashboardBuilder('tokentap: LLM latency SLOs and GPU')
    .uid(SLO_OVERVIEW_UID)
    .description('Per-workload TTFT, ITL and e2e latency against their SLOs, error budgets and burn rates, traffic, and the GPU memory and utilisation of the same pods. Generated by `tokentap render`; do not edit by hand.')
    .tags(['tokentap', 'llm', 'slo'])
    .editable()
    .tooltip(dashboard.DashboardCursorSync.Crosshair)
    .time({ from: 'now-6h', to: 'now' })
    .refresh('30s')
    .annotation(
      new dashboard.AnnotationQueryBuilder()
        .name('Annotations & Alerts')
        .datasource({ type: 'grafana', uid: '-- Grafana --' })
        .enable(true)
        .hide(true)
        .iconColor('rgba(0, 211, 255, 1)')
        .type('dashboard')
        .builtIn(1),
    );
  for (const variable of dashboardVariables()) builder.withVariable(variable);

  builder.withRow(new dashboard.RowBuilder('Service levels (selected workloads)').id(ids.take()));
  builder.withPanel(
    statPanel(
      {
        title: `SLO attainment (${SLO_WINDOW})`,
        description: `Share of good events per namespace, workload and SLO over the last ${SLO_WINDOW} (tokentap_slo_events_total), across all pods (the pod selection does not apply). TTFT and e2e count requests, ITL counts tokens. Abandoned requests that waited longer than the TTFT budget count as bad. Covers at most what Prometheus retains (15 days by default).`,
        unit: 'percentunit',
        decimals: 2,
        noData: NO_SLO_DATA,
        links: links.every,
        queries: [{ expr: q.sloAttainment(SLO_WINDOW), legend: `{{workload}} {{slo}} ${NAMESPACE_LEGEND}` }],
      },
      at(24, 5),
    ),
  );
  builder.withPanel(
    timeSeriesPanel(
      {
        title: 'Requests per second by outcome',
        description: 'Finished requests per second, all selected namespaces and workloads together: completed, client_cancelled, client_error (a 4xx other than 408, 429 and 499: refused for what the client asked; burns no SLO), upstream_error, truncated (upstream closed without a terminal event), timeout, shutdown (cut at the end of the sidecar drain on SIGTERM).',
        unit: 'reqps',
        min: 0,
        queries: [{ expr: q.requestsPerSecondByOutcome(), legend: '{{outcome}}' }],
      },
      at(8),
    ),
  );
  builder.withPanel(
    timeSeriesPanel(
      {
        title: 'Tokens per second in and out',
        description: 'Input (prompt) and output (generated) tokens per second per namespace and workload, from reported usage where the server sends it, else counted from content events.',
        unit: 'short',
        min: 0,
        queries: [{ expr: q.tokensPerSecond(), legend: `{{workload}} {{gen_ai_token_type}} ${NAMESPACE_LEGEND}` }],
      },
      at(8),
    ),
  );
  builder.withPanel(
    timeSeriesPanel(
      {
        title: 'Requests in flight',
        description: 'Requests received by the proxy and not yet finished, per namespace and workload: the concurrency the inference server sees.',
        unit: 'short',
        min: 0,
        queries: [{ expr: q.inFlight(), legend: `{{workload}} ${NAMESPACE_LEGEND}` }],
      },
      at(8),
    ),
  );
  builder.withPanel(
    timeSeriesPanel(
      {
        title: 'Cancellation rate',
        description: 'Share of finished requests the client abandoned (client_cancelled), per namespace and workload. A rise with TTFT usually means users give up waiting.',
        unit: 'percentunit',
        min: 0,
        queries: [{ expr: q.outcomeRatio('client_cancelled'), legend: `{{workload}} ${NAMESPACE_LEGEND}` }],
      },
      at(8),
    ),
  );
  builder.withPanel(
    timeSeriesPanel(
      {
        title: 'Truncation rate',
        description: 'Share of finished requests whose stream the upstream closed without a terminal event (truncated), per namespace and workload: answers cut off mid-way.',
        unit: 'percentunit',
        min: 0,
        queries: [{ expr: q.outcomeRatio('truncated'), legend: `{{workload}} ${NAMESPACE_LEGEND}` }],
      },
      at(8),
    ),
  );
  builder.withPanel(
    timeSeriesPanel(
      {
        title: 'Client error rate',
        description:
          'Share of finished requests refused for what the client asked (client_error: an HTTP 4xx other than 408, 429 and 499), per namespace and workload. ' +
          'The client failed, not the server: these burn no SLO and do not count for the alerts\' traffic guard. A rise points at a client release or a changed API, not at the inference server.',
        unit: 'percentunit',
        min: 0,
        queries: [{ expr: q.outcomeRatio('client_error'), legend: `{{workload}} ${NAMESPACE_LEGEND}` }],
      },
      at(8),
    ),
  );

  builder.withRow(workloadRow(settings.workloads, at, links, native));
  builder.withRow(engineRow(settings.workloads, at, links, native));
  builder.withRow(adapterRow(at));
  builder.withRow(capacityRow(settings, at));
  for (const row of gpuRows(at)) builder.withRow(row);
  return builder.build();
}

/**
 * The row of the workload in `$workload`, collapsed, which Grafana repeats per selected workload.
 * One panel serves every workload, so what differs per workload (objective, thresholds) comes
 * from the configuration as per-workload constants (dashboard-slo-constants.ts), never literals.
 */
function workloadRow(workloads: readonly Workload[], at: (width: number, height?: number) => Placement, links: SloLinks, native: boolean): dashboard.RowBuilder {
  const name = `$${WORKLOAD_VARIABLE}`;
  const row = new dashboard.RowBuilder(`Workload ${name}: SLOs and latency`).id(at(24).id).repeat(WORKLOAD_VARIABLE).collapsed(true);
  const objectiveConstants = objectives(workloads);
  const budgetRatios = errorBudgetRatios(workloads);
  // Without any SLO in the configuration there is nothing to attain or burn: latency panels only.
  if (objectiveConstants !== undefined && budgetRatios !== undefined) {
    row.withPanel(
      statPanel(
        {
          title: `${name}: SLO attainment (${SLO_WINDOW})`,
          description: `Share of good events over the last ${SLO_WINDOW} for each SLO of the workload (ttft, itl, e2e, as configured), per namespace, across all its pods (the pod selection does not apply), beside the workload's objective. Below the objective the error budget is overspent (see the next panel). Covers at most what Prometheus retains (15 days by default).`,
          unit: 'percentunit',
          decimals: 2,
          noData: NO_SLO_DATA,
          links: links.every,
          queries: [
            { expr: q.sloAttainment(SLO_WINDOW), legend: `{{slo}} ${NAMESPACE_LEGEND}` },
            { expr: q.forSelectedWorkloads(objectiveConstants), legend: 'objective' },
          ],
        },
        at(6),
      ),
    );
    row.withPanel(
      statPanel(
        {
          title: `${name}: error budget remaining (${SLO_WINDOW})`,
          description: `Share of the ${SLO_WINDOW} error budget (1 - objective of the events) not yet spent, per SLO and namespace, across all pods of the workload; red at or below 0 (overspent: attainment below the objective). Covers at most what Prometheus retains (15 days by default).`,
          unit: 'percentunit',
          decimals: 1,
          colors: { red: 0, yellow: 0.25 },
          noData: NO_SLO_DATA,
          links: links.every,
          queries: [{ expr: q.errorBudgetRemaining(budgetRatios, SLO_WINDOW), legend: `{{slo}} ${NAMESPACE_LEGEND}` }],
        },
        at(6),
      ),
    );
    row.withPanel(
      timeSeriesPanel(
        {
          title: `${name}: burn rate (1h)`,
          description: `Error ratio over the last hour, per SLO and namespace, across all pods of the workload, divided by its error budget ratio (1 - objective): at 1 the budget lasts exactly the ${SLO_WINDOW} SLO window. The dashed lines are the alert factors, each over its own pair of windows: ${BURN_RATE_LEGEND}. Only the 1h condition reads this curve directly.`,
          unit: 'x',
          min: 0,
          noData: NO_SLO_DATA,
          links: links.every,
          thresholdLines: BURN_RATE_LINES,
          queries: [{ expr: q.burnRate(budgetRatios, '1h'), legend: `{{slo}} ${NAMESPACE_LEGEND}` }],
        },
        at(12),
      ),
    );
  }
  const quantiles = (key: 'ttft' | 'itlToken' | 'e2e'): Query[] =>
    QUANTILES.map((quantile) => ({ expr: native ? classicOrNativeQuantile(quantile, key) : q.quantile(quantile, key), legend: `p${Math.round(quantile * 100)} ${NAMESPACE_LEGEND}` }));
  const budgetLine = (kind: SloKind): Query[] => {
    const constants = thresholds(workloads, kind);
    return constants === undefined ? [] : [{ expr: q.forSelectedWorkloads(constants), legend: 'budget' }];
  };
  const budgetNote = (kind: SloKind): string =>
    `${QUANTILE_NOTE} The dashed red line is the workload's ${SLO_TITLE[kind]} budget (its configured threshold); none without one.`;
  row.withPanel(
    timeSeriesPanel(
      {
        title: `${name}: TTFT p50 / p90 / p99`,
        description: `Time to first token: from the request reaching the proxy to the first content-bearing event (not a role-only prelude).${budgetNote('ttft')}`,
        unit: 's',
        min: 0,
        links: links.ttft,
        queries: quantiles('ttft'),
        budgetQueries: budgetLine('ttft'),
      },
      at(8),
    ),
  );
  row.withPanel(
    timeSeriesPanel(
      {
        title: `${name}: ITL p50 / p90 / p99`,
        description: `Inter-token latency per token: the gap between content events divided by the tokens in the later one.${budgetNote('itl')}`,
        unit: 's',
        min: 0,
        links: links.itl,
        queries: quantiles('itlToken'),
        budgetQueries: budgetLine('itl'),
      },
      at(8),
    ),
  );
  row.withPanel(
    timeSeriesPanel(
      {
        title: `${name}: e2e latency p50 / p90 / p99`,
        description: `End-to-end: from the request reaching the proxy to the last byte written to the client, every request and outcome.${budgetNote('e2e')}`,
        unit: 's',
        min: 0,
        links: links.e2e,
        queries: quantiles('e2e'),
        budgetQueries: budgetLine('e2e'),
      },
      at(8),
    ),
  );
  return row;
}

/** The GPU rows, collapsed: the DCGM exporter's series, then the sidecar's own reading of them. */
function gpuRows(at: (width: number, height?: number) => Placement): dashboard.RowBuilder[] {
  const exporter = new dashboard.RowBuilder('GPU of the selected pods (DCGM exporter)').id(at(24).id).collapsed(true);
  exporter.withPanel(
    timeSeriesPanel(
      {
        title: 'GPU memory used and total (DCGM)',
        description:
          'DCGM_FI_DEV_FB_USED and the framebuffer size (DCGM_FI_DEV_FB_TOTAL, else FB_USED + FB_FREE + FB_RESERVED), per GPU or MIG instance of the selected pods; reads the exporter labels whether Prometheus kept `pod` or renamed it `exported_pod`.',
        unit: 'bytes',
        min: 0,
        noData: NO_DCGM_DATA,
        queries: [
          { expr: q.dcgmMemoryUsedBytes(), legend: 'used {{pod}} gpu {{gpu}} {{GPU_I_ID}}' },
          { expr: q.dcgmMemoryTotalBytes(), legend: 'total {{pod}} gpu {{gpu}} {{GPU_I_ID}}' },
        ],
      },
      at(12),
    ),
  );
  exporter.withPanel(
    timeSeriesPanel(
      {
        title: 'GPU memory free (DCGM)',
        description: 'DCGM_FI_DEV_FB_FREE per GPU or MIG instance of the selected pods: headroom for the KV cache before the server must preempt or queue.',
        unit: 'bytes',
        min: 0,
        noData: NO_DCGM_DATA,
        queries: [{ expr: q.dcgmMemoryFreeBytes(), legend: '{{pod}} gpu {{gpu}} {{GPU_I_ID}}' }],
      },
      at(6),
    ),
  );
  exporter.withPanel(
    timeSeriesPanel(
      {
        title: 'GPU utilisation (DCGM)',
        description: 'DCGM_FI_DEV_GPU_UTIL / 100 of the GPUs the selected pods use, matched by GPU UUID (on MIG the exporter reports it per physical GPU only, shared by its instances).',
        unit: 'percentunit',
        min: 0,
        noData: NO_DCGM_DATA,
        queries: [{ expr: q.dcgmUtilizationRatio(), legend: '{{hostname}} gpu {{gpu}}' }],
      },
      at(6),
    ),
  );
  const sidecar = new dashboard.RowBuilder('GPU as read by the tokentap sidecar (dcgm.url)').id(at(24).id).collapsed(true);
  sidecar.withPanel(
    timeSeriesPanel(
      {
        title: 'GPU memory used and total (sidecar)',
        description:
          "tokentap_gpu_memory_used_bytes and tokentap_gpu_memory_total_bytes: the sidecar's own reading of the node's DCGM exporter, kept to its pod's series or GPU UUIDs, so the pod join holds where the exporter's pod mapping is off. Absent (not zero) while the exporter is unreachable or reports blank values.",
        unit: 'bytes',
        min: 0,
        noData: NO_SIDECAR_GPU_DATA,
        queries: [
          { expr: q.sidecarGpuMemoryUsedBytes(), legend: 'used {{pod}} gpu {{gpu}} {{gpu_instance}}' },
          { expr: q.sidecarGpuMemoryTotalBytes(), legend: 'total {{pod}} gpu {{gpu}} {{gpu_instance}}' },
        ],
      },
      at(10),
    ),
  );
  sidecar.withPanel(
    timeSeriesPanel(
      {
        title: 'GPU utilisation (sidecar)',
        description: 'tokentap_gpu_utilization_ratio: DCGM_FI_DEV_GPU_UTIL / 100 of the GPUs the sidecar found for its pod.',
        unit: 'percentunit',
        min: 0,
        noData: NO_SIDECAR_GPU_DATA,
        queries: [{ expr: q.sidecarGpuUtilizationRatio(), legend: '{{pod}} gpu {{gpu}}' }],
      },
      at(7),
    ),
  );
  sidecar.withPanel(
    timeSeriesPanel(
      {
        title: 'DCGM scrape errors (sidecar)',
        description:
          'tokentap_dcgm_scrape_errors_total per second by reason: unreachable, timeout, http_status, bad_text, sentinel (a blank DCGM value), no_match (no series of this pod: check POD_NAME / NVIDIA_VISIBLE_DEVICES). Empty when all is well.',
        unit: 'short',
        min: 0,
        noData: 'No DCGM scrape error counted (or dcgm.url is not set, or the sidecar not scraped)',
        queries: [{ expr: q.dcgmScrapeErrorRate(), legend: '{{pod}} {{reason}}' }],
      },
      at(7),
    ),
  );
  return [exporter, sidecar];
}
