import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { loadSettings } from '../config/load.js';
import { TokentapError } from '../errors.js';
import { placeholderAlertLinks } from '../render/alert-links.js';
import { unreachableBurnConditions } from '../render/burn-rate-windows.js';
import { renderArtefacts } from '../render/artefacts.js';
import type { RenderOptions } from '../render/rule-types.js';
import type { CliIO } from './main.js';
import { writeAllOrNone } from './write-all-or-none.js';

export const RENDER_USAGE = `Usage: tokentap render --config FILE --out DIR [flags]

Writes, from the workloads and SLOs in FILE and the metric definitions the sidecar uses:
  DIR/prometheus/rules.yaml            recording and alerting rules (plain Prometheus rule file)
  DIR/prometheus/prometheusrule.yaml   the same groups as a prometheus-operator PrometheusRule
  DIR/alertmanager/tokentap-routes.yaml     a route, inhibit rules and receivers to merge into an
                                            existing Alertmanager configuration (docs/alerts.md)
  DIR/alertmanager/alertmanagerconfig.yaml  the same routing as a prometheus-operator AlertmanagerConfig
  DIR/grafana/*.json                   Grafana dashboards (or --dashboards-out DIR2)

Flags:
  --config FILE           tokentap configuration file (workloads, alerts; alerts.grafana_url is required)
  --out DIR               where to write; directories are created
  --dashboards-out DIR2   where Grafana dashboards go (default DIR/grafana)
  --histograms KIND       which histograms the quantile, capacity and cost rules read: classic
                          (the _bucket, _count and _sum series) or native (Prometheus native
                          histograms: histogram_quantile, histogram_count; needs Prometheus
                          >= 2.40 with --enable-feature=native-histograms); the SLIs read
                          tokentap_slo_events_total either way; native also makes the dashboards'
                          quantile panels read the native series. Default: native when the
                          config says metrics.histograms: native, else classic
  --window-scale X        for tests only: multiply every rule window and 'for' duration by X
                          (0 < X <= 1; 0.01 makes the 1h window 36s so an alert fires in seconds)
  --help                  show this text
`;

export interface RenderFlags {
  readonly config: string;
  readonly out: string;
  readonly dashboardsOut: string;
  readonly options: RenderOptions;
  /** --histograms, when given; otherwise the config decides (resolveHistograms). */
  readonly histograms: 'classic' | 'native' | undefined;
}

export function parseRenderFlags(argv: readonly string[]): RenderFlags {
  let values: { config?: string; out?: string; 'dashboards-out'?: string; 'window-scale'?: string; histograms?: string };
  try {
    ({ values } = parseArgs({
      args: [...argv],
      options: {
        config: { type: 'string' },
        out: { type: 'string' },
        'dashboards-out': { type: 'string' },
        'window-scale': { type: 'string' },
        histograms: { type: 'string' },
      },
      strict: true,
      allowPositionals: false,
    }));
  } catch (error) {
    throw new TokentapError('TOKENTAP_ERR_USAGE', [(error as Error).message]);
  }
  const problems: string[] = [];
  if (values.config === undefined) problems.push('--config FILE is required');
  if (values.out === undefined) problems.push('--out DIR is required');
  const scaleText = values['window-scale'] ?? '1';
  const windowScale = Number(scaleText);
  if (!(windowScale > 0 && windowScale <= 1) || scaleText.trim() === '') {
    problems.push(`--window-scale: expected a number greater than 0 and at most 1, got "${scaleText}"`);
  }
  const histograms = values.histograms;
  if (histograms !== undefined && histograms !== 'classic' && histograms !== 'native') {
    problems.push(`--histograms: expected "classic" or "native", got "${histograms}"`);
  }
  if (problems.length > 0) throw new TokentapError('TOKENTAP_ERR_USAGE', problems);
  const out = values.out as string;
  return {
    config: values.config as string,
    out,
    dashboardsOut: values['dashboards-out'] ?? join(out, 'grafana'),
    options: { windowScale },
    histograms: histograms as 'classic' | 'native' | undefined,
  };
}

/** `tokentap render`: validates the config like `serve` does, then writes every artefact. */
export async function runRender(argv: readonly string[], io: CliIO): Promise<number> {
  if (argv.includes('--help') || argv.includes('-h')) {
    io.stdout.write(RENDER_USAGE);
    return 0;
  }
  const flags = parseRenderFlags(argv);
  // No environment: the rendered files depend on the config file alone.
  const settings = loadSettings({ flags: { config: flags.config }, env: {} });
  const histograms = flags.histograms ?? (settings.histograms === 'native' ? 'native' : 'classic');
  if (histograms === 'native' && settings.histograms === 'classic') {
    throw new TokentapError('TOKENTAP_ERR_USAGE', [`--histograms native: ${flags.config} sets metrics.histograms: classic, so the sidecar exposes no native histograms for these rules to read`]);
  }
  const files = renderArtefacts(settings, { ...flags.options, histograms }).map((artefact) => ({
    path: join(artefact.root === 'out' ? flags.out : flags.dashboardsOut, artefact.path),
    content: artefact.content,
  }));
  // All or none: a half-written set (new rules, old dashboards) would disagree with itself.
  await writeAllOrNone(files);
  for (const file of files) io.stdout.write(`wrote ${file.path}\n`);
  for (const warning of [...unreachableBurnConditions(settings.workloads, flags.config), ...placeholderAlertLinks(settings.alerts, flags.config)]) io.stderr.write(`${warning}\n`);
  return 0;
}
