import type * as cog from '@grafana/grafana-foundation-sdk/cog';
import * as common from '@grafana/grafana-foundation-sdk/common';
import * as dashboard from '@grafana/grafana-foundation-sdk/dashboard';
import { DataqueryBuilder } from '@grafana/grafana-foundation-sdk/prometheus';
import * as stat from '@grafana/grafana-foundation-sdk/stat';
import * as timeseries from '@grafana/grafana-foundation-sdk/timeseries';

/**
 * Panel building blocks shared by the dashboards: every panel and query points at the
 * `datasource` variable, tells "no data" (no series: nothing scraped) from "no traffic" (NaN: the
 * counters exist and did not move), and gets an id from the caller so ids are unique and stable
 * from one render to the next.
 */

export const DATASOURCE_VARIABLE = 'datasource';
export const DATASOURCE: common.DataSourceRef = { type: 'prometheus', uid: `\${${DATASOURCE_VARIABLE}}` };

/**
 * What a panel shows when its queries return no series at all. Every query that can see a quiet
 * workload answers NaN for it (dashboard-queries.ts), so an empty answer means the series are not
 * in Prometheus: a scrape that broke must not read as a quiet service.
 */
const NO_DATA = 'No data: is the sidecar scraped?';

/** What a panel shows for NaN: a ratio or quantile over counters that exist and did not move. */
const NO_TRAFFIC = 'No traffic';

/** NaN (0/0: a quantile or ratio without events in its window) shown as "No traffic", never as a number. */
const NAN_AS_NO_TRAFFIC: dashboard.ValueMapping[] = [
  { type: dashboard.MappingType.SpecialValue, options: { match: dashboard.SpecialValueMatch.NullAndNan, result: { text: NO_TRAFFIC } } },
];

export interface Query {
  readonly expr: string;
  readonly legend: string;
}

/** A link in the panel's header (Grafana opens it in a new tab): a runbook. */
export interface PanelLink {
  readonly title: string;
  readonly url: string;
}

/** What every panel kind takes besides its queries. */
interface CommonOptions {
  readonly title: string;
  readonly description: string;
  readonly unit: string;
  /** Shown when the queries return no series; `NO_DATA` unless the data comes from elsewhere (engine, DCGM exporter). */
  readonly noData?: string;
  readonly links?: readonly PanelLink[];
}

/** Where on the 24-column grid a panel goes, and its id. */
export interface Placement {
  readonly id: number;
  readonly width: number;
  readonly height: number;
}

/** The setters every panel kind's builder has (stat and time series alike). */
interface PanelBasics<B> {
  id(id: number): B;
  title(title: string): B;
  description(description: string): B;
  datasource(datasource: common.DataSourceRef): B;
  span(width: number): B;
  height(height: number): B;
  unit(unit: string): B;
  noValue(text: string): B;
  mappings(mappings: dashboard.ValueMapping[]): B;
  links(links: cog.Builder<dashboard.DashboardLink>[]): B;
}

/** Id, texts, place, unit, links, the datasource variable, "no data" and "No traffic", the same on every panel. */
function basics<B extends PanelBasics<B>>(builder: B, options: CommonOptions, at: Placement): B {
  const panel = builder
    .id(at.id)
    .title(options.title)
    .description(options.description)
    .datasource(DATASOURCE)
    .span(at.width)
    .height(at.height)
    .unit(options.unit)
    .noValue(options.noData ?? NO_DATA)
    .mappings(NAN_AS_NO_TRAFFIC);
  const links = options.links ?? [];
  if (links.length > 0) panel.links(links.map((link) => new dashboard.DashboardLinkBuilder(link.title).type(dashboard.DashboardLinkType.Link).url(link.url).targetBlank(true)));
  return panel;
}

/** A, B, C...: the query's refId in its panel. */
function refId(index: number): string {
  return String.fromCharCode(65 + index);
}

function target(query: Query, index: number, instant: boolean): DataqueryBuilder {
  const builder = new DataqueryBuilder().datasource(DATASOURCE).expr(query.expr).legendFormat(query.legend).refId(refId(index));
  return instant ? builder.instant() : builder.range();
}

