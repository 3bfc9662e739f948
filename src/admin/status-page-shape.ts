/**
 * The status page's "Traffic shape" section, one per workload card: input and output length
 * histograms, arrival burstiness, prefix sharing, and a button per export format that copies the
 * export (docs/status-page.md#traffic-shape, docs/workload-profiles.md). Its own script, beside the
 * page's: it reads `profile?format=json` (a ProfileSet, src/profile/workload-profile.ts) from the
 * same origin (the page's CSP allows connect-src 'self'), adds its section to each card the page
 * script creates, and asks again every 30 s, unless the page is paused.
 *
 * The histograms are drawn from the profile's own percentiles, not from a fit: four bars, min to
 * p50 (half the requests), p50 to p90 (40 %), p90 to p99 (9 %), p99 to max (1 %), on a logarithmic
 * token axis, each bar's height its share divided by its width on that axis (a density), so a long
 * tail reads as a long, low bar.
 */
export const SHAPE_STYLE = `
.shape { margin-top: 0.75rem; border-top: 1px solid var(--line); padding-top: 0.5rem; }
.shape h4 { margin: 0 0 0.25rem; font-size: 1rem; }
.shape-empty { color: var(--muted); margin: 0.25rem 0; }
.shape-grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(16rem, 1fr)); gap: 0.5rem 1rem; }
.shape-facts { margin: 0.5rem 0; display: grid; gap: 0.25rem; }
.shape-facts div { display: flex; flex-wrap: wrap; gap: 0 0.5rem; }
.shape-facts dt { color: var(--muted); font-size: 0.85rem; min-width: 7rem; }
.shape-facts dd { margin: 0; min-width: 0; overflow-wrap: anywhere; }
.shape-line { font-size: 0.85rem; color: var(--muted); margin: 0.1rem 0 0; overflow-wrap: anywhere; }
.shape-line .pair { white-space: nowrap; }
.copy-row { display: flex; flex-wrap: wrap; gap: 0.5rem; align-items: center; margin-top: 0.5rem; }
.copy-row button { font-size: 0.9rem; }
.copy-row button:disabled { color: var(--muted); cursor: not-allowed; }
.copy-status { font-size: 0.85rem; color: var(--muted); overflow-wrap: anywhere; }
.copy-fallback { width: 100%; min-height: 6rem; font: 0.8rem ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; margin-top: 0.5rem; }
`;

