import { createHash } from 'node:crypto';
import { CAPACITY_SECTION_HTML, capacitySectionStyle } from './status-page-capacity.js';
import { STATUS_PAGE_SCRIPT } from './status-page-script.js';
import { SHAPE_SCRIPT, SHAPE_STYLE } from './status-page-shape.js';
import type { StatusReport } from './status-report.js';

/**
 * The status page's stylesheet. Colours meet WCAG 2.2 AA: body text #1f2328 on white is 15.8:1,
 * muted text #57606a 6.2:1, each state badge's text on its own background at least 6:1, and the
 * bars and threshold line at least 3:1 against white (non-text contrast, WCAG 1.4.11); the state is
 * never told by colour alone (each badge has an icon and words). One column below 44rem.
 *
 * No column is ever cut off: the per-SLO table fits a card at 1400 px and wider (cells wrap between
 * numbers, never inside one), and a table whose container is narrower than its columns need (the
 * overview below 66rem, about 1,100 px of window; a card below 36rem: a phone) is stacked, each cell showing its column's
 * name beside its value. Container queries (Chromium 105, Firefox 110, Safari 16) size this by the
 * table's own box, not the window.
 */
const STACKED = `
  .stack thead { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); white-space: nowrap; }
  .stack, .stack tbody { display: block; }
  .stack tr { display: grid; grid-template-columns: repeat(auto-fill, minmax(10rem, 1fr)); gap: 0.35rem 0.75rem; padding: 0.5rem 0.25rem; border-bottom: 1px solid var(--line); }
  .stack th[scope=row] { grid-column: 1 / -1; border: 0; padding: 0; font-size: 1.05rem; }
  .stack td { display: block; border: 0; padding: 0; white-space: normal; min-width: 0; }
  .stack .cell-label { display: block; color: var(--muted); font-size: 0.8rem; }
`;
const STYLE = `
:root { color-scheme: light; --text: #1f2328; --muted: #57606a; --line: #d0d7de; --panel: #f6f8fa; --accent: #0550ae; }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Noto Sans", sans-serif; color: var(--text); background: #fff; }
a { color: var(--accent); }
a:focus-visible, button:focus-visible, summary:focus-visible, .scroll:focus-visible { outline: 3px solid #0969da; outline-offset: 2px; }
code { font: 0.9em ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
.top { display: flex; flex-wrap: wrap; gap: 0.5rem 1.5rem; align-items: center; padding: 0.75rem 1.25rem; border-bottom: 1px solid var(--line); background: var(--panel); }
.brand { display: flex; align-items: baseline; gap: 0.5rem; }
.brand h1 { margin: 0; font-size: 1.3rem; }
.facts { display: flex; flex-wrap: wrap; gap: 0.25rem 1.5rem; margin: 0; flex: 1; }
.facts div { display: flex; gap: 0.4rem; align-items: baseline; }
.facts dt { color: var(--muted); }
.facts dd { margin: 0; }
button { font: inherit; padding: 0.3rem 0.8rem; border: 1px solid #8c959f; border-radius: 6px; background: #fff; color: var(--text); cursor: pointer; }
main { padding: 1rem 1.25rem 2rem; max-width: 96rem; margin: 0 auto; }
h2 { font-size: 1.1rem; margin: 0.5rem 0; }
.muted { color: var(--muted); }
.note { color: var(--muted); margin: 0.25rem 0 1rem; font-size: 0.9rem; }
.problem { padding: 0.5rem 0.75rem; border: 1px solid #cf222e; background: #ffebe9; color: #a40e26; border-radius: 6px; }
.badge { display: inline-block; padding: 0.05rem 0.5rem; border-radius: 999px; font-size: 0.85rem; font-weight: 600; white-space: nowrap; border: 1px solid transparent; }
.state-ok { color: #116329; background: #dafbe1; border-color: #4ac26b; }
.state-burning { color: #6c4400; background: #fff8c5; border-color: #d4a72c; }
.state-fast_burn { color: #a40e26; background: #ffebe9; border-color: #ff8182; }
.state-no_data, .state-no_slo { color: #57606a; background: #f6f8fa; border-color: #d0d7de; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: 0.3rem 0.5rem; border-bottom: 1px solid var(--line); vertical-align: top; }
thead th { font-size: 0.85rem; color: var(--muted); font-weight: 600; }
[data-value] { white-space: nowrap; }
td { font-variant-numeric: tabular-nums; white-space: nowrap; }
.overview { margin-bottom: 1.25rem; container: overview / inline-size; }
.cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(min(100%, 40rem), 1fr)); gap: 1rem; }
.card { border: 1px solid var(--line); border-left: 6px solid #d0d7de; border-radius: 8px; padding: 0.75rem 1rem; min-width: 0; container: card / inline-size; }
.cell-label { display: none; }
.slos td, .slos th { white-space: normal; }
.slos thead th { white-space: normal; }
.slo-name { display: block; font-weight: 600; }
.line { display: block; }
.slos th, .slos td { padding-left: 0.4rem; padding-right: 0.4rem; }
.over-text { color: #a40e26; font-weight: 600; }
.of-budget { white-space: nowrap; }
.spark { width: 120px; height: 30px; display: inline-block; vertical-align: middle; }
.spark-line { fill: none; stroke: #0969da; stroke-width: 1.5; }
.spark-limit { stroke: #a40e26; stroke-width: 1; stroke-dasharray: 3 2; }
.spark-dot { fill: #0969da; }
.spark-dot.over { fill: #cf222e; }
.trend-lines { display: grid; gap: 0.25rem; margin-top: 0.25rem; }
.trend-line { display: flex; align-items: center; gap: 0.5rem; font-variant-numeric: tabular-nums; }
.trend-name { min-width: 6rem; color: var(--muted); font-size: 0.85rem; }
.demo-notice { padding: 0.5rem 0.75rem; border: 1px solid #54aeff; background: #ddf4ff; color: #0a3069; border-radius: 6px; margin: 0 0 1rem; }
.state-card-ok { border-left-color: #1a7f37; }
.state-card-burning { border-left-color: #bf8700; }
.state-card-fast_burn { border-left-color: #cf222e; background: #fffafa; }
.card > header { display: flex; flex-wrap: wrap; gap: 0.5rem 0.75rem; align-items: baseline; }
.card h3 { margin: 0; font-size: 1.15rem; }
.stats { display: flex; flex-wrap: wrap; gap: 0.5rem 2rem; margin: 0.75rem 0; }
.stats dt { color: var(--muted); font-size: 0.85rem; }
.stats dd { margin: 0; font-variant-numeric: tabular-nums; white-space: nowrap; }
.stats div:first-child { flex-basis: 100%; }
.stats div:first-child dd { white-space: normal; }
.outcomes { list-style: none; margin: 0; padding: 0; display: flex; flex-wrap: wrap; gap: 0.1rem 1rem; }
.scroll { overflow-x: auto; }
.slos th[scope=row] { white-space: nowrap; }
.charts { display: grid; grid-template-columns: repeat(auto-fit, minmax(16rem, 1fr)); gap: 0.5rem 1rem; margin-top: 0.75rem; }
figure { margin: 0; }
figcaption { font-size: 0.9rem; font-weight: 600; }
svg { width: 100%; max-width: 30rem; height: auto; display: block; }
.bar { fill: #0969da; }
.bar.over { fill: #cf222e; }
.baseline { stroke: #8c959f; stroke-width: 1; }
.threshold { stroke: #a40e26; stroke-width: 2; stroke-dasharray: 5 3; }
.threshold-label { fill: #a40e26; font-size: 11px; font-weight: 600; }
.axis { fill: #57606a; font-size: 10px; }
details { margin-top: 0.25rem; font-size: 0.9rem; }
summary { cursor: pointer; color: var(--accent); }
.buckets td { padding: 0.1rem 0.5rem; }
#gpus { margin: 0 0 1rem; overflow-wrap: anywhere; }
#gpus [data-value] { white-space: normal; }
footer { padding: 1rem 1.25rem; border-top: 1px solid var(--line); color: var(--muted); font-size: 0.9rem; }
.sr-only { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); white-space: nowrap; }
@container overview (max-width: 66rem) {${STACKED}}
@container card (max-width: 36rem) {${STACKED}}
${capacitySectionStyle(STACKED)}
@media (max-width: 44rem) {
  body { font-size: 14px; }
  .top, main { padding-left: 0.75rem; padding-right: 0.75rem; }
  .card { padding: 0.6rem 0.7rem; }
}
`;

