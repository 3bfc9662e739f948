/**
 * The status page's "Capacity" section (docs/status-page.md, docs/capacity-and-cost.md): this pod's
 * capacity at SLO, headroom and pods needed, from `capacity` of /status.json (status-capacity.ts),
 * and its cost per request and per token, busy share and cached input, from `cost` (status-cost.ts).
 * The markup goes into the page; the script is part of the page's script (status-page-script.ts),
 * sharing its helpers (`el`, `num`, `rate`, `percent`), and is called from its `render`. A figure the
 * report has no value for is shown with the report's reason, never as a bare dash.
 */

/**
 * Its own container, stacked like the overview when narrower than its columns need; reasons wrap
 * (a reason is a sentence, unlike the page's numbers). `stacked` is the page's stacked-table rules.
 */
export function capacitySectionStyle(stacked: string): string {
  return `
.capacity { margin: 1.25rem 0; container: capacity / inline-size; }
.capacity th, .capacity td, .capacity dd, .capacity [data-value] { white-space: normal; }
.capacity .stats div:first-child { flex-basis: auto; }
.capacity h3 { margin: 1.25rem 0 0.5rem; font-size: 1.05rem; }
@container capacity (max-width: 66rem) {${stacked}}
`;
}

export const CAPACITY_SECTION_HTML = `<section class="capacity" id="capacity" aria-labelledby="capacity-heading">
    <h2 id="capacity-heading">Capacity at SLO (this pod)</h2>
    <dl class="stats" id="capacity-figures"></dl>
    <div class="scroll" role="region" tabindex="0" aria-label="Capacity per workload">
      <table class="stack">
        <thead><tr><th scope="col">Workload</th><th scope="col">Capacity</th><th scope="col">Knee</th><th scope="col">Sustainable</th><th scope="col">Peak</th><th scope="col">Headroom</th><th scope="col">Pods needed at peak</th></tr></thead>
        <tbody id="capacity-body"></tbody>
      </table>
    </div>
    <h3 id="cost-heading">Cost and prefix cache (this pod, last <span id="cost-window"></span>)</h3>
    <dl class="stats" id="cost-figures"></dl>
    <div class="scroll" role="region" tabindex="0" aria-label="Cost per workload">
      <table class="stack">
        <thead><tr><th scope="col">Workload</th><th scope="col">Per request</th><th scope="col">Per 1M input tokens</th><th scope="col">Per 1M output tokens</th><th scope="col">Per request that met its SLOs</th><th scope="col">Requests with cached input</th><th scope="col">Mean cached share</th></tr></thead>
        <tbody id="cost-body"></tbody>
      </table>
    </div>
    <p class="note">Cost is the accelerator time each request was attributed (the pod's time shared equally among the requests in flight) at the configured price: usage counts only that time, allocation spreads the pod's idle time too, by each workload's share. Cached input is the server's own usage report.</p>
    <p class="note">Capacity is the upper bound of the highest in-flight band below the first band that broke an SLO, counting bands of at least <span id="capacity-min-samples"></span> requests; the fleet's figures are on the dashboard. How to read them: docs/capacity-and-cost.md.</p>
  </section>`;

