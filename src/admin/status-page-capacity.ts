/**
 * The status page's "Capacity" section (docs/status-page.md, docs/capacity-and-cost.md): this pod's
 * capacity at SLO, headroom and pods needed, from `capacity` of /status.json (status-capacity.ts).
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
        cell('Headroom', figure(w.headroom === null ? '' : percent(w.headroom), w.headroom, 'capacity-headroom', noCapacity || w.absent.headroom)),
        cell('Pods needed at peak', figure(w.pods_needed_observed === null ? '' : String(w.pods_needed_observed), w.pods_needed_observed, 'capacity-pods-observed', noCapacity || w.absent.pods_needed_observed)),
      ]);
    });
    if (rows.length === 0) rows.push(el('tr', {}, [el('td', { colspan: '7' }, ['No workload has a TTFT or ITL SLO: capacity at SLO needs one to judge the bands by.'])]));
    var body = document.getElementById('capacity-body');
    body.replaceChildren.apply(body, rows);
  }
`;
