import type { Settings } from '../config/load.js';
import { TokentapError } from '../errors.js';
import { missingAlertLinks } from './alert-links.js';
import { renderAlertmanagerConfigCrd } from './alertmanager-config-crd.js';
import { renderAlertmanagerRoutes } from './alertmanager-routes.js';
import { dashboardFileText, renderDashboards } from './dashboards.js';
import { generatedYaml } from './generated-text.js';
import { renderPrometheusRule } from './prometheus-rule-crd.js';
import { renderPrometheusRules } from './prometheus-rules.js';
import type { RenderOptions } from './rule-types.js';

/**
 * Everything `tokentap render` writes, as data: the CLI writes each artefact under its root
 * directory, and the staleness test compares each with the committed file.
 */
export interface Artefact {
  /** `out`: the --out directory; `dashboards`: --dashboards-out (default OUT/grafana). */
  readonly root: 'out' | 'dashboards';
  /** Relative to the root, with `/` separators. */
  readonly path: string;
  readonly content: string;
}

export function renderArtefacts(settings: Settings, options: RenderOptions): Artefact[] {
  const missing = missingAlertLinks(settings.alerts, settings.configFile);
  if (missing.length > 0) throw new TokentapError('TOKENTAP_ERR_CONFIG_INVALID', missing);
  const rules = renderPrometheusRules(settings, options);
  return [
    { root: 'out', path: 'prometheus/rules.yaml', content: generatedYaml(rules) },
    { root: 'out', path: 'prometheus/prometheusrule.yaml', content: generatedYaml(renderPrometheusRule(rules)) },
    { root: 'out', path: 'alertmanager/tokentap-routes.yaml', content: generatedYaml(renderAlertmanagerRoutes(settings.alerts)) },
    { root: 'out', path: 'alertmanager/alertmanagerconfig.yaml', content: generatedYaml(renderAlertmanagerConfigCrd(settings.alerts)) },
    ...renderDashboards(settings, options.histograms).map((d): Artefact => ({ root: 'dashboards', path: d.fileName, content: dashboardFileText(d) })),
  ];
}