export const CAPACITY_SECTION_SCRIPT = String.raw`
  /** A figure, or the report's reason it has none. */
  function figure(text, value, field, reason) {
    if (value === null || value === undefined) return el('span', { 'data-value': 'null', 'data-field': field, class: 'muted' }, [reason || 'not known yet']);
    return num(text, value, field);
  }
  function capacityText(f) {
    if (f.capacity_in_flight === null) return '';
    return (f.at_least ? 'at least ' : '') + f.capacity_in_flight + ' in flight (band ' + f.capacity_band + ')';
  }
  function podsText(n) {
    return n + (n === 1 ? ' pod' : ' pods');
  }
  function renderCapacity(report) {
    var c = report.capacity;
    if (!c) return;
    var mix = c.mix;
    document.getElementById('capacity-min-samples').textContent = String(c.min_samples_per_band);
    var planned = c.planned_peak_rps === null ? 'Pods needed at the planned peak' : 'Pods needed at the planned ' + rate(c.planned_peak_rps);
    var stats = [
      ['Capacity, every workload', figure(capacityText(mix), mix.capacity_in_flight, 'capacity-in-flight', mix.absent.capacity_in_flight)],
      ['Sustainable', figure(mix.sustainable_rps === null ? '' : rate(mix.sustainable_rps) + ' (Little\u2019s law, mean e2e ' + duration(mix.mean_e2e_s) + ')', mix.sustainable_rps, 'capacity-sustainable-rps', mix.absent.sustainable_rps)],
      ['Peak in flight since start', num(String(c.peak_in_flight), c.peak_in_flight, 'capacity-peak-in-flight')],
      ['Peak rate, last hour', figure(mix.peak_rps === null ? '' : rate(mix.peak_rps), mix.peak_rps, 'capacity-peak-rps', mix.absent.peak_rps)],
      ['Headroom', figure(mix.headroom === null ? '' : percent(mix.headroom) + (mix.at_least ? ' or more' : ''), mix.headroom, 'capacity-headroom', mix.absent.headroom)],
      ['Pods needed at the observed peak', figure(mix.pods_needed_observed === null ? '' : podsText(mix.pods_needed_observed) + ' for this pod\u2019s traffic', mix.pods_needed_observed, 'capacity-pods-observed', mix.absent.pods_needed_observed)],
      [planned, figure(c.pods_needed_planned === null ? '' : podsText(c.pods_needed_planned), c.pods_needed_planned, 'capacity-pods-planned', mix.absent.pods_needed_planned)],
    ];
    document.getElementById('capacity-figures').replaceChildren.apply(document.getElementById('capacity-figures'),
      stats.map(function (s) { return el('div', {}, [el('dt', {}, [s[0]]), el('dd', {}, [s[1]])]); }));
    var rows = c.workloads.map(function (w) {
      // The capacity cell gives the reason; the figures that follow from it say only that it is missing.
      var noCapacity = w.capacity_in_flight === null ? 'no capacity yet' : undefined;
      function cell(label, content) { return el('td', {}, [el('span', { class: 'cell-label' }, [label]), content]); }
      return el('tr', { 'data-workload': w.name }, [
        el('th', { scope: 'row' }, [w.name]),
        cell('Capacity', figure(capacityText(w), w.capacity_in_flight, 'capacity-in-flight', w.absent.capacity_in_flight)),
        cell('Knee', w.knee_band === null ? el('span', { class: 'muted', 'data-field': 'capacity-knee', 'data-value': 'null' }, ['no band broke yet']) : el('span', { 'data-field': 'capacity-knee', 'data-value': w.knee_band }, ['band ' + w.knee_band])),
        cell('Sustainable', figure(w.sustainable_rps === null ? '' : rate(w.sustainable_rps), w.sustainable_rps, 'capacity-sustainable-rps', noCapacity || w.absent.sustainable_rps)),
        cell('Peak', figure(w.peak_rps === null ? '' : rate(w.peak_rps), w.peak_rps, 'capacity-peak-rps', w.absent.peak_rps)),
        // A capacity of "at least N" makes its headroom a lower bound too, as for the mix above.
        cell('Headroom', figure(w.headroom === null ? '' : percent(w.headroom) + (w.at_least ? ' or more' : ''), w.headroom, 'capacity-headroom', noCapacity || w.absent.headroom)),
        cell('Pods needed at peak', figure(w.pods_needed_observed === null ? '' : String(w.pods_needed_observed), w.pods_needed_observed, 'capacity-pods-observed', noCapacity || w.absent.pods_needed_observed)),
      ]);
    });
    if (rows.length === 0) rows.push(el('tr', {}, [el('td', { colspan: '7' }, ['No workload has a TTFT or ITL SLO: capacity at SLO needs one to judge the bands by.'])]));
    var body = document.getElementById('capacity-body');
    body.replaceChildren.apply(body, rows);
    renderCost(report.cost);
  }

  /** A sum of money: three significant digits below 1, cents above. */
  function money(v, currency) {
    var text = v === 0 ? '0' : v >= 100 ? v.toFixed(0) : v >= 1 ? v.toFixed(2) : v.toPrecision(3);
    return text + ' ' + currency;
  }
  /** One figure of one basis ('usage' or 'allocation'), or its reason. */
  function costFigure(f, basis, key, field, currency) {
    var v = f[basis][key];
    return figure(v === null ? '' : money(v, currency) + (basis === 'allocation' ? ' allocated' : ' used'), v, field + '-' + basis, f.absent[basis + '.' + key]);
  }
  /** Usage above, allocation below: the two bases of one figure; one reason when both lack it for the same one. */
  function bases(f, key, field, currency) {
    var usage = costFigure(f, 'usage', key, field, currency);
    if (f.usage[key] === null && f.allocation[key] === null && f.absent['usage.' + key] === f.absent['allocation.' + key]) return usage;
    return el('span', { class: 'bases' }, [usage, el('br'), costFigure(f, 'allocation', key, field, currency)]);
  }
  function cachedFigures(f) {
    return [
      figure(f.requests_with_cached_input_ratio === null ? '' : percent(f.requests_with_cached_input_ratio), f.requests_with_cached_input_ratio, 'cost-cached-requests', f.absent.requests_with_cached_input_ratio),
      figure(f.mean_cached_input_ratio === null ? '' : percent(f.mean_cached_input_ratio), f.mean_cached_input_ratio, 'cost-cached-mean', f.absent.mean_cached_input_ratio),
    ];
  }
  function renderCost(cost) {
    if (!cost) return;
    var currency = cost.currency || '';
    document.getElementById('cost-window').textContent = cost.window_s >= 120 ? Math.round(cost.window_s / 60) + ' minutes' : duration(cost.window_s);
    var pod = cost.pod;
    var cached = cachedFigures(pod);
    var price = cost.configured
      ? figure(cost.price_per_hour === null || cost.accelerators === null ? '' : money(cost.price_per_hour, currency) + ' an accelerator-hour × ' + cost.accelerators, cost.accelerators, 'cost-accelerators', cost.accelerators === null ? 'the accelerator count is not known yet: DCGM has not answered' : undefined)
      : figure('', null, 'cost-accelerators', 'no cost: configured');
    var stats = [
      ['Busy share', figure(cost.busy_ratio === null ? '' : percent(cost.busy_ratio), cost.busy_ratio, 'cost-busy-ratio', cost.absent.busy_ratio)],
      ['Price', price],
      ['Per request', bases(pod, 'per_request', 'cost-per-request', currency)],
      ['Per 1M input tokens', bases(pod, 'per_million_input_tokens', 'cost-per-million-input', currency)],
      ['Per 1M output tokens', bases(pod, 'per_million_output_tokens', 'cost-per-million-output', currency)],
      ['Per request that met its SLOs', bases(pod, 'per_good_request', 'cost-per-good-request', currency)],
      ['Requests with cached input', cached[0]],
      ['Mean cached share of the input', cached[1]],
    ];
    var list = document.getElementById('cost-figures');
    list.replaceChildren.apply(list, stats.map(function (s) { return el('div', {}, [el('dt', {}, [s[0]]), el('dd', {}, [s[1]])]); }));
    var rows = cost.workloads.map(function (w) {
      function cell(label, content) { return el('td', {}, [el('span', { class: 'cell-label' }, [label]), content]); }
      var c = cachedFigures(w);
      return el('tr', { 'data-workload': w.name }, [
        el('th', { scope: 'row' }, [w.name]),
        cell('Per request', bases(w, 'per_request', 'cost-per-request', currency)),
        cell('Per 1M input tokens', bases(w, 'per_million_input_tokens', 'cost-per-million-input', currency)),
        cell('Per 1M output tokens', bases(w, 'per_million_output_tokens', 'cost-per-million-output', currency)),
        cell('Per request that met its SLOs', bases(w, 'per_good_request', 'cost-per-good-request', currency)),
        cell('Requests with cached input', c[0]),
        cell('Mean cached share', c[1]),
      ]);
    });
    var body = document.getElementById('cost-body');
    body.replaceChildren.apply(body, rows);
  }
`;
