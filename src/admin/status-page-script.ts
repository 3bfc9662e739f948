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
  function rate(n) {
    return (n < 10 ? n.toFixed(2) : n < 100 ? n.toFixed(1) : n.toFixed(0)) + '/s';
  }
  function burn(b) {
    if (b === null) return '\u2013';
    return '\u00D7' + (b === 0 ? '0' : b < 10 ? b.toFixed(2) : b.toFixed(1));
  }
  /** Budget left; below zero the budget is spent, and how far beyond is what the burn rate says. */
  function budget(r) {
    return r !== null && r < 0 ? 'overspent' : percent(r);
  }
  function span(s) {
    s = Math.floor(s);
    if (s < 120) return s + ' s';
    if (s < 7200) return Math.floor(s / 60) + ' min';
    if (s < 172800) return Math.floor(s / 3600) + ' h ' + Math.floor((s % 3600) / 60) + ' min';
    return Math.floor(s / 86400) + ' d ' + Math.floor((s % 86400) / 3600) + ' h';
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
    updated.textContent = new Date(report.generated_at).toLocaleTimeString() + (paused ? ' (paused)' : '');
    updated.setAttribute('data-generated-at', report.generated_at);
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
        var text = name + ': ' + gib(used) + ' of ' + gib(all) + (used !== null && all ? ' (' + percent(used / all) + ')' : '') +
          (gpu.utilization_ratio === null ? '' : ', busy ' + percent(gpu.utilization_ratio));
        gpus.append((i > 0 ? ' \u00B7 ' : ''), num(text, used, 'gpu-memory-used'));
      });
    }
  }

  function renderOverview(report) {
    var body = document.getElementById('overview-body');
    report.workloads.forEach(function (w) {
      var row = rows.get(w.name);
      if (!row) {
        var link = el('a', { href: '#workload-' + encodeURIComponent(w.name) }, [w.name]);
        row = { tr: el('tr', { 'data-workload': w.name }, [el('th', { scope: 'row' }, [link])]), cells: [] };
        for (var i = 0; i < 4; i++) { var td = el('td'); row.cells.push(td); row.tr.append(td); }
        rows.set(w.name, row);
        body.append(row.tr);
      }
      row.tr.className = 'state-row-' + w.state;
      row.cells[0].replaceChildren(badge(w.state));
      row.cells[1].replaceChildren(num(rate(total(w.requests_per_s)), total(w.requests_per_s), 'requests-per-s'));
      row.cells[2].replaceChildren(num(String(w.in_flight), w.in_flight, 'in-flight'));
      var b = worstBurn(w);
      row.cells[3].replaceChildren(num(burn(b), b, 'worst-burn'));
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
      el('table', { 'class': 'slos' }, [
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
    parts.objective.textContent = w.objective === null ? 'measured, no SLO' : 'objective ' + percent(w.objective) + ' good';
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
      stat('Goodput', [w.goodput_per_s === null ? 'n/a' : num(rate(w.goodput_per_s), w.goodput_per_s, 'goodput')]));

    var sloRows = [];
    var kinds = w.slos.length > 0 ? w.slos : [];
    kinds.forEach(function (slo) {
      var lat = w.latency[slo.slo];
      sloRows.push(el('tr', { 'data-slo': slo.slo, 'class': 'state-row-' + slo.state }, [
        el('th', { scope: 'row' }, [SLO_NAME[slo.slo] + ' ', badge(slo.state)]),
        el('td', {}, [num(duration(lat.p50_s), lat.p50_s, 'p50'), ' / ', num(duration(lat.p99_s), lat.p99_s, 'p99')]),
        el('td', {}, [num(duration(slo.threshold_s), slo.threshold_s, 'threshold')]),
        el('td', {}, [num(percent(slo.window.attainment), slo.window.attainment, 'attainment-window'), ' / ',
          num(percent(slo.lifetime.attainment), slo.lifetime.attainment, 'attainment-lifetime')]),
        el('td', {}, [num(budget(slo.window.error_budget_remaining), slo.window.error_budget_remaining, 'budget-window'), ' / ',
          num(budget(slo.lifetime.error_budget_remaining), slo.lifetime.error_budget_remaining, 'budget-lifetime')]),
        el('td', {}, [num(burn(slo.window.burn_rate), slo.window.burn_rate, 'burn-window')]),
      ]));
    });
    if (sloRows.length === 0) {
      ['ttft', 'itl', 'e2e'].forEach(function (key) {
        var lat = w.latency[key];
        sloRows.push(el('tr', { 'data-slo': key }, [
          el('th', { scope: 'row' }, [SLO_NAME[key]]),
          el('td', {}, [num(duration(lat.p50_s), lat.p50_s, 'p50'), ' / ', num(duration(lat.p99_s), lat.p99_s, 'p99')]),
        ]));
      });
    }
    var heads = w.slos.length > 0 ? ['SLO', 'p50 / p99', 'Budget', 'Good 5 min / life', 'Budget left 5 min / life', 'Burn 5 min'] : ['Latency', 'p50 / p99'];
    if (parts.head.childElementCount !== heads.length) {
      parts.head.replaceChildren.apply(parts.head, heads.map(function (h) { return el('th', { scope: 'col' }, [h]); }));
    }
    parts.slos.replaceChildren.apply(parts.slos, sloRows);
    ['ttft', 'itl'].forEach(function (key) { renderChart(parts.charts[key], key, w.latency[key], w.name); });
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
    if (thresholdIndex >= 0 && lat.samples > 0) label += ', ' + percent(1 - over / lat.samples) + ' within the ' + duration(lat.threshold_s) + ' budget';
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
      for (var k = lo; k <= hi && k < bounds.length; k += every) {
        svg.append(svgEl('text', { x: (left + (k - lo + 1) * step).toFixed(1), y: bottom + 14, 'text-anchor': 'middle', 'class': 'axis' }, duration(bounds[k])));
      }
      if (thresholdIndex >= lo && thresholdIndex <= hi) {
        var tx = left + (thresholdIndex - lo + 1) * step;
        svg.append(svgEl('line', { x1: tx.toFixed(1), x2: tx.toFixed(1), y1: top - 8, y2: bottom, 'class': 'threshold' }));
        svg.append(svgEl('text', { x: (tx + (tx > W - 90 ? -4 : 4)).toFixed(1), 'text-anchor': tx > W - 90 ? 'end' : 'start', 'class': 'threshold-label', y: 11 },
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

  function render(report) {
    renderHeader(report);
    renderOverview(report);
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
