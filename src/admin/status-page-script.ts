/**
 * The status page's script, as plain browser JavaScript (ES2020, no modules, no libraries, no build
 * step): it renders the report embedded in the page at once, then asks `status.json` (relative, so
 * the page also works behind a path prefix or `kubectl port-forward`) every `refresh_s` seconds and
 * updates the page in place. Elements that take focus (links, <details>, the pause button) are
 * created once and kept, so a refresh never moves keyboard focus. Text goes in through textContent
 * only: workload names come from the config file, and nothing is parsed as HTML.
 *
 * Every number shown carries its raw value in `data-value`, which the browser test compares with
 * /status.json and /metrics.
 */
import { CAPACITY_SECTION_SCRIPT } from './status-page-capacity.js';

export const STATUS_PAGE_SCRIPT = String.raw`
(function () {
  'use strict';
  var SVG = 'http://www.w3.org/2000/svg';
  var STATE_TEXT = { ok: 'Within budget', burning: 'Burning budget', fast_burn: 'Fast burn', no_data: 'No events', no_slo: 'No SLO' };
  var STATE_ICON = { ok: '\u2714', burning: '\u25B2', fast_burn: '\u2716', no_data: '\u2013', no_slo: '\u2013' };
  var SLO_NAME = { ttft: 'TTFT', itl: 'ITL', e2e: 'e2e' };
  var paused = false;
  var timer = null;
  var rows = new Map();
  var cards = new Map();

  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    if (attrs) for (var key in attrs) node.setAttribute(key, attrs[key]);
    (children || []).forEach(function (child) { node.append(child); });
    return node;
  }
  function svgEl(tag, attrs, text) {
    var node = document.createElementNS(SVG, tag);
    for (var key in attrs) node.setAttribute(key, String(attrs[key]));
    if (text !== undefined) node.textContent = text;
    return node;
  }
  /** A number for display, with its raw value kept for tests and tools. */
  function num(text, value, field) {
    var node = el('span', { 'data-value': value === null ? 'null' : String(value) }, [text]);
    if (field) node.setAttribute('data-field', field);
    return node;
  }

  function duration(s) {
    if (s === null || s === undefined) return '\u2013';
    if (s < 0.001) return (s * 1000).toFixed(2) + ' ms';
    if (s < 0.01) return (s * 1000).toFixed(1) + ' ms';
    if (s < 1) return (s * 1000).toFixed(0) + ' ms';
    if (s < 100) return s.toFixed(2) + ' s';
    return s.toFixed(0) + ' s';
  }
  function percent(r) {
    if (r === null || r === undefined) return '\u2013';
    if (r === 1) return '100 %';
    return (r * 100).toFixed(1) + ' %';
  }
  /** Decimals that show an objective as configured (99.0 %, 99.95 %): one at least, four at most. */
  function objectiveDecimals(o) {
    var decimals = 1;
    while (decimals < 4 && Math.abs(Number((o * 100).toFixed(decimals)) - o * 100) > 1e-9) decimals++;
    return decimals;
  }
  function objectivePercent(o) {
    return (o * 100).toFixed(objectiveDecimals(o)) + ' %';
  }
  /**
   * A share of good events or of budget left, rounded down to the objective's decimals: one below
   * the objective never reads as it (98.96 % of a 99 % objective is 98.9 %), and only all good
   * reads 100 %.
   */
  function goodPercent(r, objective) {
    if (r === null || r === undefined) return '\u2013';
    if (r === 1) return '100 %';
    var decimals = objective === null || objective === undefined ? 1 : objectiveDecimals(objective);
    var scale = Math.pow(10, decimals);
    // The small term keeps a share exact in decimal (0.29) from flooring a step low.
    return (Math.floor(r * 100 * scale + 1e-6) / scale).toFixed(decimals) + ' %';
  }
  /** A share of errors: a few in many thousands still reads as more than none. */
  function errorPercent(r) {
    if (r !== null && r !== undefined && r > 0 && r < 0.0005) return '< 0.1 %';
    return percent(r);
  }
  /** Requests a second: two significant digits below 0.01 (a pod of 15-minute streams sustains 0.0011/s), else two decimals at most. */
  function rate(n) {
    return (n > 0 && n < 0.01 ? n.toPrecision(2) : n < 10 ? n.toFixed(2) : n < 100 ? n.toFixed(1) : n.toFixed(0)) + '/s';
  }
  function burn(b) {
    if (b === null) return '\u2013';
    return '\u00D7' + (b === 0 ? '0' : b < 10 ? b.toFixed(2) : b.toFixed(1));
  }
  /** Budget left; below zero the budget is spent, and how far beyond is what the burn rate says. */
  function budget(r) {
    return r !== null && r < 0 ? 'overspent' : goodPercent(r, null);
  }
  function span(s) {
    s = Math.floor(s);
    if (s < 120) return s + ' s';
    if (s < 7200) return Math.floor(s / 60) + ' min';
    if (s < 172800) return Math.floor(s / 3600) + ' h ' + Math.floor((s % 3600) / 60) + ' min';
    return Math.floor(s / 86400) + ' d ' + Math.floor((s % 86400) / 3600) + ' h';
  }
  function pad(n) {
    return (n < 10 ? '0' : '') + n;
  }
  /** Local wall-clock time with its UTC offset, so a time read out loud or pasted in a ticket is unambiguous. */
  function clockTime(iso) {
    var d = new Date(iso);
    var offset = -d.getTimezoneOffset();
    var zone = 'UTC' + (offset < 0 ? '\u2212' : '+') + pad(Math.floor(Math.abs(offset) / 60)) + ':' + pad(Math.abs(offset) % 60);
    return pad(d.getHours()) + ':' + pad(d.getMinutes()) + ':' + pad(d.getSeconds()) + ' ' + zone;
  }
  function gib(bytes) {
    return bytes === null ? '?' : (bytes / 1073741824).toFixed(1) + ' GiB';
  }
  function total(record) {
    var sum = 0;
    for (var key in record) sum += record[key];
    return sum;
  }
  function badge(state) {
    return el('span', { 'class': 'badge state-' + state, 'data-state': state }, [STATE_ICON[state] + ' ' + STATE_TEXT[state]]);
  }
  /** A table cell whose column name shows beside its value when the table is stacked (narrow containers). */
  function cell(label, content) {
    return el('td', {}, [el('span', { 'class': 'cell-label', 'aria-hidden': 'true' }, [label]), el('span', { 'class': 'cell-value' }, content)]);
  }
  /** p99 against the budget: "248 ms of 300 ms", flagged when over. */
  function againstBudget(p99, threshold, field) {
    var parts = [num(duration(p99), p99, field)];
    if (threshold !== null && threshold !== undefined) {
      parts.push(' ', el('span', { 'class': 'muted of-budget' }, ['of ', num(duration(threshold), threshold, 'threshold')]));
      if (p99 !== null && p99 > threshold) parts.push(' ', el('span', { 'class': 'over-text' }, ['over']));
    }
    return parts;
  }
  /**
   * A small line over the last hour (one point a minute, the report's trend, then the value now):
   * an image with its numbers in words. The dashed line is the budget (or a burn rate of 1).
   */
  function sparkline(points, now, limit, what, format) {
    var values = points.map(function (p) { return { ago: p.ago_s, v: p.value }; });
    values.push({ ago: 0, v: now });
    var known = values.filter(function (p) { return p.v !== null && p.v !== undefined; });
    // The line spans the history there is (at least 10 minutes, at most the hour), so a young process's few points are not squeezed into the right edge.
    var oldest = values.reduce(function (a, p) { return Math.max(a, p.ago); }, 0);
    var W = 120, H = 30, inset = 3, span = Math.min(3600, Math.max(600, Math.ceil(oldest / 60) * 60));
    var label = what + (span >= 3600 ? ', last hour: ' : ', last ' + span / 60 + ' min: ');
    if (known.length < 2) label += 'not enough points yet (one a minute)';
    else {
      var high = Math.max.apply(null, known.map(function (p) { return p.v; }));
      label += known.length + ' points, from ' + format(known[0].v) + ' to ' + format(known[known.length - 1].v) + ', highest ' + format(high);
    }
    var svg = svgEl('svg', { viewBox: '0 0 ' + W + ' ' + H, 'class': 'spark', role: 'img', 'aria-label': label, 'data-points': known.length });
    var top = Math.max(limit === null ? 0 : limit * 1.15, Math.max.apply(null, known.map(function (p) { return p.v; }).concat([0]))) || 1;
    var y = function (v) { return (H - inset - ((H - 2 * inset) * Math.min(v, top)) / top).toFixed(1); };
    var x = function (ago) { return (inset + ((W - 2 * inset) * (span - Math.min(ago, span))) / span).toFixed(1); };
    svg.append(svgEl('line', { x1: inset, x2: W - inset, y1: H - inset, y2: H - inset, 'class': 'baseline' }));
    if (limit !== null) svg.append(svgEl('line', { x1: inset, x2: W - inset, y1: y(limit), y2: y(limit), 'class': 'spark-limit' }));
    if (known.length >= 2) {
      svg.append(svgEl('polyline', { points: known.map(function (p) { return x(p.ago) + ',' + y(p.v); }).join(' '), 'class': 'spark-line' }));
    }
    if (known.length >= 1) {
      var last = known[known.length - 1];
      svg.append(svgEl('circle', { cx: x(last.ago), cy: y(last.v), r: 2.5, 'class': limit !== null && last.v > limit ? 'spark-dot over' : 'spark-dot' }));
    }
    return svg;
  }
  function trendOf(w, key) {
    return w.trend.map(function (p) { return { ago_s: p.ago_s, value: p[key] }; });
  }
  function ttftThreshold(w) {
    return w.latency.ttft.threshold_s;
  }
  function worstBurn(workload) {
    var worst = null;
    workload.slos.forEach(function (slo) {
      if (slo.window.burn_rate !== null && (worst === null || slo.window.burn_rate > worst)) worst = slo.window.burn_rate;
    });
    return worst;
  }

  function renderHeader(report) {
    document.getElementById('version').textContent = 'v' + report.version;
    var up = document.getElementById('upstream');
    up.replaceChildren(
      el('code', {}, [report.upstream.url]), ' ',
      el('span', { 'class': 'badge ' + (report.upstream.ready ? 'state-ok' : 'state-fast_burn'), 'data-field': 'upstream-ready', 'data-value': String(report.upstream.ready) },
        [report.upstream.ready ? '\u2714 ready' : '\u2716 not ready']),
      ' ', el('span', { 'class': 'muted' }, ['(' + report.upstream.detail + ')']));
    document.getElementById('uptime').replaceChildren(num(span(report.uptime_s), report.uptime_s, 'uptime'));
    var updated = document.getElementById('updated');
    updated.replaceChildren(el('time', { datetime: report.generated_at, title: report.generated_at }, [clockTime(report.generated_at)]), paused ? ' (paused)' : '');
    updated.setAttribute('data-generated-at', report.generated_at);
    var notice = document.getElementById('notice');
    notice.hidden = !report.notice;
    notice.textContent = report.notice || '';
    document.getElementById('windows').textContent =
      'Rates over the last ' + span(report.windows.rate_s) + '; SLO figures and histograms over the last ' + span(report.windows.slo_s) +
      '. Burning: the error budget goes faster than it lasts (burn rate above \u00D71); fast burn: at or above \u00D7' + report.fast_burn_factor +
      ', the page alert\u2019s rate.';
    var gpus = document.getElementById('gpus');
    if (report.gpus === null) {
      gpus.hidden = true;
    } else {
      gpus.hidden = false;
      gpus.replaceChildren(el('strong', {}, ['GPU memory: ']),
        report.gpus.length === 0 ? 'no reading of this pod\u2019s GPUs yet' : '');
      report.gpus.forEach(function (gpu, i) {
        var name = 'GPU ' + gpu.gpu + (gpu.gpu_instance === null ? '' : ' MIG ' + gpu.gpu_instance + (gpu.gpu_profile ? ' (' + gpu.gpu_profile + ')' : ''));
        var used = gpu.memory_used_bytes, all = gpu.memory_total_bytes;
        var text = ': ' + gib(used) + ' of ' + gib(all) + (used !== null && all ? ' (' + percent(used / all) + ')' : '') +
          (gpu.utilization_ratio === null ? '' : ', busy ' + percent(gpu.utilization_ratio));
        // The labels are the DCGM exporter's text: isolated, so a bidi control in one (U+202E) cannot
        // reverse the figures after it.
        var figure = num('', used, 'gpu-memory-used');
        figure.replaceChildren(el('bdi', {}, [name]), text);
        gpus.append((i > 0 ? ' \u00B7 ' : ''), figure);
      });
    }
  }

  var SLO_HEADS = ['SLO', 'p99 against budget, 5 min', 'Good events, 5 min', 'Budget left, 5 min', 'Burn, 5 min'];
  var LATENCY_HEADS = ['Latency', 'p99, 5 min', 'p50, 5 min'];
  var OVERVIEW_COLUMNS = ['SLO state', 'Requests/s', 'Errors, 5 min', 'p99 TTFT, 5 min', 'Goodput, 5 min', 'Worst burn, 5 min', 'p99 TTFT, last hour', 'In flight'];

  function renderOverview(report) {
    var head = document.getElementById('overview-head');
    if (head.childElementCount === 0) {
      head.append(el('th', { scope: 'col' }, ['Workload']));
      OVERVIEW_COLUMNS.forEach(function (h) { head.append(el('th', { scope: 'col' }, [h])); });
    }
    var body = document.getElementById('overview-body');
    report.workloads.forEach(function (w) {
      var row = rows.get(w.name);
      if (!row) {
        var link = el('a', { href: '#workload-' + encodeURIComponent(w.name) }, [w.name]);
        row = { tr: el('tr', { 'data-workload': w.name }, [el('th', { scope: 'row' }, [link])]) };
        rows.set(w.name, row);
        body.append(row.tr);
      }
      row.tr.className = 'state-row-' + w.state;
      var requests = total(w.requests_per_s);
      var b = worstBurn(w);
      var threshold = ttftThreshold(w);
      var cells = [
        cell(OVERVIEW_COLUMNS[0], [badge(w.state)]),
        cell(OVERVIEW_COLUMNS[1], [num(rate(requests), requests, 'requests-per-s')]),
        cell(OVERVIEW_COLUMNS[2], [num(errorPercent(w.error_ratio), w.error_ratio, 'error-ratio')]),
        cell(OVERVIEW_COLUMNS[3], againstBudget(w.latency.ttft.p99_s, threshold, 'ttft-p99')),
        cell(OVERVIEW_COLUMNS[4], [w.goodput_ratio === null ? el('span', { 'class': 'muted', 'data-field': 'goodput-ratio', 'data-value': 'null' }, [w.objective === null ? 'no SLO' : '\u2013'])
          : num(goodPercent(w.goodput_ratio, w.objective), w.goodput_ratio, 'goodput-ratio')]),
        cell(OVERVIEW_COLUMNS[5], [num(burn(b), b, 'worst-burn')]),
        cell(OVERVIEW_COLUMNS[6], [sparkline(trendOf(w, 'ttft_p99_s'), w.latency.ttft.p99_s, threshold, 'p99 TTFT of ' + w.name, duration)]),
        cell(OVERVIEW_COLUMNS[7], [num(String(w.in_flight), w.in_flight, 'in-flight')]),
      ];
      row.tr.replaceChildren.apply(row.tr, [row.tr.firstChild].concat(cells));
    });
  }

  function card(w) {
    var existing = cards.get(w.name);
    if (existing) return existing;
    var id = 'workload-' + encodeURIComponent(w.name);
    var parts = {
      badge: el('span'),
      objective: el('span', { 'class': 'muted' }),
      stats: el('dl', { 'class': 'stats' }),
      slos: el('tbody'),
      head: el('tr'),
      charts: {},
    };
    var sloTable = el('div', { 'class': 'scroll', role: 'region', tabindex: '0', 'aria-label': 'SLOs of ' + w.name }, [
      el('table', { 'class': 'slos stack' }, [
        el('caption', { 'class': 'sr-only' }, ['SLOs of ' + w.name + ': latency against budget, share of good events and error budget']),
        el('thead', {}, [parts.head]),
        parts.slos,
      ]),
    ]);
    var charts = el('div', { 'class': 'charts' });
    ['ttft', 'itl'].forEach(function (key) {
      var holder = el('div', { 'class': 'chart' });
      var caption = el('figcaption');
      var buckets = el('tbody');
      var details = el('details', {}, [
        el('summary', {}, [SLO_NAME[key] + ' buckets as a table', el('span', { 'class': 'sr-only' }, [' (' + w.name + ')'])]),
        el('div', { 'class': 'scroll' }, [el('table', { 'class': 'buckets' }, [
          el('thead', {}, [el('tr', {}, [el('th', { scope: 'col' }, ['Latency up to']), el('th', { scope: 'col' }, ['Samples, last 5 min'])])]),
          buckets,
        ])]),
      ]);
      charts.append(el('figure', { 'data-chart': key }, [caption, holder, details]));
      parts.charts[key] = { caption: caption, holder: holder, buckets: buckets };
    });
    parts.trend = el('div', { 'class': 'trend-lines' });
    charts.append(el('figure', { 'data-chart': 'trend' }, [el('figcaption', {}, ['Last hour, a point a minute']), parts.trend]));
    var root = el('article', { 'class': 'card', id: id, 'data-workload': w.name, 'aria-labelledby': id + '-h' }, [
      el('header', {}, [el('h3', { id: id + '-h' }, [w.name]), parts.badge, parts.objective]),
      parts.stats,
      sloTable,
      charts,
    ]);
    parts.root = root;
    cards.set(w.name, parts);
    document.getElementById('workloads').append(root);
    return parts;
  }

  function stat(label, content) {
    return el('div', {}, [el('dt', {}, [label]), el('dd', {}, content)]);
  }

  function renderCard(w) {
    var parts = card(w);
    parts.root.setAttribute('data-state', w.state);
    parts.root.className = 'card state-card-' + w.state;
    parts.badge.replaceChildren(badge(w.state));
    parts.objective.textContent = w.objective === null ? 'measured, no SLO' : 'objective ' + objectivePercent(w.objective) + ' good';
    var outcomes = [];
    Object.keys(w.requests_total).forEach(function (outcome) {
      if (w.requests_total[outcome] === 0 && w.requests_per_s[outcome] === 0) return;
      outcomes.push(el('li', { 'data-outcome': outcome }, [
        outcome.replace(/_/g, ' ') + ' ', num(rate(w.requests_per_s[outcome]), w.requests_per_s[outcome], 'outcome-rate'),
        ' ', el('span', { 'class': 'muted' }, ['(', num(String(w.requests_total[outcome]), w.requests_total[outcome], 'outcome-total'), ' total)']),
      ]));
    });
    parts.stats.replaceChildren(
      stat('Requests by outcome', [outcomes.length === 0 ? 'none yet' : el('ul', { 'class': 'outcomes' }, outcomes)]),
      stat('Tokens/s', [num(rate(w.tokens_per_s.output), w.tokens_per_s.output, 'output-tokens-per-s'), ' out \u00B7 ',
        num(rate(w.tokens_per_s.input), w.tokens_per_s.input, 'input-tokens-per-s'), ' in']),
      stat('In flight', [num(String(w.in_flight), w.in_flight, 'in-flight')]),
      stat('Goodput, 5 min', w.goodput_ratio === null
        ? [el('span', { 'class': 'muted', 'data-field': 'goodput', 'data-value': 'null' }, [w.objective === null ? 'no SLO' : 'no requests yet'])]
        : [num(goodPercent(w.goodput_ratio, w.objective), w.goodput_ratio, 'goodput'), el('span', { 'class': 'muted' }, [' met every SLO \u00B7 ', num(rate(w.goodput_per_s), w.goodput_per_s, 'goodput-per-s')])]),
      stat('Errors, 5 min', [num(errorPercent(w.error_ratio), w.error_ratio, 'error-ratio')]));

    var sloRows = [];
    w.slos.forEach(function (slo) {
      var lat = w.latency[slo.slo];
      sloRows.push(el('tr', { 'data-slo': slo.slo, 'class': 'state-row-' + slo.state }, [
        el('th', { scope: 'row' }, [el('span', { 'class': 'slo-name' }, [SLO_NAME[slo.slo]]), ' ', badge(slo.state)]),
        cell(SLO_HEADS[1], [el('span', { 'class': 'line' }, againstBudget(lat.p99_s, slo.threshold_s, 'p99')),
          el('span', { 'class': 'line muted' }, ['p50 ', num(duration(lat.p50_s), lat.p50_s, 'p50')])]),
        cell(SLO_HEADS[2], [el('span', { 'class': 'line' }, [num(goodPercent(slo.window.attainment, w.objective), slo.window.attainment, 'attainment-window')]),
          el('span', { 'class': 'line muted' }, ['life ', num(goodPercent(slo.lifetime.attainment, w.objective), slo.lifetime.attainment, 'attainment-lifetime')])]),
        cell(SLO_HEADS[3], [el('span', { 'class': 'line' }, [num(budget(slo.window.error_budget_remaining), slo.window.error_budget_remaining, 'budget-window')]),
          el('span', { 'class': 'line muted' }, ['life ', num(budget(slo.lifetime.error_budget_remaining), slo.lifetime.error_budget_remaining, 'budget-lifetime')])]),
        cell(SLO_HEADS[4], [num(burn(slo.window.burn_rate), slo.window.burn_rate, 'burn-window')]),
      ]));
    });
    if (sloRows.length === 0) {
      ['ttft', 'itl', 'e2e'].forEach(function (key) {
        var lat = w.latency[key];
        sloRows.push(el('tr', { 'data-slo': key }, [
          el('th', { scope: 'row' }, [SLO_NAME[key]]),
          cell(LATENCY_HEADS[1], [num(duration(lat.p99_s), lat.p99_s, 'p99')]),
          cell(LATENCY_HEADS[2], [num(duration(lat.p50_s), lat.p50_s, 'p50')]),
        ]));
      });
    }
    var heads = w.slos.length > 0 ? SLO_HEADS : LATENCY_HEADS;
    if (parts.head.childElementCount !== heads.length) {
      parts.head.replaceChildren.apply(parts.head, heads.map(function (h) { return el('th', { scope: 'col' }, [h]); }));
    }
    parts.slos.replaceChildren.apply(parts.slos, sloRows);
    ['ttft', 'itl'].forEach(function (key) { renderChart(parts.charts[key], key, w.latency[key], w.name); });
    var b = worstBurn(w);
    parts.trend.replaceChildren(
      el('div', { 'class': 'trend-line' }, [el('span', { 'class': 'trend-name' }, ['p99 TTFT']),
        sparkline(trendOf(w, 'ttft_p99_s'), w.latency.ttft.p99_s, ttftThreshold(w), 'p99 TTFT of ' + w.name, duration), ' ', num(duration(w.latency.ttft.p99_s), w.latency.ttft.p99_s)]),
      el('div', { 'class': 'trend-line' }, [el('span', { 'class': 'trend-name' }, ['Worst burn']),
        sparkline(trendOf(w, 'worst_burn_rate'), b, w.objective === null ? null : 1, 'Worst burn rate of ' + w.name, burn), ' ', num(burn(b), b)]),
      el('div', { 'class': 'trend-line' }, [el('span', { 'class': 'trend-name' }, ['Errors']),
        sparkline(trendOf(w, 'error_ratio'), w.error_ratio, null, 'Error ratio of ' + w.name, errorPercent), ' ', num(errorPercent(w.error_ratio), w.error_ratio)]));
  }

  /** Bars per bucket (equal widths: the buckets are roughly logarithmic), the SLO threshold as a dashed line. */
  function renderChart(chart, key, lat, workload) {
    var name = SLO_NAME[key];
    var counts = lat.counts, bounds = lat.boundaries_s;
    var thresholdIndex = lat.threshold_s === null ? -1 : bounds.indexOf(lat.threshold_s);
    var first = -1, last = -1;
    counts.forEach(function (c, i) { if (c > 0) { if (first < 0) first = i; last = i; } });
    var over = 0;
    counts.forEach(function (c, i) { if (thresholdIndex >= 0 && i > thresholdIndex) over += c; });
    chart.caption.textContent = name + (key === 'itl' ? ' per token' : '') + ', last 5 min' + (lat.threshold_s === null ? '' : ' \u2014 budget ' + duration(lat.threshold_s));
    var label = name + ' histogram of ' + workload + ': ' + lat.samples + ' samples in the last 5 minutes';
    if (lat.samples > 0) label += ', p50 ' + duration(lat.p50_s) + ', p99 ' + duration(lat.p99_s);
    if (thresholdIndex >= 0 && lat.samples > 0) label += ', ' + goodPercent(1 - over / lat.samples, null) + ' within the ' + duration(lat.threshold_s) + ' budget';
    var W = 320, H = 142, top = 22, bottom = 106, left = 4, right = 316;
    var svg = svgEl('svg', { viewBox: '0 0 ' + W + ' ' + H, role: 'img', 'aria-label': label, 'data-samples': lat.samples });
    if (lat.samples === 0) {
      svg.append(svgEl('text', { x: W / 2, y: H / 2, 'text-anchor': 'middle', 'class': 'axis' }, 'no samples in the last 5 minutes'));
    } else {
      var lo = Math.max(0, Math.min(first, thresholdIndex >= 0 ? thresholdIndex : first) - 1);
      var hi = Math.min(counts.length - 1, Math.max(last, thresholdIndex >= 0 ? thresholdIndex + 1 : last) + 1);
      var n = hi - lo + 1, step = (right - left) / n, max = 0;
      for (var i = lo; i <= hi; i++) max = Math.max(max, counts[i]);
      for (var j = lo; j <= hi; j++) {
        var height = max === 0 ? 0 : ((bottom - top) * counts[j]) / max;
        var x = left + (j - lo) * step;
        var bar = svgEl('rect', { x: (x + 1).toFixed(1), y: (bottom - height).toFixed(1), width: Math.max(1, step - 2).toFixed(1), height: height.toFixed(1),
          'class': thresholdIndex >= 0 && j > thresholdIndex ? 'bar over' : 'bar' });
        bar.append(svgEl('title', {}, (j < bounds.length ? '\u2264 ' + duration(bounds[j]) : '> ' + duration(bounds[bounds.length - 1])) + ': ' + counts[j]));
        svg.append(bar);
      }
      svg.append(svgEl('line', { x1: left, x2: right, y1: bottom, y2: bottom, 'class': 'baseline' }));
      // Bucket bounds under the bars, every few so that they do not collide.
      var every = Math.max(1, Math.ceil(n / 5));
      // A label near either edge is anchored at its own end, so it stays inside the image.
      for (var k = lo; k <= hi && k < bounds.length; k += every) {
        var lx = left + (k - lo + 1) * step;
        var anchor = lx > W - 24 ? 'end' : lx < 24 ? 'start' : 'middle';
        svg.append(svgEl('text', { x: (anchor === 'end' ? Math.min(lx, W - 1) : lx).toFixed(1), y: bottom + 14, 'text-anchor': anchor, 'class': 'axis' }, duration(bounds[k])));
      }
      if (thresholdIndex >= lo && thresholdIndex <= hi) {
        var tx = left + (thresholdIndex - lo + 1) * step;
        svg.append(svgEl('line', { x1: tx.toFixed(1), x2: tx.toFixed(1), y1: top - 8, y2: bottom, 'class': 'threshold' }));
        // Right of the line when it fits ("budget 2.00 s" is about 80 units of 11 px bold), else left of it.
        var leftOfLine = tx > W - 100;
        svg.append(svgEl('text', { x: (tx + (leftOfLine ? -4 : 4)).toFixed(1), 'text-anchor': leftOfLine ? 'end' : 'start', 'class': 'threshold-label', y: 11 },
          'budget ' + duration(lat.threshold_s)));
      }
      svg.append(svgEl('text', { x: left, y: H - 2, 'class': 'axis' }, 'tallest bar: ' + max + ' samples'));
    }
    chart.holder.replaceChildren(svg);
    var bucketRows = [];
    counts.forEach(function (c, i) {
      if (c === 0) return;
      bucketRows.push(el('tr', {}, [el('td', {}, [i < bounds.length ? duration(bounds[i]) : 'above ' + duration(bounds[bounds.length - 1])]),
        el('td', {}, [num(String(c), c, 'bucket-count')])]));
    });
    if (bucketRows.length === 0) bucketRows.push(el('tr', {}, [el('td', { colspan: '2' }, ['no samples'])]));
    chart.buckets.replaceChildren.apply(chart.buckets, bucketRows);
  }

${CAPACITY_SECTION_SCRIPT}
  function render(report) {
    renderHeader(report);
    renderOverview(report);
    renderCapacity(report);
    report.workloads.forEach(renderCard);
    document.body.setAttribute('data-generated-at', report.generated_at);
  }

  function schedule(seconds) {
    clearTimeout(timer);
    if (!paused) timer = setTimeout(refresh, seconds * 1000);
  }

  function refresh() {
    fetch('status.json', { cache: 'no-store', headers: { accept: 'application/json' } })
      .then(function (response) {
        if (!response.ok) throw new Error('HTTP ' + response.status);
        return response.json();
      })
      .then(function (report) {
        document.getElementById('problem').hidden = true;
        render(report);
        schedule(report.refresh_s);
      })
      .catch(function (error) {
        var problem = document.getElementById('problem');
        problem.hidden = false;
        problem.textContent = 'Could not update from status.json (' + error.message + '); trying again.';
        schedule(5);
      });
  }

  var pause = document.getElementById('pause');
  pause.addEventListener('click', function () {
    paused = !paused;
    pause.setAttribute('aria-pressed', String(paused));
    pause.textContent = paused ? 'Resume updates' : 'Pause updates';
    if (paused) clearTimeout(timer);
    else refresh();
  });

  var initial = JSON.parse(document.getElementById('initial-report').textContent);
  render(initial);
  schedule(initial.refresh_s);
})();
`;