export const SHAPE_SCRIPT = String.raw`
(function () {
  'use strict';
  var SVG = 'http://www.w3.org/2000/svg';
  /** The export formats of GET /profile/<workload>?format=... and what the button copies. */
  var FORMATS = [
    { format: 'guidellm', label: 'GuideLLM scenario' },
    { format: 'aiperf', label: 'AIPerf flags' },
    { format: 'mooncake', label: 'Mooncake trace' },
  ];
  /** The share of requests in each bar: min-p50, p50-p90, p90-p99, p99-max. */
  var SHARES = [0.5, 0.4, 0.09, 0.01];
  var initial = JSON.parse(document.getElementById('initial-report').textContent);
  /**
   * A profile over minutes changes little in seconds, and fitting it costs the sidecar more than a
   * status report: asked every 30 s (or the page's refresh, when longer), not every 5 s.
   */
  var every = Math.max(30, initial.refresh_s || 0);
  var sections = new Map();
  var latest = null;
  var timer = null;

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
  function num(text, value, field) {
    return el('span', { 'data-value': value === undefined || value === null ? 'null' : String(value), 'data-field': field }, [text]);
  }
  function tokens(n) {
    return n === undefined ? '\u2013' : Math.round(n).toLocaleString('en-US');
  }
  function percent(r) {
    return (r * 100).toFixed(r > 0 && r < 0.1 ? 1 : 0) + ' %';
  }
  function span(s) {
    if (s < 120) return Math.round(s) + ' s';
    if (s < 7200) return Math.round(s / 60) + ' min';
    return (s / 3600).toFixed(s % 3600 === 0 ? 0 : 1) + ' h';
  }
  function cvMeaning(cv) {
    if (cv < 0.5) return 'evenly spaced';
    if (cv <= 1.5) return 'Poisson-like';
    return 'bursty';
  }

  function section(card) {
    var name = card.getAttribute('data-workload');
    var parts = sections.get(name);
    if (parts && parts.root.isConnected) return parts;
    var id = card.id + '-shape';
    parts = { name: name, title: el('h4', { id: id + '-h' }, ['Traffic shape']), body: el('div'), status: el('p', { 'class': 'copy-status', role: 'status' }), fallback: null, buttons: [] };
    var row = el('div', { 'class': 'copy-row' });
    FORMATS.forEach(function (f) {
      var button = el('button', { type: 'button', 'data-format': f.format, disabled: '' }, ['Copy ' + f.label]);
      button.append(el('span', { 'class': 'sr-only' }, [' of ' + name]));
      button.addEventListener('click', function () { copy(parts, f, button); });
      parts.buttons.push(button);
      row.append(button);
    });
    parts.root = el('section', { 'class': 'shape', 'aria-labelledby': id + '-h', 'data-shape': name }, [parts.title, parts.body, row, parts.status]);
    card.append(parts.root);
    sections.set(name, parts);
    return parts;
  }

  function copy(parts, f, button) {
    parts.status.textContent = 'Fetching the ' + f.label + '\u2026';
    if (parts.fallback) { parts.fallback.remove(); parts.fallback = null; }
    fetch('profile/' + encodeURIComponent(parts.name) + '?format=' + f.format, { cache: 'no-store' })
      .then(function (response) {
        return response.text().then(function (text) {
          if (response.ok) return text;
          // The profile routes refuse with {"error": "..."} (an empty window, a workload not recorded): say it.
          var reason = 'HTTP ' + response.status;
          try { reason += ': ' + JSON.parse(text).error; } catch (ignored) { /* not JSON: the status alone */ }
          throw new Error(reason);
        });
      })
      .then(function (text) {
        button.setAttribute('data-copied-bytes', String(new Blob([text]).size));
        var copied = navigator.clipboard && window.isSecureContext ? navigator.clipboard.writeText(text) : Promise.reject(new Error('this page is not a secure origin'));
        return copied.then(function () {
          parts.status.textContent = 'Copied the ' + f.label + ' (' + new Blob([text]).size.toLocaleString('en-US') + ' bytes).';
        }, function (error) {
          // No clipboard (plain http to a pod address is not a secure context): the text, selected, to copy by hand.
          parts.fallback = el('textarea', { 'class': 'copy-fallback', readonly: '', 'aria-label': f.label + ' of ' + parts.name });
          parts.fallback.value = text;
          parts.root.append(parts.fallback);
          parts.fallback.select();
          parts.status.textContent = 'The browser allowed no clipboard (' + error.message + '): the ' + f.label + ' is selected below; copy it with Ctrl+C.';
        });
      })
      .catch(function (error) {
        parts.status.textContent = 'Could not fetch the ' + f.label + ': ' + error.message + '.';
      });
  }

  /** Bars from the percentiles on a log axis; null when the profile lacks them. */
  function histogram(d, what, name) {
    if (d.count === 0 || d.min === undefined || d.max === undefined || d.p50 === undefined || d.p90 === undefined || d.p99 === undefined) return null;
    var edges = [d.min, d.p50, d.p90, d.p99, d.max].map(function (v) { return Math.max(1, v); });
    var lo = Math.log(edges[0]), hi = Math.log(edges[4]);
    var W = 320, H = 88, top = 6, bottom = 70, left = 4, right = 316;
    var label = what + ' of ' + name + ': ' + d.count + ' requests; half at most ' + tokens(d.p50) + ' tokens, 90 % at most ' + tokens(d.p90) + ', 99 % at most ' + tokens(d.p99) + ', longest ' + tokens(d.max);
    var svg = svgEl('svg', { viewBox: '0 0 ' + W + ' ' + H, role: 'img', 'aria-label': label, 'data-histogram': what });
    if (edges[0] === edges[4]) {
      // Every request the same length (a fixed-length client): one bar, said in words.
      var only = svgEl('rect', { x: left, y: top, width: right - left, height: bottom - top, 'class': 'bar' });
      only.append(svgEl('title', {}, 'every request at ' + tokens(d.min) + ' tokens'));
      svg.append(only, svgEl('line', { x1: left, x2: right, y1: bottom, y2: bottom, 'class': 'baseline' }),
        svgEl('text', { x: W / 2, y: bottom + 14, 'text-anchor': 'middle', 'class': 'axis' }, 'every request: ' + tokens(d.min) + ' tokens'));
      return svg;
    }
    var axis = Math.max(hi - lo, 1e-9);
    var minWidth = 0.02 * axis;
    var bars = [];
    var densest = 0;
    for (var i = 0; i < 4; i++) {
      var a = Math.log(edges[i]) - lo, b = Math.log(edges[i + 1]) - lo;
      var width = Math.max(b - a, minWidth);
      var density = SHARES[i] / width;
      densest = Math.max(densest, density);
      bars.push({ a: a, width: width, density: density, from: edges[i], to: edges[i + 1], share: SHARES[i] });
    }
    bars.forEach(function (bar) {
      var x = left + (Math.min(bar.a, axis - bar.width) / Math.max(axis, minWidth)) * (right - left);
      var w = Math.max(2, (bar.width / Math.max(axis, minWidth)) * (right - left) - 1);
      var h = Math.max(1, ((bottom - top) * bar.density) / densest);
      var rect = svgEl('rect', { x: x.toFixed(1), y: (bottom - h).toFixed(1), width: Math.min(w, right - x).toFixed(1), height: h.toFixed(1), 'class': 'bar' });
      rect.append(svgEl('title', {}, percent(bar.share) + ' of requests between ' + tokens(bar.from) + ' and ' + tokens(bar.to) + ' tokens'));
      svg.append(rect);
    });
    svg.append(svgEl('line', { x1: left, x2: right, y1: bottom, y2: bottom, 'class': 'baseline' }));
    svg.append(svgEl('text', { x: left, y: bottom + 14, 'text-anchor': 'start', 'class': 'axis' }, tokens(d.min)));
    svg.append(svgEl('text', { x: right, y: bottom + 14, 'text-anchor': 'end', 'class': 'axis' }, tokens(d.max) + ' tokens'));
    return svg;
  }

  function lengths(d, what, field, name) {
    var caption = el('figcaption', {}, [what]);
    if (d.count === 0) return el('figure', { 'data-lengths': field }, [caption, el('p', { 'class': 'shape-empty' }, ['No request in the window reported its token usage.'])]);
    var pair = function (label, value, key) { return el('span', { 'class': 'pair' }, [label + ' ', num(tokens(value), value, field + '-' + key)]); };
    var line = el('p', { 'class': 'shape-line' }, [pair('mean', d.mean, 'mean'), ' \u00B7 ', pair('stdev', d.stdev, 'stdev'), ' \u00B7 ', pair('p50', d.p50, 'p50'), ' \u00B7 ', pair('p99', d.p99, 'p99')]);
    if (d.fit) line.append(' \u00B7 ', el('span', { 'class': 'pair' }, ['best fit ' + d.fit.family + ' (KS ' + d.fit.ks.toFixed(3) + ')']));
    var chart = histogram(d, what, name);
    return el('figure', { 'data-lengths': field }, chart ? [caption, chart, line] : [caption, line]);
  }

  function fact(label, content) {
    return el('div', {}, [el('dt', {}, [label]), el('dd', {}, content)]);
  }

  function render(card) {
    var parts = section(card);
    var enable = function (on) { parts.buttons.forEach(function (b) { b.disabled = !on; }); };
    if (latest === null) {
      parts.body.replaceChildren(el('p', { 'class': 'shape-empty' }, ['Reading the traffic shape from profile\u2026']));
      return enable(false);
    }
    if (latest.reason) {
      parts.body.replaceChildren(el('p', { 'class': 'shape-empty', 'data-empty': 'unavailable' }, [latest.reason]));
      return enable(false);
    }
    var set = latest.set;
    var windowText = span(set.window.seconds);
    parts.title.textContent = 'Traffic shape, last ' + windowText;
    var w = null;
    set.workloads.forEach(function (candidate) { if (candidate.workload === parts.name) w = candidate; });
    if (w === null || w.requests === 0) {
      parts.body.replaceChildren(el('p', { 'class': 'shape-empty', 'data-empty': 'no-requests' }, [
        'No requests recorded yet in the last ' + windowText + ' (or profiling is off for this workload), so there is no shape to show or export.']));
      return enable(false);
    }
    var arrivals = w.arrivals.interArrivalCv === undefined
      ? [num('not measured yet', null, 'interarrival-cv'), ' (fewer than 3 arrivals)']
      : ['CV ', num(w.arrivals.interArrivalCv.toFixed(2), w.arrivals.interArrivalCv, 'interarrival-cv'), ': ' + cvMeaning(w.arrivals.interArrivalCv) +
        ' (1 = Poisson, 0 = evenly spaced, above 1 = bursts) \u00B7 gamma shape ' + (w.arrivals.gammaShape === undefined ? '\u2013' : w.arrivals.gammaShape.toFixed(2))];
    var prefix = w.prefixSharing;
    var cached = w.cachedInputShare === undefined
      ? 'the server reports no cached tokens'
      : percent(w.cachedInputShare) + ' of requests had cached input tokens (server-reported)';
    parts.body.replaceChildren(
      el('dl', { 'class': 'shape-facts' }, [
        fact('Requests', [num(w.requests.toLocaleString('en-US'), w.requests, 'profile-requests'), ' in the last ' + windowText +
          (set.mix[parts.name] === undefined ? '' : ' \u00B7 ' + percent(set.mix[parts.name]) + ' of all traffic') +
          ' \u00B7 ' + w.arrivals.ratePerSecond.toFixed(2) + '/s \u00B7 concurrency mean ' + w.concurrency.mean.toFixed(1) + ', max ' + w.concurrency.max]),
        fact('Arrivals', arrivals),
        fact('Prefix sharing', [num(percent(prefix.sharedPrefixShare), prefix.sharedPrefixShare, 'shared-prefix-share'),
          ' of requests share their first ' + prefix.blockTokens + '-token block with another; ' + percent(prefix.sharedBlockShare) +
          ' of blocks were seen before; ' + cached]),
      ]),
      el('div', { 'class': 'shape-grid' }, [lengths(w.inputTokens, 'Input tokens', 'input', parts.name), lengths(w.outputTokens, 'Output tokens', 'output', parts.name)]),
      el('p', { 'class': 'shape-line' }, ['Bars, left to right: the shortest half of the requests, the next 40 %, the next 9 %, the longest 1 %; the token axis is logarithmic.']));
    enable(true);
  }

  function renderAll() {
    document.querySelectorAll('#workloads article.card[data-workload]').forEach(render);
  }

  function paused() {
    return document.getElementById('pause').getAttribute('aria-pressed') === 'true';
  }

  function load() {
    clearTimeout(timer);
    if (paused()) { timer = setTimeout(load, every * 1000); return; }
    fetch('profile?format=json', { cache: 'no-store', headers: { accept: 'application/json' } })
      .then(function (response) {
        if (response.status === 404) return { set: null, reason: 'No requests recorded: this sidecar serves no workload profiles (GET profile answered HTTP 404), so there is no shape to show or export.' };
        if (!response.ok) throw new Error('HTTP ' + response.status);
        return response.json().then(function (set) { return { set: set, reason: null }; });
      })
      .then(function (result) { latest = result; })
      .catch(function (error) { latest = { set: null, reason: 'Could not read the traffic shape from profile (' + error.message + '); trying again.' }; })
      .then(function () {
        timer = setTimeout(load, every * 1000);
        try {
          renderAll();
        } catch (error) {
          latest = { set: null, reason: 'Could not show the traffic shape: profile answered what this page cannot read (' + error.message + ').' };
          renderAll();
        }
        document.body.setAttribute('data-shape-at', String(Date.now()));
      });
  }

  new MutationObserver(renderAll).observe(document.getElementById('workloads'), { childList: true });
  renderAll();
  load();
})();
`;
