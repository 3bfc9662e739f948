import * as dashboard from '@grafana/grafana-foundation-sdk/dashboard';
import { METRICS } from '../metrics/definitions.js';
import { DATASOURCE, DATASOURCE_VARIABLE } from './dashboard-panels.js';
import { LABEL } from './dashboard-queries.js';

/**
 * The template variables, in dependency order: datasource, namespace, workload, pod, model. Each
 * list comes from the series tokentap itself emits, so it offers only pods that run the sidecar.
 *
 * `All` for `pod` deliberately has no custom all-value: Grafana then expands it to the listed
 * pods (`(pod-a|pod-b)`), so the DCGM panels show the GPUs of tokentap's pods and not every GPU
 * of the node (idle GPUs and other tenants carry no pod label or another one, and `.*` would
 * match them). The others use `.*`, which also matches series that lack the label.
 */
const SOURCE = METRICS.requests.promName;

/** The variable the per-workload rows repeat over (Grafana `repeat`), and the alerts' dashboard links set (`var-workload`). */
export const WORKLOAD_VARIABLE = 'workload';

export function dashboardVariables(): Array<dashboard.DatasourceVariableBuilder | dashboard.QueryVariableBuilder> {
  const query = (name: string, label: string, expr: string, allValue: string | undefined): dashboard.QueryVariableBuilder => {
    const variable = new dashboard.QueryVariableBuilder(name)
      .label(label)
      .datasource(DATASOURCE)
      .query(expr)
      .definition(expr)
      .refresh(dashboard.VariableRefresh.OnTimeRangeChanged)
      .sort(dashboard.VariableSort.AlphabeticalAsc)
      .multi(true)
      .includeAll(true)
      .current({ selected: true, text: ['All'], value: ['$__all'] });
    if (allValue !== undefined) variable.allValue(allValue);
    return variable;
  };
  return [
    new dashboard.DatasourceVariableBuilder(DATASOURCE_VARIABLE).label('Data source').type('prometheus'),
    query('namespace', 'Namespace', `label_values(${SOURCE}, namespace)`, '.*'),
    query(WORKLOAD_VARIABLE, 'Workload', `label_values(${SOURCE}{namespace=~"$namespace"}, ${LABEL.workload})`, '.*'),
    query('pod', 'Pod', `label_values(${SOURCE}{namespace=~"$namespace", ${LABEL.workload}=~"$workload"}, pod)`, undefined),
    query('model', 'Model', `label_values(${SOURCE}{namespace=~"$namespace", ${LABEL.workload}=~"$workload", pod=~"$pod"}, ${LABEL.model})`, '.*'),
  ];
}