const PAGE_STYLE = `${STYLE}${SHAPE_STYLE}`;

/** A CSP source naming one inline element by the SHA-256 of its text (CSP Level 3, section 8.4). */
function hashSource(text: string): string {
  return `'sha256-${createHash('sha256').update(text, 'utf8').digest('base64')}'`;
}

/**
 * The page's Content-Security-Policy: its own stylesheet and two scripts, named by their hashes,
 * and fetches to its own origin (status.json, profile). Nothing else runs: a script element that an
 * escaping slip let into the page, or one a script made, is refused by the browser, where
 * `'unsafe-inline'` ran it (the hostile review ran one in Chromium). The report's own
 * `<script type="application/json">` is data, never run.
 */
export const STATUS_PAGE_CSP = [
  "default-src 'none'",
  `style-src ${hashSource(PAGE_STYLE)}`,
  `script-src ${hashSource(STATUS_PAGE_SCRIPT)} ${hashSource(SHAPE_SCRIPT)}`,
  "connect-src 'self'",
  "img-src 'self' data:",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

/**
 * The status page (`GET /` and `GET /status` on the admin listener): one self-contained HTML
 * document, no external asset of any kind, so it works offline and through a port-forward. The
 * first report is embedded, so the page shows numbers before its script has fetched anything.
 */
export function statusPageHtml(report: StatusReport): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>tokentap status</title>
<link rel="icon" href="data:,">
<style>${PAGE_STYLE}</style>
</head>
<body>
<header class="top">
  <div class="brand"><h1>tokentap</h1><span id="version" class="muted"></span></div>
  <dl class="facts">
    <div><dt>Upstream</dt><dd id="upstream"></dd></div>
    <div><dt>Uptime</dt><dd id="uptime"></dd></div>
    <div><dt>Updated</dt><dd id="updated"></dd></div>
  </dl>
  <button id="pause" type="button" aria-pressed="false">Pause updates</button>
</header>
<main>
  <noscript><p class="problem">This page updates itself with JavaScript; without it, read <a href="status.json">status.json</a>.</p></noscript>
  <p id="notice" class="demo-notice" role="note" hidden></p>
  <p id="problem" class="problem" role="status" hidden></p>
  <p id="gpus" hidden></p>
  <section class="overview" aria-labelledby="overview-heading">
    <h2 id="overview-heading">Workloads at a glance</h2>
    <div class="scroll" role="region" tabindex="0" aria-label="Workloads at a glance">
      <table class="stack">
        <thead><tr id="overview-head"></tr></thead>
        <tbody id="overview-body"></tbody>
      </table>
    </div>
    <p id="windows" class="note"></p>
  </section>
  <div id="workloads" class="cards"></div>
  ${CAPACITY_SECTION_HTML}
</main>
<footer>Raw numbers: <a href="metrics">/metrics</a> (Prometheus) and <a href="status.json">/status.json</a> (this page's data). Readiness: <a href="readyz">/readyz</a>.</footer>
<script id="initial-report" type="application/json">${jsonForScript(report)}</script>
<script>${STATUS_PAGE_SCRIPT}</script>
<script>${SHAPE_SCRIPT}</script>
</body>
</html>
`;
}

/**
 * JSON safe inside a <script> element: `<` escaped so no `</script>` or `<!--` in a workload name
 * can end or change the element (HTML Living Standard, 4.12.1.3 "Restrictions for contents of
 * script elements"); U+2028/2029 escaped for old parsers.
 */
function jsonForScript(value: unknown): string {
  return JSON.stringify(value).replace(/</g, '\\u003c').replace(/\u2028/g, '\\u2028').replace(/\u2029/g, '\\u2029');
}