export interface TimeSeriesOptions extends CommonOptions {
  readonly queries: readonly Query[];
  /** Drawn as dashed red lines: a constant the same for every workload (a burn-rate alert factor). */
  readonly thresholdLines?: readonly number[];
  /** Queries drawn as dashed red lines after `queries`: a value that differs per workload (its SLO threshold). */
  readonly budgetQueries?: readonly Query[];
  readonly min?: number;
}

/** How a budget query is drawn: a dashed red line without fill, like a threshold line. */
const BUDGET_LINE_STYLE: dashboard.DynamicConfigValue[] = [
  { id: 'color', value: { mode: 'fixed', fixedColor: 'red' } },
  { id: 'custom.lineStyle', value: { fill: 'dash', dash: [10, 10] } },
  { id: 'custom.fillOpacity', value: 0 },
];

export function timeSeriesPanel(options: TimeSeriesOptions, at: Placement): cog.Builder<dashboard.Panel> {
  const panel = basics(new timeseries.PanelBuilder(), options, at)
    .lineWidth(1)
    .fillOpacity(10)
    .showPoints(common.VisibilityMode.Never)
    .legend(new common.VizLegendOptionsBuilder().displayMode(common.LegendDisplayMode.List).placement(common.LegendPlacement.Bottom).showLegend(true))
    .tooltip(new common.VizTooltipOptionsBuilder().mode(common.TooltipDisplayMode.Multi).sort(common.SortOrder.Descending));
  if (options.min !== undefined) panel.min(options.min);
  const lines = options.thresholdLines ?? [];
  panel.thresholds(thresholdSteps(lines, 'red'));
  panel.thresholdsStyle(new common.GraphThresholdsStyleConfigBuilder().mode(lines.length > 0 ? common.GraphThresholdsStyleMode.Dashed : common.GraphThresholdsStyleMode.Off));
  options.queries.forEach((q, i) => panel.withTarget(target(q, i, false)));
  (options.budgetQueries ?? []).forEach((q, i) => {
    const index = options.queries.length + i;
    panel.withTarget(target(q, index, false));
    panel.overrideByQuery(refId(index), BUDGET_LINE_STYLE);
  });
  return panel;
}

export interface StatOptions extends CommonOptions {
  readonly queries: readonly Query[];
  /** Values below `red` are red, below `yellow` yellow, others green; without it the text is uncoloured. */
  readonly colors?: { readonly red: number; readonly yellow: number };
  readonly decimals?: number;
}

export function statPanel(options: StatOptions, at: Placement): cog.Builder<dashboard.Panel> {
  const panel = basics(new stat.PanelBuilder(), options, at)
    .graphMode(common.BigValueGraphMode.None)
    .textMode(common.BigValueTextMode.ValueAndName)
    .colorMode(options.colors === undefined ? common.BigValueColorMode.None : common.BigValueColorMode.Value)
    .reduceOptions(new common.ReduceDataOptionsBuilder().calcs(['lastNotNull']).values(false));
  if (options.decimals !== undefined) panel.decimals(options.decimals);
  if (options.colors !== undefined) {
    panel.thresholds(
      new dashboard.ThresholdsConfigBuilder().mode(dashboard.ThresholdsMode.Absolute).steps([
        { value: null, color: 'red' },
        { value: options.colors.red, color: 'yellow' },
        { value: options.colors.yellow, color: 'green' },
      ]),
    );
  }
  options.queries.forEach((q, i) => panel.withTarget(target(q, i, true)));
  return panel;
}

/** Base step transparent, then one `color` step per value: Grafana draws a line at each step. */
function thresholdSteps(values: readonly number[], color: string): dashboard.ThresholdsConfigBuilder {
  const steps: dashboard.Threshold[] = [{ value: null, color: 'transparent' }, ...[...values].sort((a, b) => a - b).map((value) => ({ value, color }))];
  return new dashboard.ThresholdsConfigBuilder().mode(dashboard.ThresholdsMode.Absolute).steps(steps);
}
