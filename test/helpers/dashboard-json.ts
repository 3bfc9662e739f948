/**
 * Reading rendered Grafana dashboards the way Grafana does: every panel (rows' nested panels
 * too), every query, and the template variables a query uses, substituted as Grafana would
 * before the query reaches Prometheus.
 */
export interface DashboardTarget {
  expr: string;
  refId: string;
  legendFormat?: string;
  instant?: boolean;
  datasource?: { type?: string; uid?: string };
}

export interface DashboardPanel {
  id: number;
  type: string;
  title: string;
  description?: string;
  gridPos: { x: number; y: number; w: number; h: number };
  datasource?: { type?: string; uid?: string };
  targets?: DashboardTarget[];
  panels?: DashboardPanel[];
  fieldConfig?: { defaults?: { noValue?: string; mappings?: unknown[]; unit?: string; thresholds?: { steps: Array<{ value: number | null; color: string }> }; custom?: Record<string, unknown> } };
}

export interface DashboardVariable {
  name: string;
  type: string;
  query?: unknown;
  allValue?: string;
  includeAll?: boolean;
  datasource?: { type?: string; uid?: string };
}

export interface DashboardJson {
  uid: string;
  title: string;
  schemaVersion: number;
  panels: DashboardPanel[];
  templating: { list: DashboardVariable[] };
  annotations?: { list?: Array<{ builtIn?: number; datasource?: { type?: string; uid?: string } }> };
}

/** Top-level panels and the panels inside collapsed rows, in order. */
export function allPanels(dashboard: DashboardJson): DashboardPanel[] {
  return dashboard.panels.flatMap((panel) => [panel, ...(panel.panels ?? [])]);
}

/**
 * `$name` and `${name}` / `${name:format}` references in a string. `$1` (a label_replace
 * back-reference) is not one: Grafana leaves a reference alone when no variable has that name,
 * and variable names cannot be all digits.
 */
export function variableReferences(text: string): string[] {
  return [...text.matchAll(/\$(?:\{(\w+)(?::\w+)?\}|(\w+))/g)].map((m) => (m[1] ?? m[2]) as string).filter((name) => !/^\d+$/.test(name));
}

/** Replaces every `$name` / `${name}` with `values[name]`; throws on a variable without a value. */
export function substituteVariables(expr: string, values: Readonly<Record<string, string>>): string {
  return expr.replace(/\$(?:\{(\w+)(?::\w+)?\}|(\w+))/g, (whole, braced: string | undefined, bare: string | undefined) => {
    const name = (braced ?? bare) as string;
    if (/^\d+$/.test(name)) return whole;
    const value = values[name];
    if (value === undefined) throw new Error(`no value for template variable ${whole} in: ${expr}`);
    return value;
  });
}

/** One row of the dashboard as Grafana lays it out for a selection: a repeated row once per value. */
export interface ExpandedRow {
  title: string;
  collapsed: boolean;
  /** The value the row's repeat variable has inside this copy of the row, if it repeats. */
  repeat?: { variable: string; value: string };
  panels: DashboardPanel[];
}

/**
 * The rows Grafana shows for the selected variable values (the URL's `var-NAME`): a row with
 * `repeat: NAME` is copied once per selected value, and inside each copy `$NAME` is that one value;
 * a row without it appears once. The panels of an open row are the top-level panels after it, those
 * of a collapsed row its own `panels`. Row titles get the copy's value substituted.
 */
export function expandRows(dashboard: DashboardJson, selected: Readonly<Record<string, readonly string[]>>): ExpandedRow[] {
  const rows: ExpandedRow[] = [];
  let open: ExpandedRow | undefined;
  for (const panel of dashboard.panels) {
    if (panel.type !== 'row') {
      if (open === undefined) throw new Error(`panel "${panel.title}" is outside any row`);
      open.panels.push(panel);
      continue;
    }
    const row = panel as DashboardPanel & { collapsed?: boolean; repeat?: string };
    const copies = row.repeat === undefined ? [undefined] : (selected[row.repeat] ?? []).map((value) => ({ variable: row.repeat as string, value }));
    for (const repeat of copies) {
      const title = repeat === undefined ? row.title : substituteVariables(row.title, { [repeat.variable]: repeat.value });
      const expanded: ExpandedRow = { title, collapsed: row.collapsed === true, panels: row.collapsed === true ? [...(row.panels ?? [])] : [], ...(repeat === undefined ? {} : { repeat }) };
      rows.push(expanded);
      open = row.collapsed === true ? undefined : expanded;
    }
  }
  return rows;
}
