import { METRICS } from '../metrics/definitions.js';
import { quantile, scope } from './dashboard-queries.js';
import { NAMESPACE_LABEL } from './promql.js';

/**
 * The quantile panels' query when the sidecar exposes native histograms (`metrics.histograms:
 * native`): histogram_quantile over the classic buckets `or` over the native series, per namespace.
 * Whichever the Prometheus ingested answers: classic where it scrapes text (or keeps classic
 * histograms too, `scrape_classic_histograms` from 2.45, `always_scrape_classic_histograms` in 3.x),
 * native where it scrapes protobuf with native histograms on (2.42 then stores the native series
 * only). Where both exist the classic answer wins (`or` keeps the left side), so a panel never
 * shows two curves for one quantile.
 */
export function classicOrNativeQuantile(q: number, key: 'ttft' | 'itlToken' | 'e2e' | 'ttfb' | 'tpot', workload?: string): string {
  const native = `histogram_quantile(${q}, sum by (${NAMESPACE_LABEL}) (rate(${METRICS[key].promName}${scope(workload)}[$__rate_interval])))`;
  return `${quantile(q, key, workload)}\nor\n${native}`;
}
