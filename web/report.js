/* web/report.js - renders the tilegraph report page from the embedded JSON
 * (see src/analyse/report_data.c for its shape). Plain browser JavaScript, no
 * libraries. Every computed figure the tests check is written into the DOM
 * with an id or data-* attribute. The URL hash selects the tab and its state:
 * #summary, #memory, #liveness/device=0&step=12&step2=20, #program,
 * #operations/sort=flops&filter=conv, #trace/from=0&to=5000000 (ns from the
 * start of the run). */
'use strict';
var errorsBox = document.getElementById('errors');
function reportError(msg) { errorsBox.textContent += msg + '\n'; }
window.onerror = function (msg, src, line, col) { reportError(msg + ' (' + line + ':' + col + ')'); };
window.addEventListener('unhandledrejection', function (e) { reportError(String(e.reason)); });

/* ---- helpers ---- */
function el(tag, attrs) {
  var e = document.createElement(tag);
  if (attrs) for (var k in attrs) {
    if (attrs[k] == null) continue;
    if (k === 'text') e.textContent = attrs[k];
    else if (k === 'cls') e.className = attrs[k];
    else if (k.slice(0, 2) === 'on') e.addEventListener(k.slice(2), attrs[k]);
    else e.setAttribute(k, attrs[k]);
  }
  for (var i = 2; i < arguments.length; i++) {
    var c = arguments[i];
    if (c == null) continue;
    if (Array.isArray(c)) c.forEach(function (x) { if (x != null) e.appendChild(typeof x === 'string' ? document.createTextNode(x) : x); });
    else e.appendChild(typeof c === 'string' || typeof c === 'number' ? document.createTextNode(String(c)) : c);
  }
  return e;
}
var SVGNS = 'http://www.w3.org/2000/svg';
function svg(tag, attrs) {
  var e = document.createElementNS(SVGNS, tag);
  for (var k in attrs) e.setAttribute(k, attrs[k]);
  return e;
}
function fmtBytes(b) {
  if (b == null || isNaN(b)) return '-';
  var a = Math.abs(b), u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'], i = 0;
  while (a >= 1024 && i < u.length - 1) { a /= 1024; i++; }
  return (b < 0 ? '-' : '') + (i === 0 ? a.toFixed(0) : a.toFixed(a < 10 ? 2 : 1)) + ' ' + u[i];
}
function fmtNs(ns) {
  var a = Math.abs(ns);
  if (a < 1e3) return ns.toFixed(0) + ' ns';
  if (a < 1e6) return (ns / 1e3).toFixed(1) + ' us';
  if (a < 1e9) return (ns / 1e6).toFixed(2) + ' ms';
  return (ns / 1e9).toFixed(2) + ' s';
}
function fmtNum(x) {
  if (x == null) return '-';
  var a = Math.abs(x);
  if (a >= 1e12) return (x / 1e12).toFixed(2) + ' T';
  if (a >= 1e9) return (x / 1e9).toFixed(2) + ' G';
  if (a >= 1e6) return (x / 1e6).toFixed(2) + ' M';
  if (a >= 1e3) return (x / 1e3).toFixed(1) + ' k';
  return String(Math.round(x * 100) / 100);
}
function pct(x) { return (x * 100).toFixed(1) + '%'; }
function diffCells(a, b, fmt) {
  var d = b - a, rel = a ? d / a : (d ? Infinity : 0);
  var cls = 'num ' + (d > 0 ? 'pos' : d < 0 ? 'neg' : '');
  return [el('td', { cls: cls, 'data-value': d }, (d > 0 ? '+' : '') + fmt(d)),
          el('td', { cls: cls }, isFinite(rel) ? (d > 0 ? '+' : '') + pct(rel) : 'new')];
}
function table(headers, rows, attrs) {
  return el('table', attrs || {}, el('thead', null, el('tr', null, headers.map(function (h) {
    return el('th', { cls: /^[#]|bytes|flops|FLOPs|time|share|count|calls|diff|%|device \d|slots/.test(h) ? 'num' : '' }, h);
  }))), el('tbody', null, rows));
}
function td(v, cls, attrs) { var a = attrs || {}; if (cls) a.cls = cls; return el('td', a, v); }
function sum(arr, f) { var s = 0; for (var i = 0; i < arr.length; i++) s += f(arr[i]); return s; }

/* ---- data ---- */
function rowsOf(t) {
  if (!t) return [];
  return t.rows.map(function (r) { var o = {}; t.cols.forEach(function (c, i) { o[c] = r[i]; }); return o; });
}
var CATEGORY_COLOURS = {
  'weights': '#2f6fdb', 'optimizer state': '#7a5af8', 'gradient accumulators': '#ee46bc',
  'constants': '#667085', 'host-stream buffers': '#15b79e', 'pipeline stash': '#f79009',
  'inter-device copy buffers': '#06aed4', 'activations': '#f04438', 'kernel scratch (peak)': '#fda29b',
  'offloaded to host': '#98a2b3', 'weight cache': '#84adff'
};
/* Categories that are not part of the arena total: kernel scratch is inside
 * activations, offloaded state and an inference program's weight cache
 * (the weights in the kernels' layout) live on the host. */
function inArena(cat) {
  return !/^kernel scratch/.test(cat) && cat !== 'offloaded to host' && cat !== 'weight cache';
}
function colourOf(cat) { return CATEGORY_COLOURS[cat] || '#999'; }

function loadReport(raw) {
  var r = { path: raw.path, meta: raw.meta };
  ['devices', 'memory', 'tensors', 'steps', 'schedule', 'liveness', 'trace', 'ops', 'host_trace', 'op_edges', 'counters', 'histograms', 'vertex_types', 'predicted_trace'].forEach(function (k) { r[k] = rowsOf(raw[k]); });
  r.tiles = raw.tiles && raw.tiles.devices && raw.tiles.devices.length ? raw.tiles : null;
  r.insights = raw.insights || null;
  r.instances = raw.instances || null;
  r.nDevices = r.devices.length;
  r.deviceTotal = r.devices.map(function (d) {
    return sum(r.memory.filter(function (m) { return m.device === d.device && inArena(m.category); }), function (m) { return m.bytes; });
  });
  r.replicas = +r.meta.replicas || 1;
  /* trace: times relative to the first event of run 0 */
  var t0 = Infinity, t1 = -Infinity;
  r.trace.forEach(function (e) { if (e.start_ns < t0) t0 = e.start_ns; if (e.end_ns > t1) t1 = e.end_ns; });
  r.t0 = isFinite(t0) ? t0 : 0; r.span = isFinite(t1) ? t1 - t0 : 0;
  r.trace.forEach(function (e) { e.s = e.start_ns - r.t0; e.e = e.end_ns - r.t0; });
  r.busy = r.devices.map(function (d) {
    return r.span ? sum(r.trace.filter(function (e) { return e.device === d.device && e.replica === 0 && e.kind === 'execute'; }), function (e) { return e.e - e.s; }) / r.span : 0;
  });
  return r;
}

var data, reports = [], cur = 0;
try {
  data = JSON.parse(document.getElementById('report-data').textContent);
  reports = data.reports.map(loadReport);
} catch (e) { reportError('cannot read the report data: ' + e.message); }

/* ---- tabs and hash ---- */
var TABS = [['summary', 'Summary'], ['insights', 'Insights'], ['memory', 'Memory'], ['liveness', 'Liveness'], ['program', 'Program Tree'],
            ['operations', 'Operations'], ['trace', 'Execution Trace'], ['host', 'Host'], ['histograms', 'Histograms']];
var renderers = {};
/* Render times (ms) of each tab shown, and data-load: from navigation start
 * until the first tab is shown. With the hash #timing the page renders every
 * tab once at load (what the responsiveness check reads). */
var timings = document.getElementById('timings');
function parseHash() {
  var h = location.hash.replace(/^#/, ''), parts = h.split('/'), tab = parts[0] || 'summary', args = {};
  (parts[1] || '').split('&').forEach(function (kv) { if (!kv) return; var p = kv.split('='); args[decodeURIComponent(p[0])] = decodeURIComponent(p[1] || ''); });
  if (!TABS.some(function (t) { return t[0] === tab; })) tab = 'summary';
  return { tab: tab, args: args };
}
function setHash(tab, args) {
  var s = Object.keys(args || {}).filter(function (k) { return args[k] !== '' && args[k] != null; })
    .map(function (k) { return encodeURIComponent(k) + '=' + encodeURIComponent(args[k]); }).join('&');
  history.replaceState(null, '', '#' + tab + (s ? '/' + s : ''));
  route();
}
function route() {
  if (!reports.length) return;
  var h = parseHash();
  TABS.forEach(function (t) {
    document.getElementById('tab-' + t[0]).classList.toggle('active', t[0] === h.tab);
    document.getElementById('nav-' + t[0]).classList.toggle('active', t[0] === h.tab);
  });
  var sec = document.getElementById('tab-' + h.tab), t0 = performance.now();
  sec.textContent = '';
  try { renderers[h.tab](sec, h.args); } catch (e) { reportError(h.tab + ': ' + e.message + '\n' + e.stack); }
  document.body.setAttribute('data-tab', h.tab);
  void document.body.offsetHeight; /* include the layout in the time */
  timings.setAttribute('data-tab-' + h.tab, (performance.now() - t0).toFixed(1));
}

/* ---- Insights: the tables and sentences of `tilegraph analyse insights`,
 * built by the same C code (report_data.c), shown as they are ---- */
function fmtKind(kind, v) {
  if (v == null) return '-';
  if (kind === 'bytes') return fmtBytes(v);
  if (kind === 'ns') return fmtNs(v);
  if (kind === 'frac') return pct(v);
  if (kind === 'count' || kind === 'id') return String(v);
  if (kind === 'num') return fmtNum(v);
  return String(v);
}
/* The tables of a view as analyse builds it (report_data.c), ids `prefix-N`. */
function renderViewTables(sec, view, prefix) {
  view.tables.forEach(function (t, ti) {
    var keep = t.kinds.map(function (k, c) { return k !== 'bar' ? c : -1; }).filter(function (c) { return c >= 0; });
    sec.appendChild(el('h3', null, t.title));
    sec.appendChild(table(keep.map(function (c) { return t.cols[c]; }), t.rows.map(function (row) {
      return el('tr', null, keep.map(function (c) {
        var k = t.kinds[c], text = k === 'text' || k === 'label';
        return td(fmtKind(k, row[c]), text ? '' : 'num', { 'data-col': t.cols[c], 'data-value': row[c] == null ? '' : row[c] });
      }));
    }), { id: prefix + '-' + ti, 'data-title': t.title }));
  });
}
function renderInsightsOf(sec, r, sfx) {
  var ins = r.insights;
  if (!ins) { sec.appendChild(el('p', { cls: 'muted' }, 'This report holds no insights (written by an older tilegraph).')); return; }
  if (ins.error) { sec.appendChild(el('p', { id: 'insights-error' + sfx }, 'The insights cannot be built: ' + ins.error)); return; }
  renderViewTables(sec, ins, 'insights' + sfx);
  sec.appendChild(el('h3', null, 'What they say'));
  sec.appendChild(el('ul', { id: 'insights-notes' + sfx, 'data-count': ins.notes.length }, ins.notes.map(function (n) { return el('li', null, n); })));
}
renderers.insights = function (sec) {
  sec.appendChild(el('p', { cls: 'muted' }, 'What to look at first, for memory and for time: the same tables and sentences as tilegraph analyse REPORT insights.'));
  reports.forEach(function (r, i) {
    if (reports.length > 1) sec.appendChild(el('h2', null, (i ? 'B (target): ' : 'A (source): ') + r.path));
    renderInsightsOf(sec, r, i ? '-b' : '');
  });
};

/* ---- Summary ---- */
var SUMMARY_KEYS = [['program', 'program'], ['target', 'target'], ['strategy', 'strategy'], ['schedule', 'schedule'],
  ['devices', 'devices'], ['replicas', 'replicas'], ['micro_batches', 'micro-batches per update'],
  ['iterations', 'device iterations'], ['threads_per_device', 'threads per device'], ['ops', 'ops'],
  ['tensors', 'tensors'], ['steps', 'program steps'], ['transfers', 'transfers'],
  ['arena_bytes', 'arena bytes (one replica)'], ['flops_per_run', 'FLOPs per run'], ['tilegraph_version', 'version'],
  ['created', 'created']];
/* Tiled targets (mk2), as PopVision's summary shows an IPU: tiles, the
 * memory of a tile, a device and all devices, and the graph's compute sets,
 * vertices and edges (the same figures as `tilegraph analyse summary`). */
function renderTiledSummary(sec, a, b) {
  var tiled = function (r) { return r && +(r.meta.tiles_per_device || 0) > 0; };
  if (!tiled(a) && !tiled(b)) return;
  var fig = function (r, k) {
    if (!tiled(r)) return null;
    var m = r.meta, tiles = +m.tiles_per_device, per = +m.memory_per_tile, n = (+m.devices || 1) * (+m.replicas || 1);
    return { tiles_per_device: tiles, tiles_all: tiles * n, workers_per_tile: +m.workers_per_tile, compute_sets: +m.compute_sets,
             vertices: +m.vertices, edges: +m.edges, memory_per_tile: per, memory_per_device: tiles * per, memory_all: tiles * per * n }[k];
  };
  var rows = [['tiles_per_device', 'tiles per device'], ['tiles_all', 'tiles in all'], ['workers_per_tile', 'worker threads per tile'],
    ['compute_sets', 'compute sets'], ['vertices', 'vertices'], ['edges', 'edges'], ['memory_per_tile', 'memory per tile'],
    ['memory_per_device', 'memory per device'], ['memory_all', 'memory of all devices']].map(function (k) {
    var exact = function (x) { return String(x).replace(/\B(?=(\d{3})+(?!\d))/g, ','); };
    var fmt = /memory/.test(k[0]) ? fmtBytes : exact, va = fig(a, k[0]), cells = [td(k[1]), td(va == null ? '-' : fmt(va), 'num', { id: 'tiled-' + k[0], 'data-value': va == null ? '' : va })];
    if (b) {
      var vb = fig(b, k[0]);
      cells.push(td(vb == null ? '-' : fmt(vb), 'num', { id: 'tiled-b-' + k[0], 'data-value': vb == null ? '' : vb }));
      cells = cells.concat(va != null && vb != null ? diffCells(va, vb, fmt) : [td(''), td('')]);
    }
    return el('tr', null, cells);
  });
  sec.appendChild(el('h2', null, 'Target (tiles)'));
  sec.appendChild(table(b ? ['', 'source', 'target', 'diff', 'diff %'] : ['', 'value'], rows, { id: 'summary-tiles' }));
}
renderers.summary = function (sec) {
  var a = reports[0], b = reports[1];
  sec.appendChild(el('div', { cls: 'cards' },
    el('div', { cls: 'card' }, el('div', { cls: 'muted' }, 'devices'), el('div', { cls: 'v', id: 'device-count', 'data-value': a.nDevices }, String(a.nDevices))),
    el('div', { cls: 'card' }, el('div', { cls: 'muted' }, 'replicas'), el('div', { cls: 'v' }, String(a.replicas))),
    el('div', { cls: 'card' }, el('div', { cls: 'muted' }, 'arena, all devices'), el('div', { cls: 'v', id: 'total-memory', 'data-value': sum(a.deviceTotal, function (x) { return x; }) }, fmtBytes(sum(a.deviceTotal, function (x) { return x; })))),
    el('div', { cls: 'card' }, el('div', { cls: 'muted' }, 'run 0 duration'), el('div', { cls: 'v', id: 'run-duration', 'data-value': a.span }, fmtNs(a.span)))));
  sec.appendChild(el('h2', null, 'Program information'));
  var isNum = function (k) { return /^-?\d+(\.\d+)?$/.test(a.meta[k] || ''); };
  var hdr = b ? ['', 'source (' + a.path + ')', 'target (' + b.path + ')', 'diff', 'diff %'] : ['', 'value'];
  sec.appendChild(table(hdr, SUMMARY_KEYS.filter(function (k) { return k[0] in a.meta || (b && k[0] in b.meta); }).map(function (k) {
    /* a pipeline schedule means nothing on one device: name none (as analyse does) */
    var sched = function (r) { return r.nDevices === 1 ? 'none (one device)' : r.meta.schedule; };
    if (k[0] === 'schedule') {
      var sc = [td(k[1]), td(sched(a), '', { id: 'meta-schedule', 'data-value': sched(a) })];
      if (b) sc.push(td(sched(b), '', { id: 'meta-b-schedule', 'data-value': sched(b) }), td(sched(a) === sched(b) ? '' : 'differs'), td(''));
      return el('tr', null, sc);
    }
    var va = a.meta[k[0]], fmt = /bytes/.test(k[0]) ? function (x) { return fmtBytes(+x); } : isNum(k[0]) ? function (x) { return fmtNum(+x); } : String;
    var cells = [td(k[1]), td(va == null ? '-' : fmt(va), isNum(k[0]) ? 'num' : '', { id: 'meta-' + k[0], 'data-value': va })];
    if (b) {
      var vb = b.meta[k[0]];
      cells.push(td(vb == null ? '-' : fmt(vb), isNum(k[0]) ? 'num' : '', { id: 'meta-b-' + k[0], 'data-value': vb }));
      if (isNum(k[0]) && vb != null) cells = cells.concat(diffCells(+va, +vb, fmt));
      else cells.push(td(va === vb ? '' : 'differs'), td(''));
    }
    return el('tr', null, cells);
  }), { id: 'summary-meta' }));
  renderTiledSummary(sec, a, b);
  /* the profile of one instance of an MPI job: every instance side by side */
  if (a.instances && a.instances.tables) {
    sec.appendChild(el('h2', null, 'Instances of the MPI job'));
    renderViewTables(sec, a.instances, 'instances');
    a.instances.notes.forEach(function (n) { sec.appendChild(el('p', { cls: 'muted' }, n)); });
  }
  sec.appendChild(el('h2', null, 'Per device'));
  var nd = Math.max(a.nDevices, b ? b.nDevices : 0), rows = [];
  for (var d = 0; d < nd; d++) {
    var cells = [td('device ' + d),
      td(d < a.nDevices ? fmtBytes(a.deviceTotal[d]) : '-', 'num', { id: 'device-memory-' + d, 'data-value': d < a.nDevices ? a.deviceTotal[d] : '' }),
      td(d < a.nDevices ? pct(a.busy[d]) : '-', 'num', { id: 'device-busy-' + d, 'data-value': d < a.nDevices ? a.busy[d].toFixed(4) : '' })];
    if (b) {
      /* each quantity's source, target and difference side by side: memory, then busy */
      var busyA = cells.pop();
      cells.push(td(d < b.nDevices ? fmtBytes(b.deviceTotal[d]) : '-', 'num', { id: 'device-memory-b-' + d, 'data-value': d < b.nDevices ? b.deviceTotal[d] : '' }));
      cells = cells.concat(diffCells(d < a.nDevices ? a.deviceTotal[d] : 0, d < b.nDevices ? b.deviceTotal[d] : 0, fmtBytes));
      cells.push(busyA);
      cells.push(td(d < b.nDevices ? pct(b.busy[d]) : '-', 'num', { id: 'device-busy-b-' + d, 'data-value': d < b.nDevices ? b.busy[d].toFixed(4) : '' }));
      var ba = d < a.nDevices ? a.busy[d] : 0, bb = d < b.nDevices ? b.busy[d] : 0, db = bb - ba;
      cells.push(td((db > 0 ? '+' : '') + (db * 100).toFixed(1) + ' pp', 'num ' + (db > 0 ? 'pos' : db < 0 ? 'neg' : ''),
                    { id: 'device-busy-diff-' + d, 'data-value': db.toFixed(4) }));
    }
    rows.push(el('tr', null, cells));
  }
  sec.appendChild(table(b ? ['device', 'memory (source)', 'memory (target)', 'memory diff', 'memory diff %', 'busy (source)', 'busy (target)', 'busy diff']
                          : ['device', 'memory (arena)', 'busy share of run 0'], rows, { id: 'summary-devices' }));
  if (b) {
    sec.appendChild(el('h2', null, 'Tensors present in only one report'));
    var na = {}, nb = {};
    a.tensors.forEach(function (t) { na[t.name] = t; }); b.tensors.forEach(function (t) { nb[t.name] = t; });
    var only = [];
    Object.keys(na).forEach(function (n) { if (!(n in nb)) only.push([n, 'source only', na[n].bytes]); });
    Object.keys(nb).forEach(function (n) { if (!(n in na)) only.push([n, 'target only', nb[n].bytes]); });
    sec.appendChild(only.length ? table(['tensor', 'in', 'bytes'], only.slice(0, 200).map(function (o) { return el('tr', null, td(o[0]), td(o[1]), td(fmtBytes(o[2]), 'num')); }), { id: 'summary-only' })
                                : el('p', { id: 'summary-only', cls: 'muted' }, 'Both reports hold the same tensors.'));
  }
};

/* ---- Memory ---- */
function memoryBars(r, title, scale) {
  var box = el('div', null, el('h3', null, title));
  var cats = [];
  r.memory.forEach(function (m) { if (inArena(m.category) && cats.indexOf(m.category) < 0) cats.push(m.category); });
  r.devices.forEach(function (d, i) {
    var bar = el('div', { cls: 'bar', style: 'width:' + Math.max(2, 700 * r.deviceTotal[i] / scale) + 'px' });
    r.memory.filter(function (m) { return m.device === d.device && inArena(m.category) && m.bytes > 0; }).forEach(function (m) {
      bar.appendChild(el('span', { title: m.category + ': ' + fmtBytes(m.bytes), 'data-category': m.category,
        style: 'width:' + (100 * m.bytes / (r.deviceTotal[i] || 1)) + '%;background:' + colourOf(m.category) }));
    });
    box.appendChild(el('div', { cls: 'bar-row' }, el('span', { cls: 'label' }, 'device ' + d.device), bar, el('span', null, fmtBytes(r.deviceTotal[i]))));
  });
  box.appendChild(el('div', { cls: 'legend' }, cats.map(function (c) { return el('span', null, el('i', { style: 'background:' + colourOf(c) }), c); })));
  return box;
}
renderers.memory = function (sec, args) {
  var a = reports[0], b = reports[1];
  var scale = Math.max.apply(null, a.deviceTotal.concat(b ? b.deviceTotal : []).concat([1]));
  sec.appendChild(el('h2', null, 'Memory per device, by category'));
  sec.appendChild(memoryBars(a, b ? 'source: ' + a.path : a.path, scale));
  if (b) sec.appendChild(memoryBars(b, 'target: ' + b.path, scale));
  /* category table: devices as columns */
  var cats = [];
  a.memory.concat(b ? b.memory : []).forEach(function (m) { if (cats.indexOf(m.category) < 0) cats.push(m.category); });
  var get = function (r, d, c) { var m = r.memory.filter(function (x) { return x.device === d && x.category === c; })[0]; return m ? m.bytes : 0; };
  var nd = Math.max(a.nDevices, b ? b.nDevices : 0), hdr = ['category'], rows = [];
  for (var d = 0; d < nd; d++) hdr = hdr.concat(b ? ['device ' + d + ' source', 'device ' + d + ' target', 'diff'] : ['device ' + d]);
  cats.forEach(function (c) {
    var cells = [td(c + (inArena(c) ? '' : ' *'))];
    for (var d = 0; d < nd; d++) {
      var va = get(a, d, c);
      cells.push(td(fmtBytes(va), 'num', { id: 'mem-' + d + '-' + c.replace(/\W+/g, '-'), 'data-value': va }));
      if (b) { var vb = get(b, d, c); cells.push(td(fmtBytes(vb), 'num', { 'data-value': vb }), diffCells(va, vb, fmtBytes)[0]); }
    }
    rows.push(el('tr', null, cells));
  });
  sec.appendChild(table(hdr, rows, { id: 'memory-categories' }));
  sec.appendChild(el('p', { cls: 'muted' }, '* not added to the arena total: kernel scratch is part of activations; offloaded state is kept in host memory.'));
  if (b && a.tiles && b.tiles) renderTilesCompare(sec, a, b, args);
  if (reports[cur].tiles) renderTiles(sec, reports[cur], args);
  /* largest tensors */
  var r = reports[cur], dev = args.device != null && args.device !== '' ? +args.device : null;
  sec.appendChild(el('h2', null, 'Largest tensors' + (b ? ' (' + r.path + ')' : '')));
  var pick = el('select', { onchange: function () { setHash('memory', { device: this.value }); } },
    el('option', { value: '' }, 'all devices'), r.devices.map(function (d) { var o = el('option', { value: d.device }, 'device ' + d.device); if (dev === d.device) o.selected = true; return o; }));
  sec.appendChild(el('div', { cls: 'controls' }, 'device ', pick));
  var ts = r.tensors.filter(function (t) { return dev == null || t.device === dev; }).slice()
    .sort(function (x, y) { return y.bytes * y.slots - x.bytes * x.slots; }).slice(0, 40);
  sec.appendChild(table(['tensor', 'category', 'dtype', 'shape', 'device', 'bytes (one slot)', 'slots', 'total bytes', 'live steps'], ts.map(function (t) {
    return el('tr', { 'data-name': t.name }, td(t.name), td(t.category), td(t.dtype), td(t.shape), td(String(t.device), 'num'),
      td(fmtBytes(t.bytes), 'num'), td(String(t.slots), 'num'), td(fmtBytes(t.bytes * t.slots), 'num', { 'data-value': t.bytes * t.slots }),
      td(t.always_live ? 'always' : t.first_step + '-' + t.last_step));
  }), { id: 'largest-tensors' }));
};

/* ---- Liveness ---- */
function liveAt(r, device, step) {
  return r.tensors.filter(function (t) { return t.device === device && !t.always_live && t.first_step <= step && step <= t.last_step; })
    .sort(function (x, y) { return y.bytes * y.slots - x.bytes * x.slots || (x.name < y.name ? -1 : 1); });
}
renderers.liveness = function (sec, args) {
  var r = reports[cur];
  if (reports[1]) renderLivenessCompare(sec, reports[0], reports[1]);
  var dev = args.device != null && args.device !== '' ? +args.device : null;
  var s1 = args.step != null && args.step !== '' ? +args.step : null, s2 = args.step2 != null && args.step2 !== '' ? +args.step2 : null;
  sec.appendChild(el('h2', null, 'Live bytes over program steps'));
  sec.appendChild(el('p', { cls: 'muted' }, 'Activations live at each step (plus its kernel scratch, red) above the always-live baseline (weights, optimizer state, stash, buffers; grey), on each device\'s timeline: forward, backward, then update steps. Click a step to list its live tensors; shift-click a second step to see what changed between them.'));
  var W = 1300, H = 130;
  r.devices.forEach(function (d) {
    var pts = r.liveness.filter(function (l) { return l.device === d.device; });
    if (!pts.length) return;
    var base = function (l) { return l.always_live_bytes || 0; };
    var max = Math.max.apply(null, pts.map(function (l) { return l.live_bytes + base(l); }).concat([1]));
    var peak = pts.reduce(function (p, l) { return l.live_bytes > p.live_bytes ? l : p; }, pts[0]);
    var n = pts.length, bw = (W - 70) / n;
    var g = svg('svg', { width: W, height: H + 24, class: 'chart', id: 'liveness-device-' + d.device, 'data-peak-step': peak.step, 'data-peak-bytes': peak.live_bytes,
                         'data-always-live': base(peak), 'data-peak-total': peak.live_bytes + base(peak) });
    var t = svg('text', { x: 4, y: 14, 'font-size': 12 }); t.textContent = 'device ' + d.device + ' - peak ' + fmtBytes(peak.live_bytes) + ' at step ' + peak.step + ' (' + peak.name + ') on ' + fmtBytes(base(peak)) + ' always live: ' + fmtBytes(peak.live_bytes + base(peak)) + ' in use';
    g.appendChild(t);
    var path = '';
    pts.forEach(function (l, i) {
      var hb = (H - 24) * base(l) / max, h = (H - 24) * l.live_bytes / max, x = 60 + i * bw, y = H - hb - h;
      var sel = dev === d.device && (l.step === s1 || l.step === s2);
      var rect = svg('rect', { x: x + 0.5, y: 20, width: Math.max(1, bw - 1), height: H - 20, fill: sel ? '#ffe08a' : 'transparent', class: 'step', 'data-step': l.step });
      var tt = svg('title', {}); tt.textContent = 'step ' + l.step + ': ' + l.name + ' - ' + fmtBytes(l.live_bytes) + ' live + ' + fmtBytes(base(l)) + ' always live'; rect.appendChild(tt);
      rect.addEventListener('click', function (ev) {
        if (ev.shiftKey && dev === d.device && s1 != null) setHash('liveness', { device: d.device, step: s1, step2: l.step });
        else setHash('liveness', { device: d.device, step: l.step });
      });
      g.appendChild(rect);
      path += (i ? 'L' : 'M') + (x + bw / 2).toFixed(1) + ' ' + y.toFixed(1);
      g.appendChild(svg('rect', { x: x + 1, y: H - hb, width: Math.max(1, bw - 2), height: hb, fill: '#98a2b3', 'fill-opacity': 0.45, 'pointer-events': 'none' }));
      var bar = svg('rect', { x: x + 1, y: y, width: Math.max(1, bw - 2), height: h, fill: '#f04438', 'fill-opacity': 0.35, 'pointer-events': 'none' });
      g.appendChild(bar);
    });
    g.appendChild(svg('path', { d: path, fill: 'none', stroke: '#b42318', 'stroke-width': 1.5, 'pointer-events': 'none' }));
    var ax = svg('text', { x: 4, y: 32, 'font-size': 10, fill: '#667085' }); ax.textContent = fmtBytes(max); g.appendChild(ax);
    var ax2 = svg('text', { x: 60, y: H + 16, 'font-size': 10, fill: '#667085' }); ax2.textContent = 'step 0'; g.appendChild(ax2);
    var ax3 = svg('text', { x: W - 10, y: H + 16, 'font-size': 10, fill: '#667085', 'text-anchor': 'end' }); ax3.textContent = 'step ' + pts[n - 1].step; g.appendChild(ax3);
    sec.appendChild(g);
  });
  if (dev == null || s1 == null) return;
  var nameOf = function (s) { var l = r.liveness.filter(function (x) { return x.device === dev && x.step === s; })[0]; return l ? l.name : '?'; };
  var live1 = liveAt(r, dev, s1);
  sec.appendChild(el('h2', { id: 'live-title', 'data-device': dev, 'data-step': s1 }, 'Device ' + dev + ', step ' + s1 + ' (' + nameOf(s1) + '): ' + live1.length + ' live tensors, ' + fmtBytes(sum(live1, function (t) { return t.bytes * t.slots; }))));
  var rowsFor = function (ts) { return ts.map(function (t) { return el('tr', { 'data-name': t.name }, td(t.name), td(t.category), td(t.shape), td(fmtBytes(t.bytes * t.slots), 'num'), td(t.first_step + '-' + t.last_step)); }); };
  sec.appendChild(table(['tensor', 'category', 'shape', 'bytes', 'live steps'], rowsFor(live1), { id: 'live-list', 'data-count': live1.length }));
  /* the live tensors, the op's kernel scratch (no tensor) and the always-live
   * baseline add up to what the step holds */
  var l1 = r.liveness.filter(function (x) { return x.device === dev && x.step === s1; })[0];
  if (l1) {
    var tensorBytes = sum(live1, function (t) { return t.bytes * t.slots; }), scratch = Math.max(0, l1.live_bytes - tensorBytes);
    var totalRow = function (what, v, key) { return el('tr', { 'data-kind': key, 'data-value': v }, td(what), td(fmtBytes(v), 'num')); };
    sec.appendChild(table(['at step ' + s1, 'bytes'], [
      totalRow('live tensors (' + live1.length + ')', tensorBytes, 'tensors'),
      totalRow('kernel scratch of ' + l1.name, scratch, 'scratch'),
      totalRow('live (the chart\'s red)', l1.live_bytes, 'live'),
      totalRow('always live (grey)', l1.always_live_bytes || 0, 'always'),
      totalRow('in use', l1.live_bytes + (l1.always_live_bytes || 0), 'total')], { id: 'live-totals' }));
  }
  if (s2 != null) {
    var live2 = liveAt(r, dev, s2), n1 = {}, n2 = {};
    live1.forEach(function (t) { n1[t.name] = 1; }); live2.forEach(function (t) { n2[t.name] = 1; });
    var added = live2.filter(function (t) { return !n1[t.name]; }), freed = live1.filter(function (t) { return !n2[t.name]; });
    sec.appendChild(el('h2', { id: 'live-diff-title' }, 'From step ' + s1 + ' to step ' + s2 + ' (' + nameOf(s2) + '): ' + fmtBytes(sum(live2, function (t) { return t.bytes * t.slots; }) - sum(live1, function (t) { return t.bytes * t.slots; })) + ' change'));
    sec.appendChild(el('h3', null, 'live at step ' + s2 + ' only (' + added.length + ')'));
    sec.appendChild(table(['tensor', 'category', 'shape', 'bytes', 'live steps'], rowsFor(added), { id: 'live-added', 'data-count': added.length }));
    sec.appendChild(el('h3', null, 'live at step ' + s1 + ' only (' + freed.length + ')'));
    sec.appendChild(table(['tensor', 'category', 'shape', 'bytes', 'live steps'], rowsFor(freed), { id: 'live-freed', 'data-count': freed.length }));
  }
};

/* ---- Program Tree ---- */
renderers.program = function (sec) {
  var r = reports[cur], kids = {}, roots = [];
  if (reports[1]) renderProgramCompare(sec, reports[0], reports[1]);
  r.steps.forEach(function (s) { if (s.parent == null) roots.push(s); else (kids[s.parent] = kids[s.parent] || []).push(s); });
  Object.keys(kids).forEach(function (k) { kids[k].sort(function (x, y) { return x.position - y.position; }); });
  var opName = {}; r.ops.forEach(function (o) { opName[o.id] = o; });
  var count = 0;
  function node(s, depth) {
    count++;
    var label = [el('span', { cls: 'kind' }, s.kind), s.name, s.phase ? el('span', { cls: 'muted' }, '  ' + s.phase) : null,
      s.op != null && opName[s.op] ? el('span', { cls: 'muted' }, '  ' + opName[s.op].type) : null];
    var c = kids[s.id];
    if (!c) return el('div', { cls: 'leaf', 'data-step-id': s.id }, label);
    var det = el('details', { 'data-step-id': s.id }, el('summary', null, label, el('span', { cls: 'muted' }, '  (' + c.length + ')')));
    if (depth < 3) det.open = true;
    c.forEach(function (k) { det.appendChild(node(k, depth + 1)); });
    return det;
  }
  sec.appendChild(el('div', { cls: 'controls' },
    el('button', { onclick: function () { sec.querySelectorAll('details').forEach(function (d) { d.open = true; }); } }, 'expand all'),
    el('button', { onclick: function () { sec.querySelectorAll('details').forEach(function (d) { d.open = false; }); } }, 'collapse all')));
  var tree = el('div', { cls: 'tree', id: 'program-tree' });
  roots.forEach(function (s) { tree.appendChild(node(s, 0)); });
  tree.setAttribute('data-count', count);
  sec.appendChild(tree);
};

/* ---- Two reports: the comparisons at the top of Liveness, Program Tree,
 * Operations and Execution Trace (A = the first report, B = the second) ---- */
function cmpHeading(sec, what, a, b) {
  sec.appendChild(el('h2', null, what + ': A compared with B'));
  sec.appendChild(el('p', { cls: 'muted' }, 'A = ' + a.path + ', B = ' + b.path + '. Differences are B - A. The selector in the header chooses which report the views below show.'));
}
function renderLivenessCompare(sec, a, b) {
  cmpHeading(sec, 'Live bytes', a, b);
  var W = 1300, H = 130, nd = Math.max(a.nDevices, b.nDevices), rows = [];
  for (var d = 0; d < nd; d++) {
    var pa = a.liveness.filter(function (l) { return l.device === d; }), pb = b.liveness.filter(function (l) { return l.device === d; });
    var peak = function (p) { return p.reduce(function (m, l) { return Math.max(m, l.live_bytes); }, 0); };
    var ka = peak(pa), kb = peak(pb), max = Math.max(ka, kb, 1), n = Math.max(pa.length, pb.length, 2);
    var g = svg('svg', { width: W, height: H + 24, class: 'chart', id: 'liveness-compare-' + d, 'data-peak-a': ka, 'data-peak-b': kb });
    var t = svg('text', { x: 4, y: 14, 'font-size': 12 });
    t.textContent = 'device ' + d + ' - peak A ' + fmtBytes(ka) + ', B ' + fmtBytes(kb) + ' (' + (kb >= ka ? '+' : '') + fmtBytes(kb - ka) + ')';
    g.appendChild(t);
    [[pa, '#2f6fdb', 'A'], [pb, '#f79009', 'B']].forEach(function (s) {
      if (!s[0].length) return;
      var path = s[0].map(function (l, i) { return (i ? 'L' : 'M') + (60 + i * (W - 70) / (n - 1)).toFixed(1) + ' ' + (H - (H - 24) * l.live_bytes / max).toFixed(1); }).join('');
      g.appendChild(svg('path', { d: path, fill: 'none', stroke: s[1], 'stroke-width': 1.5 }));
    });
    var ax = svg('text', { x: 4, y: 32, 'font-size': 10, fill: '#667085' }); ax.textContent = fmtBytes(max); g.appendChild(ax);
    var ax2 = svg('text', { x: W - 10, y: H + 16, 'font-size': 10, fill: '#667085', 'text-anchor': 'end' }); ax2.textContent = 'step ' + (n - 1); g.appendChild(ax2);
    sec.appendChild(g);
    rows.push(el('tr', null, td('device ' + d), td(fmtBytes(ka), 'num', { 'data-value': ka }), td(fmtBytes(kb), 'num', { 'data-value': kb }),
      diffCells(ka, kb, fmtBytes), td(String(pa.length), 'num'), td(String(pb.length), 'num')));
  }
  sec.appendChild(el('div', { cls: 'legend' }, el('span', null, el('i', { style: 'background:#2f6fdb' }), 'A'), el('span', null, el('i', { style: 'background:#f79009' }), 'B')));
  sec.appendChild(table(['device', 'peak A', 'peak B', 'diff', 'diff %', 'steps A', 'steps B'], rows, { id: 'liveness-compare' }));
}
function renderProgramCompare(sec, a, b) {
  cmpHeading(sec, 'Program steps', a, b);
  var nd = Math.max(a.nDevices, b.nDevices), kinds = [], count = function (r, d, k) {
    return r.steps.filter(function (s) { return (d == null || s.device === d) && (k == null || s.kind === k); }).length;
  };
  a.steps.concat(b.steps).forEach(function (s) { if (kinds.indexOf(s.kind) < 0) kinds.push(s.kind); });
  var rows = [];
  for (var d = 0; d < nd; d++) {
    var ca = count(a, d), cb = count(b, d);
    rows.push(el('tr', { 'data-device': d, 'data-a': ca, 'data-b': cb }, td('device ' + d), td(String(ca), 'num'), td(String(cb), 'num'), diffCells(ca, cb, String)));
  }
  sec.appendChild(table(['device', 'steps A', 'steps B', 'diff', 'diff %'], rows, { id: 'program-compare' }));
  sec.appendChild(table(['kind', 'steps A', 'steps B', 'diff', 'diff %'], kinds.map(function (k) {
    var ca = count(a, null, k), cb = count(b, null, k);
    return el('tr', { 'data-kind': k }, td(k), td(String(ca), 'num'), td(String(cb), 'num'), diffCells(ca, cb, String));
  }), { id: 'program-compare-kinds' }));
}
function renderOpsCompare(sec, a, b) {
  cmpHeading(sec, 'Operations by type', a, b);
  var types = {}, add = function (r, side) {
    r.ops.forEach(function (o) {
      var t = types[o.type] = types[o.type] || { type: o.type, A: { count: 0, flops: 0, ns: 0 }, B: { count: 0, flops: 0, ns: 0 } };
      t[side].count++; t[side].flops += (o.flops || 0) * (o.calls || 0); t[side].ns += o.total_ns || 0;
    });
  };
  add(a, 'A'); add(b, 'B');
  var tl = Object.keys(types).map(function (k) { return types[k]; }).sort(function (x, y) { return Math.max(y.A.ns, y.B.ns) - Math.max(x.A.ns, x.B.ns); });
  var nsFmt = function (x) { return fmtNs(x); };
  sec.appendChild(table(['type', 'count A', 'count B', 'diff', 'FLOPs (all calls) A', 'FLOPs (all calls) B', 'diff', 'diff %', 'time A', 'time B', 'diff', 'diff %', ''], tl.map(function (t) {
    var only = !t.B.count ? 'only in A' : !t.A.count ? 'only in B' : '';
    return el('tr', { 'data-type': t.type, 'data-count-a': t.A.count, 'data-count-b': t.B.count },
      td(t.type), td(String(t.A.count), 'num'), td(String(t.B.count), 'num'), diffCells(t.A.count, t.B.count, String)[0],
      td(fmtNum(t.A.flops), 'num'), td(fmtNum(t.B.flops), 'num'), diffCells(t.A.flops, t.B.flops, fmtNum),
      td(fmtNs(t.A.ns), 'num'), td(fmtNs(t.B.ns), 'num'), diffCells(t.A.ns, t.B.ns, nsFmt),
      td(only, only === 'only in A' ? 'only-a' : 'only-b'));
  }), { id: 'op-types-compare' }));
  /* ops by name present in only one of the two */
  var na = {}, nb = {}, only = [];
  a.ops.forEach(function (o) { na[o.name] = o; }); b.ops.forEach(function (o) { nb[o.name] = o; });
  a.ops.forEach(function (o) { if (!(o.name in nb)) only.push([o, 'only in A']); });
  b.ops.forEach(function (o) { if (!(o.name in na)) only.push([o, 'only in B']); });
  var nA = only.filter(function (x) { return x[1] === 'only in A'; }).length;
  sec.appendChild(el('h3', { id: 'ops-only-title', 'data-only-a': nA, 'data-only-b': only.length - nA },
    'Ops present in only one report: ' + nA + ' only in A, ' + (only.length - nA) + ' only in B' + (only.length > 300 ? ' (first 300 listed)' : '')));
  if (only.length) sec.appendChild(table(['op', 'type', 'phase', 'in', 'FLOPs per call', 'time'], only.slice(0, 300).map(function (x) {
    return el('tr', { 'data-name': x[0].name, 'data-in': x[1] === 'only in A' ? 'A' : 'B' }, td(x[0].name), td(x[0].type), td(x[0].phase),
      td(x[1], x[1] === 'only in A' ? 'only-a' : 'only-b'), td(fmtNum(x[0].flops), 'num'), td(fmtNs(x[0].total_ns || 0), 'num'));
  }), { id: 'ops-only' }));
  sec.appendChild(el('h2', null, 'Showing: ' + reports[cur].path));
}
function renderTraceCompare(sec, a, b) {
  cmpHeading(sec, 'Busy share of host step 0', a, b);
  var nd = Math.max(a.nDevices, b.nDevices), rows = [];
  var pp = function (x) { return (x * 100).toFixed(1) + ' pt'; };
  for (var d = 0; d < nd; d++) {
    var ba = d < a.nDevices ? a.busy[d] : 0, bb = d < b.nDevices ? b.busy[d] : 0;
    rows.push(el('tr', null, td('device ' + d), td(pct(ba), 'num', { id: 'busy-a-' + d, 'data-value': ba.toFixed(4) }),
      td(pct(bb), 'num', { id: 'busy-b-' + d, 'data-value': bb.toFixed(4) }), diffCells(ba, bb, pp)));
  }
  rows.push(el('tr', null, td('host step 0 duration'), td(fmtNs(a.span), 'num'), td(fmtNs(b.span), 'num'), diffCells(a.span, b.span, fmtNs)));
  sec.appendChild(table(['device', 'busy A', 'busy B', 'diff', 'diff %'], rows, { id: 'trace-compare' }));
  sec.appendChild(el('h2', null, 'Showing: ' + reports[cur].path));
}

/* ---- Operations graph ----
 * The op_edges table drawn on a canvas: layer = longest path from a source
 * among the ops shown (left to right), ops in a layer ordered by device then
 * by their producers' mean position (fewer crossings). Fill = phase, outline =
 * device, radius grows with FLOPs. Forward ops only by default (a ResNet-50
 * has ~280 of its ~1100 there); backward and update are toggles. */
var DEVICE_COLOURS = ['#344054', '#c11574', '#0e9384', '#b54708', '#5925dc', '#026aa2', '#3f621a', '#b42318'];
function opGraphModel(r, phases, filter) {
  var shown = {}, nodes = [];
  r.ops.forEach(function (o) {
    if (!phases[o.phase]) return;
    if (filter && (o.name + ' ' + o.type).toLowerCase().indexOf(filter) < 0) return;
    shown[o.id] = { op: o, layer: 0, ins: [], outs: [] }; nodes.push(shown[o.id]);
  });
  var edges = [];
  r.op_edges.forEach(function (e) {
    var p = shown[e.producer], c = shown[e.consumer];
    if (!p || !c || p === c) return;
    p.outs.push(c); c.ins.push(p); edges.push([p, c]);
  });
  /* longest path from a source (Kahn's order; a cycle, which a profile
   * should not have, leaves its ops in layer 0) */
  var indeg = new Map(), queue = [];
  nodes.forEach(function (n) { indeg.set(n, n.ins.length); if (!n.ins.length) queue.push(n); });
  for (var qi = 0; qi < queue.length; qi++) {
    var n = queue[qi];
    n.outs.forEach(function (c) { if (c.layer < n.layer + 1) c.layer = n.layer + 1; indeg.set(c, indeg.get(c) - 1); if (!indeg.get(c)) queue.push(c); });
  }
  var layers = [];
  queue.forEach(function (n) { (layers[n.layer] = layers[n.layer] || []).push(n); });
  nodes.forEach(function (n) { if (indeg.get(n) > 0) (layers[0] = layers[0] || []).push(n); });
  var maxRows = 1;
  layers.forEach(function (l) {
    if (!l) return;
    l.forEach(function (n) { n.key = n.ins.length ? sum(n.ins, function (p) { return p.row || 0; }) / n.ins.length : n.op.id * 1e-6; });
    l.sort(function (a, b) { return a.op.device - b.op.device || a.key - b.key || a.op.id - b.op.id; });
    l.forEach(function (n, i) { n.row = i - (l.length - 1) / 2; });
    if (l.length > maxRows) maxRows = l.length;
  });
  /* A deep network is a long chain (a ResNet-50's forward pass has ~215
   * layers): the layers wrap into bands, read left to right, top to bottom,
   * so the fitted view keeps the ops large enough to see and click. */
  var SX = 44, SY = 30, perBand = Math.max(8, Math.min(layers.length, 30)), bandH = maxRows * SY + 36;
  layers.forEach(function (l, x) {
    if (!l) return;
    l.forEach(function (n) { n.x = (x % perBand) * SX; n.y = Math.floor(x / perBand) * bandH + (n.row + (maxRows - 1) / 2) * SY; });
  });
  var maxFlops = Math.max.apply(null, nodes.map(function (n) { return n.op.flops || 0; }).concat([1]));
  nodes.forEach(function (n) { n.rad = 4 + 9 * Math.sqrt((n.op.flops || 0) / maxFlops); });
  return { nodes: nodes, edges: edges, byId: shown, layers: layers.length, maxRows: maxRows,
           w: (Math.min(perBand, layers.length) - 1) * SX, h: Math.ceil(layers.length / perBand) * bandH - 36, bandH: bandH, perBand: perBand };
}
var opGraphView = {};
function renderOpGraph(sec, r, args, selId, go) {
  var phases = { forward: 1, backward: args.gbwd === '1', update: args.gupd === '1' };
  var gf = (args.gfilter || '').toLowerCase();
  sec.appendChild(el('h2', null, 'Operations graph'));
  if (!r.op_edges.length) { sec.appendChild(el('p', { cls: 'muted', id: 'ops-graph-none' }, 'This profile has no op_edges table (written by an older tilegraph).')); return; }
  var t0 = performance.now(), m = opGraphModel(r, phases, gf);
  var gfilter = el('input', { type: 'search', placeholder: 'show ops whose name matches', value: args.gfilter || '', id: 'graph-filter' });
  gfilter.addEventListener('change', function () { go({ gfilter: gfilter.value }); });
  var box = function (key, label) {
    var c = el('input', { type: 'checkbox', id: 'graph-' + key });
    c.checked = args[key] === '1';
    c.addEventListener('change', function () { var o = {}; o[key] = c.checked ? '1' : ''; go(o); });
    return el('label', null, c, ' ' + label);
  };
  sec.appendChild(el('div', { cls: 'controls' }, gfilter, box('gbwd', 'backward'), box('gupd', 'update'),
    el('span', { cls: 'muted' }, m.nodes.length + ' ops, ' + m.edges.length + ' edges, ' + m.layers + ' layers. Wheel zooms, drag pans, click an op to select it, double-click resets.')));
  var W = 1340, H = Math.max(260, Math.min(760, m.h + 60));
  var cv = el('canvas', { id: 'ops-graph', width: W, height: H, 'data-nodes': m.nodes.length, 'data-edges': m.edges.length, 'data-layers': m.layers, 'data-rows': m.maxRows });
  sec.appendChild(cv);
  var leg = el('div', { cls: 'legend' });
  Object.keys(PHASE_COLOUR).forEach(function (p) { leg.appendChild(el('span', null, el('i', { style: 'background:' + PHASE_COLOUR[p] }), p)); });
  r.devices.forEach(function (d) { leg.appendChild(el('span', null, el('i', { style: 'background:#fff;border:2px solid ' + DEVICE_COLOURS[d.device % DEVICE_COLOURS.length] }), 'device ' + d.device)); });
  leg.appendChild(el('span', { cls: 'muted' }, 'size: FLOPs'));
  sec.appendChild(leg);
  var ctx = cv.getContext('2d');
  /* fit: the whole graph, but never so small that a node is under 2 px */
  var gw = Math.max(1, m.w), gh = Math.max(1, m.h);
  var fit = function () { var k = Math.max(0.02, Math.min((W - 80) / gw, (H - 40) / gh, 1.3)); return { k: k, x: W / 2 - k * gw / 2, y: H / 2 - k * gh / 2 }; };
  /* the pan and zoom survive a click (which re-renders the tab) */
  var viewKey = r.path + '|' + args.gbwd + args.gupd + '|' + gf, view = fit();
  var sel = selId != null ? m.byId[selId] : null;
  if (opGraphView.key === viewKey) view = opGraphView.view;
  else if (sel && view.k < 0.5) view = { k: 0.8, x: W / 2 - 0.8 * sel.x, y: H / 2 - 0.8 * sel.y };
  opGraphView = { key: viewKey, view: view };
  function draw() {
    opGraphView.view = view;
    ctx.setTransform(1, 0, 0, 1, 0, 0); ctx.clearRect(0, 0, W, H);
    ctx.setTransform(view.k, 0, 0, view.k, view.x, view.y);
    /* edges within a band solid, edges wrapping to a later band faint */
    ctx.lineWidth = 1 / view.k;
    [[false, 'rgba(102,112,133,0.55)'], [true, 'rgba(102,112,133,0.18)']].forEach(function (p) {
      ctx.strokeStyle = p[1]; ctx.beginPath();
      m.edges.forEach(function (e) { if ((Math.floor(e[0].layer / m.perBand) !== Math.floor(e[1].layer / m.perBand)) === p[0]) { ctx.moveTo(e[0].x, e[0].y); ctx.lineTo(e[1].x, e[1].y); } });
      ctx.stroke();
    });
    if (sel) {
      ctx.strokeStyle = '#1d2430'; ctx.lineWidth = 2.5 / view.k; ctx.beginPath();
      sel.ins.concat(sel.outs).forEach(function (o) { ctx.moveTo(sel.x, sel.y); ctx.lineTo(o.x, o.y); });
      ctx.stroke();
    }
    m.nodes.forEach(function (n) {
      ctx.beginPath(); ctx.arc(n.x, n.y, n.rad, 0, 6.2832);
      ctx.fillStyle = PHASE_COLOUR[n.op.phase] || '#98a2b3'; ctx.fill();
      ctx.lineWidth = (n === sel ? 4 : 2) / Math.max(view.k, 0.5);
      ctx.strokeStyle = n === sel ? '#fdb022' : DEVICE_COLOURS[n.op.device % DEVICE_COLOURS.length]; ctx.stroke();
    });
    if (sel) { ctx.beginPath(); ctx.arc(sel.x, sel.y, sel.rad + 5 / view.k, 0, 6.2832); ctx.strokeStyle = '#1d2430'; ctx.lineWidth = 2.5 / view.k; ctx.stroke(); }
    if (view.k > 0.9) {
      ctx.fillStyle = '#1d2430'; ctx.font = (10 / Math.min(view.k, 1.5)) + 'px sans-serif';
      m.nodes.forEach(function (n) { ctx.fillText(n.op.type, n.x - n.rad, n.y + n.rad + 10 / Math.min(view.k, 1.5)); });
    }
  }
  draw();
  var nodeAt = function (ev) {
    var wx = (ev.offsetX - view.x) / view.k, wy = (ev.offsetY - view.y) / view.k, best = null, bd = Infinity;
    m.nodes.forEach(function (n) { var d = (n.x - wx) * (n.x - wx) + (n.y - wy) * (n.y - wy); if (d < bd) { bd = d; best = n; } });
    return best && Math.sqrt(bd) <= best.rad + 3 / view.k ? best : null;
  };
  var down = null;
  cv.addEventListener('mousedown', function (ev) { down = { x: ev.offsetX, y: ev.offsetY, v: { k: view.k, x: view.x, y: view.y }, moved: false }; });
  cv.addEventListener('mousemove', function (ev) {
    if (down) {
      if (Math.abs(ev.offsetX - down.x) + Math.abs(ev.offsetY - down.y) > 3) down.moved = true;
      view = { k: down.v.k, x: down.v.x + ev.offsetX - down.x, y: down.v.y + ev.offsetY - down.y }; draw(); return;
    }
    var n = nodeAt(ev);
    cv.title = n ? n.op.name + '\n' + n.op.type + ', ' + n.op.phase + ', device ' + n.op.device + '\n' + fmtNum(n.op.flops) + ' FLOPs, ' + fmtNs(n.op.total_ns || 0) : '';
    cv.style.cursor = n ? 'pointer' : 'grab';
  });
  cv.addEventListener('mouseup', function (ev) {
    var d = down; down = null;
    if (d && !d.moved) { var n = nodeAt(ev); if (n) go({ op: n.op.id }); }
  });
  cv.addEventListener('mouseleave', function () { down = null; });
  cv.addEventListener('wheel', function (ev) {
    ev.preventDefault();
    var f = ev.deltaY > 0 ? 0.8 : 1.25, k = Math.max(0.02, Math.min(8, view.k * f)), s = k / view.k;
    view = { k: k, x: ev.offsetX - (ev.offsetX - view.x) * s, y: ev.offsetY - (ev.offsetY - view.y) * s }; draw();
  }, { passive: false });
  cv.addEventListener('dblclick', function () { view = fit(); draw(); });
  cv.setAttribute('data-ms', (performance.now() - t0).toFixed(1));
  if (selId != null) {
    var o = r.ops.filter(function (x) { return x.id === selId; })[0];
    if (!o) return;
    var nameOf = function (id) { var x = r.ops.filter(function (y) { return y.id === id; })[0]; return x ? x.name : String(id); };
    var ins = r.op_edges.filter(function (e) { return e.consumer === selId; }).map(function (e) { return nameOf(e.producer); });
    var outs = r.op_edges.filter(function (e) { return e.producer === selId; }).map(function (e) { return nameOf(e.consumer); });
    sec.appendChild(el('h3', { id: 'op-detail-title', 'data-op': selId }, 'Selected: ' + o.name));
    sec.appendChild(table(['', ''], [
      ['type', o.type], ['block', o.block], ['device', String(o.device)], ['phase', o.phase], ['FLOPs', fmtNum(o.flops)],
      ['bytes in / out', fmtBytes(o.bytes_in) + ' / ' + fmtBytes(o.bytes_out)], ['calls', String(o.calls)], ['time', fmtNs(o.total_ns || 0)],
      ['forward of', o.forward_of >= 0 ? nameOf(o.forward_of) : '-'],
      ['inputs from (' + ins.length + ')', ins.join(', ') || '-'], ['outputs to (' + outs.length + ')', outs.join(', ') || '-']
    ].map(function (kv) { return el('tr', null, td(kv[0]), td(kv[1])); }), { id: 'op-detail' }));
  }
}

/* ---- Operations ---- */
/* FLOPs are the profile's per call; the total over the recorded calls is
 * what `tilegraph analyse operations` shows: both, each saying which */
var OP_COLS = [['name', 'op'], ['type', 'type'], ['block', 'block'], ['device', 'device'], ['phase', 'phase'], ['flops', 'FLOPs per call'],
  ['flops_total', 'FLOPs (all calls)'], ['bytes_in', 'bytes in'], ['bytes_out', 'bytes out'], ['calls', 'calls'], ['total_ns', 'time'], ['share', 'time share']];
renderers.operations = function (sec, args) {
  var r = reports[cur], sortKey = args.sort || 'total_ns', desc = args.dir !== 'asc', filter = (args.filter || '').toLowerCase();
  var selId = args.op != null && args.op !== '' ? +args.op : null;
  /* every control keeps the others' state (graph filter, toggles, selection) */
  var go = function (o) { var a = {}; Object.keys(args).forEach(function (k) { a[k] = args[k]; }); Object.keys(o).forEach(function (k) { a[k] = o[k]; }); setHash('operations', a); };
  if (reports[1]) renderOpsCompare(sec, reports[0], reports[1]);
  renderOpGraph(sec, r, args, selId, function (o) { if ('op' in o) o.page = ''; go(o); });
  var total = sum(r.ops, function (o) { return o.total_ns || 0; }) || 1;
  r.ops.forEach(function (o) { o.share = (o.total_ns || 0) / total; o.flops_total = (o.flops || 0) * (o.calls || 0); });
  /* per type */
  var types = {};
  r.ops.forEach(function (o) { var t = types[o.type] = types[o.type] || { type: o.type, count: 0, flops: 0, ns: 0 }; t.count++; t.flops += o.flops_total; t.ns += o.total_ns || 0; });
  var tl = Object.keys(types).map(function (k) { return types[k]; }).sort(function (x, y) { return y.ns - x.ns; });
  sec.appendChild(el('h2', null, 'By op type'));
  sec.appendChild(table(['type', 'count', 'FLOPs (all calls)', 'time', 'time share'], tl.map(function (t) {
    return el('tr', { 'data-type': t.type, 'data-flops': t.flops }, td(t.type), td(String(t.count), 'num'), td(fmtNum(t.flops), 'num'), td(fmtNs(t.ns), 'num'), td(pct(t.ns / total), 'num'));
  }), { id: 'op-types' }));
  sec.appendChild(el('h2', null, 'Operations'));
  var input = el('input', { type: 'search', placeholder: 'filter by name, type, phase', value: args.filter || '', id: 'op-filter' });
  input.addEventListener('change', function () { go({ filter: input.value, page: '' }); });
  sec.appendChild(el('div', { cls: 'controls' }, input, el('span', { cls: 'muted' }, 'click a column to sort')));
  var rows = r.ops.filter(function (o) { return !filter || (o.name + ' ' + o.type + ' ' + o.phase + ' ' + o.block).toLowerCase().indexOf(filter) >= 0; });
  rows.sort(function (x, y) { var a = x[sortKey], b = y[sortKey]; var c = typeof a === 'number' ? a - b : String(a).localeCompare(String(b)); return desc ? -c : c; });
  var thead = el('tr', null, OP_COLS.map(function (c) {
    return el('th', { cls: 'sortable' + (/name|type|block|phase/.test(c[0]) ? '' : ' num'), 'data-key': c[0],
      onclick: function () { go({ sort: c[0], dir: sortKey === c[0] && desc ? 'asc' : 'desc', filter: input.value, page: '' }); } },
      c[1] + (sortKey === c[0] ? (desc ? ' \u25bc' : ' \u25b2') : ''));
  }));
  /* a page of rows at a time: a ResNet-50 has over a thousand ops, and
   * building every row made switching to this tab take a few hundred ms */
  var PAGE = 200, pages = Math.max(1, Math.ceil(rows.length / PAGE)), page = Math.min(pages - 1, Math.max(0, +args.page || 0));
  /* a selected op (clicked in the graph) opens the page that holds it */
  var selIdx = selId == null ? -1 : rows.findIndex(function (o) { return o.id === selId; });
  if (selIdx >= 0 && (args.page == null || args.page === '')) page = Math.floor(selIdx / PAGE);
  var goPage = function (p) { go({ filter: input.value, page: p || '' }); };
  var pager = el('div', { cls: 'controls', id: 'ops-pager', 'data-page': page, 'data-pages': pages },
    el('button', { onclick: function () { goPage(page - 1); } }, '\u25c0 previous'),
    el('span', null, 'rows ' + (rows.length ? page * PAGE + 1 : 0) + '-' + Math.min(rows.length, (page + 1) * PAGE) + ' of ' + rows.length),
    el('button', { onclick: function () { goPage(page + 1); } }, 'next \u25b6'));
  pager.firstChild.disabled = page === 0; pager.lastChild.disabled = page >= pages - 1;
  var body = el('tbody', null, rows.slice(page * PAGE, (page + 1) * PAGE).map(function (o) {
    return el('tr', { 'data-name': o.name, 'data-id': o.id, cls: o.id === selId ? 'selected' : '', id: o.id === selId ? 'ops-selected' : null,
                      onclick: function () { go({ op: o.id }); } }, td(o.name), td(o.type), td(o.block), td(String(o.device), 'num'), td(o.phase), td(fmtNum(o.flops), 'num'),
      td(fmtNum(o.flops_total), 'num'), td(fmtBytes(o.bytes_in), 'num'), td(fmtBytes(o.bytes_out), 'num'), td(String(o.calls), 'num'), td(fmtNs(o.total_ns || 0), 'num'), td(pct(o.share), 'num'));
  }));
  sec.appendChild(el('table', { id: 'ops-table', 'data-count': rows.length, 'data-sort': sortKey }, el('thead', null, thead), body));
  if (pages > 1) sec.appendChild(pager);
};

/* ---- Execution Trace ---- */
var KIND_STYLE = {
  'stream from host': ['#15b79e', 0.45], 'stream to host': ['#0e9384', 0.45], 'copy to device': ['#06aed4', 0.45],
  'wait for device': ['#d0d5dd', 0.25], 'accumulate gradients': ['#ee46bc', 0.6], 'all-reduce': ['#7a5af8', 0.6]
};
var PHASE_COLOUR = { forward: '#2f6fdb', backward: '#f79009', update: '#12b76a' };
function traceStyle(e) {
  if (e.kind === 'execute') return [PHASE_COLOUR[e.phase] || '#667085', 1];
  return KIND_STYLE[e.kind] || ['#98a2b3', 0.4];
}
function rangeSummary(r, from, to) {
  var len = Math.max(1, to - from), out = [];
  for (var rep = 0; rep < r.replicas; rep++) r.devices.forEach(function (d) {
    var acc = {};
    r.trace.forEach(function (e) {
      if (e.device !== d.device || e.replica !== rep) return;
      var ov = Math.min(e.e, to) - Math.max(e.s, from);
      if (ov > 0) acc[e.kind] = (acc[e.kind] || 0) + ov;
    });
    out.push({ device: d.device, replica: rep, acc: acc, len: len });
  });
  return out;
}
/* Pipeline phases of device iteration 0: ramp-up until the last device starts
 * its first forward, ramp-down from when the first device has run its last
 * forward... measured on execute events. */
function pipelinePhases(r) {
  var ex = r.trace.filter(function (e) { return e.kind === 'execute' && e.replica === 0 && e.iteration === 0 && e.phase !== 'update'; });
  if (!ex.length || r.nDevices < 2) return null;
  var firstStart = r.devices.map(function (d) { return Math.min.apply(null, ex.filter(function (e) { return e.device === d.device; }).map(function (e) { return e.s; }).concat([Infinity])); });
  var lastEnd = r.devices.map(function (d) { return Math.max.apply(null, ex.filter(function (e) { return e.device === d.device; }).map(function (e) { return e.e; }).concat([-Infinity])); });
  var start = Math.min.apply(null, firstStart), end = Math.max.apply(null, lastEnd);
  var steadyFrom = Math.max.apply(null, firstStart), steadyTo = Math.min.apply(null, lastEnd);
  if (!(steadyFrom < steadyTo)) return null;
  return { start: start, steadyFrom: steadyFrom, steadyTo: steadyTo, end: end };
}
renderers.trace = function (sec, args) {
  var r = reports[cur];
  if (reports[1]) renderTraceCompare(sec, reports[0], reports[1]);
  if (!r.trace.length) { sec.appendChild(el('p', { id: 'trace-empty' }, 'This profile holds no execution trace (execution_profile is off).')); return; }
  var phases = pipelinePhases(r);
  var iter0 = r.trace.filter(function (e) { return e.iteration === 0; });
  var i0end = Math.max.apply(null, iter0.map(function (e) { return e.e; }).concat([r.span]).slice(0, iter0.length || 1));
  var view = { from: args.vfrom != null ? +args.vfrom : 0, to: args.vto != null ? +args.vto : (r.meta.iterations > 1 ? i0end : r.span) };
  var sel = args.from != null && args.to != null ? { from: +args.from, to: +args.to } : null;
  sec.appendChild(el('h2', null, 'Execution trace of host step 0 (' + fmtNs(r.span) + ', ' + (r.meta.iterations || 1) + ' device iterations)'));
  var info = el('span', { cls: 'muted', id: 'trace-view', 'data-from': view.from, 'data-to': view.to });
  function go(v, s) {
    var a = { vfrom: Math.round(v.from), vto: Math.round(v.to) };
    if (s) { a.from = Math.round(s.from); a.to = Math.round(s.to); }
    setHash('trace', a);
  }
  sec.appendChild(el('div', { cls: 'controls' },
    el('button', { onclick: function () { var c = (view.from + view.to) / 2, w = (view.to - view.from) / 4; go({ from: c - w, to: c + w }, sel); } }, 'zoom in'),
    el('button', { onclick: function () { var c = (view.from + view.to) / 2, w = (view.to - view.from); go({ from: Math.max(0, c - w), to: Math.min(r.span, c + w) }, sel); } }, 'zoom out'),
    el('button', { onclick: function () { go({ from: 0, to: i0end }, sel); } }, 'first device iteration'),
    el('button', { onclick: function () { go({ from: 0, to: r.span }, sel); } }, 'whole host step'),
    el('button', { onclick: function () { if (sel) go(sel, sel); } }, 'zoom to selection'),
    info));
  sec.appendChild(el('p', { cls: 'muted' }, 'Drag to select a time range (summary below); the mouse wheel zooms around the pointer; shift-drag pans.'));
  if (r.predicted_trace.length) sec.appendChild(el('p', { cls: 'muted', id: 'trace-predicted' }, 'The "predicted" lanes are one weight update as the cost model\'s schedule simulator predicted it at compile time (docs/multi-device.md), drawn from the first measured forward: a lane longer than its device\'s measured one is a prediction too slow, a shorter one too fast.'));
  var lanes = [];
  for (var rep = 0; rep < r.replicas; rep++) r.devices.forEach(function (d) { lanes.push({ device: d.device, replica: rep }); });
  /* the cost model's timeline of one weight update, from the first measured
   * forward of iteration 0, one lane per device under the measured ones */
  var p0 = phases ? phases.start : Math.min.apply(null, iter0.filter(function (e) { return e.kind === 'execute'; }).map(function (e) { return e.s; }).concat([0]));
  if (r.predicted_trace.length) r.devices.forEach(function (d) { lanes.push({ device: d.device, predicted: true }); });
  var LH = 34, TOP = 36, LEFT = 120, W = 1340, H = TOP + lanes.length * LH + 30;
  var cv = el('canvas', { id: 'trace-canvas', width: W, height: H });
  sec.appendChild(cv);
  var ctx = cv.getContext('2d'), PW = W - LEFT - 10;
  var X = function (t) { return LEFT + (t - view.from) / (view.to - view.from) * PW; };
  var T = function (x) { return view.from + (x - LEFT) / PW * (view.to - view.from); };
  info.textContent = 'view ' + fmtNs(view.from) + ' - ' + fmtNs(view.to);
  function draw(drag) {
    ctx.clearRect(0, 0, W, H);
    ctx.font = '11px sans-serif';
    if (phases) [[phases.start, phases.steadyFrom, 'ramp-up', '#fef0c7'], [phases.steadyFrom, phases.steadyTo, 'steady state', '#d1fadf'],
                 [phases.steadyTo, phases.end, 'ramp-down', '#fef0c7']].forEach(function (p) {
      var x0 = Math.max(LEFT, X(p[0])), x1 = Math.min(W - 10, X(p[1]));
      if (x1 <= x0) return;
      ctx.fillStyle = p[3]; ctx.fillRect(x0, 16, x1 - x0, H - 46);
      ctx.fillStyle = '#344054'; if (x1 - x0 > 50) ctx.fillText(p[2] + ' (iteration 0)', x0 + 4, 28);
    });
    lanes.forEach(function (l, i) {
      var y = TOP + i * LH;
      ctx.fillStyle = '#1d2430'; ctx.fillText((l.predicted ? 'predicted ' : 'device ') + l.device + (r.replicas > 1 && !l.predicted ? ' r' + l.replica : ''), 6, y + LH / 2 + 4);
      ctx.strokeStyle = '#eaecf0'; ctx.beginPath(); ctx.moveTo(LEFT, y + LH - 2); ctx.lineTo(W - 10, y + LH - 2); ctx.stroke();
      if (l.predicted) {
        r.predicted_trace.forEach(function (e) {
          var s0 = p0 + e.start_ns, e0 = p0 + e.end_ns;
          if (e.device !== l.device || e0 < view.from || s0 > view.to) return;
          var x0 = X(s0), x1 = X(e0);
          ctx.globalAlpha = 0.55; /* a prediction, drawn lighter than the measurement */
          ctx.fillStyle = PHASE_COLOUR[e.phase === 'weight' ? 'backward' : e.phase] || '#667085';
          ctx.fillRect(x0, y + 2, Math.max(0.6, x1 - x0), LH - 8);
          ctx.globalAlpha = 1;
          if (x1 - x0 > 14 && e.micro_batch >= 0) { ctx.fillStyle = '#fff'; ctx.fillText((e.phase === 'weight' ? 'W' : '') + e.micro_batch, x0 + 2, y + LH / 2 + 2); }
        });
        return;
      }
      r.trace.forEach(function (e) {
        if (e.device !== l.device || e.replica !== l.replica || e.e < view.from || e.s > view.to) return;
        var st = traceStyle(e), x0 = X(e.s), x1 = X(e.e), h = (LH - 6) * st[1];
        ctx.fillStyle = st[0];
        ctx.fillRect(x0, y + (LH - 6 - h), Math.max(0.6, x1 - x0), h);
        if (e.kind === 'execute' && x1 - x0 > 14 && e.micro_batch >= 0) {
          ctx.fillStyle = '#fff'; ctx.fillText(String(e.micro_batch), x0 + 2, y + LH / 2 + 2);
        }
      });
    });
    /* time axis */
    ctx.fillStyle = '#667085';
    for (var k = 0; k <= 8; k++) { var t = view.from + (view.to - view.from) * k / 8; ctx.fillText(fmtNs(t), X(t) - (k === 8 ? 50 : 0), H - 8); }
    var s = drag || sel;
    if (s) { ctx.fillStyle = 'rgba(47,111,219,0.15)'; ctx.fillRect(X(s.from), TOP - 4, X(s.to) - X(s.from), lanes.length * LH + 4);
             ctx.strokeStyle = '#2f6fdb'; ctx.strokeRect(X(s.from), TOP - 4, X(s.to) - X(s.from), lanes.length * LH + 4); }
  }
  draw();
  var down = null;
  cv.addEventListener('mousedown', function (ev) { down = { x: ev.offsetX, shift: ev.shiftKey, v: { from: view.from, to: view.to } }; });
  cv.addEventListener('mousemove', function (ev) {
    if (!down) return;
    if (down.shift) { var dt = (down.x - ev.offsetX) / PW * (down.v.to - down.v.from); view.from = down.v.from + dt; view.to = down.v.to + dt; draw(); }
    else { var a = T(Math.min(down.x, ev.offsetX)), b = T(Math.max(down.x, ev.offsetX)); draw({ from: a, to: b }); }
  });
  cv.addEventListener('mouseup', function (ev) {
    if (!down) return;
    var d = down; down = null;
    if (d.shift) go(view, sel);
    else if (Math.abs(ev.offsetX - d.x) > 3) go(view, { from: T(Math.min(d.x, ev.offsetX)), to: T(Math.max(d.x, ev.offsetX)) });
  });
  cv.addEventListener('wheel', function (ev) {
    ev.preventDefault();
    var t = T(ev.offsetX), f = ev.deltaY > 0 ? 1.25 : 0.8;
    go({ from: Math.max(0, t - (t - view.from) * f), to: t + (view.to - t) * f }, sel);
  }, { passive: false });
  /* legend */
  var leg = el('div', { cls: 'legend' });
  Object.keys(PHASE_COLOUR).forEach(function (p) { leg.appendChild(el('span', null, el('i', { style: 'background:' + PHASE_COLOUR[p] }), p + ' (execute)')); });
  Object.keys(KIND_STYLE).forEach(function (k) { leg.appendChild(el('span', null, el('i', { style: 'background:' + KIND_STYLE[k][0] }), k)); });
  sec.appendChild(leg);
  /* summary of the selected range (the whole host step when nothing is selected) */
  var range = sel || { from: 0, to: r.span };
  sec.appendChild(el('h2', null, (sel ? 'Selected range ' : 'Whole host step ') + fmtNs(range.from) + ' - ' + fmtNs(range.to) + ' (' + fmtNs(range.to - range.from) + ')'));
  var kinds = ['execute', 'copy to device', 'stream from host', 'stream to host', 'wait for device', 'accumulate gradients', 'all-reduce'];
  var summ = rangeSummary(r, range.from, range.to);
  sec.appendChild(table(['device', 'busy (execute)'].concat(kinds.slice(1)).concat(['idle']), summ.map(function (s) {
    var busy = (s.acc.execute || 0) / s.len, other = 0;
    var cells = [td('device ' + s.device + (r.replicas > 1 ? ' replica ' + s.replica : '')),
                 td(pct(busy), 'num', { id: 'range-busy-' + s.device + '-' + s.replica, 'data-value': busy.toFixed(4) })];
    kinds.slice(1).forEach(function (k) { var v = (s.acc[k] || 0) / s.len; other += k === 'wait for device' ? 0 : v; cells.push(td(pct(v), 'num')); });
    cells.push(td(pct(Math.max(0, 1 - busy - other - (s.acc['wait for device'] || 0) / s.len)), 'num'));
    return el('tr', null, cells);
  }), { id: 'trace-summary', 'data-from': range.from, 'data-to': range.to }));
  if (phases) sec.appendChild(el('p', { id: 'pipeline-phases', 'data-ramp-up': phases.steadyFrom - phases.start, 'data-steady': phases.steadyTo - phases.steadyFrom, 'data-ramp-down': phases.end - phases.steadyTo },
    'Device iteration 0: ramp-up ' + fmtNs(phases.steadyFrom - phases.start) + ', steady state ' + fmtNs(phases.steadyTo - phases.steadyFrom) + ', ramp-down ' + fmtNs(phases.end - phases.steadyTo) + '.'));
  /* per micro-batch timing on each device (iteration 0) */
  var mb = {};
  r.trace.forEach(function (e) { if (e.kind === 'execute' && e.iteration === 0 && e.replica === 0 && e.micro_batch >= 0) { var k = e.device + '/' + e.phase; (mb[k] = mb[k] || []).push(e.e - e.s); } });
  sec.appendChild(el('h2', null, 'Execute time per micro-batch (iteration 0)'));
  sec.appendChild(table(['device', 'phase', 'micro-batches', 'mean', 'min', 'max'], Object.keys(mb).sort().map(function (k) {
    var v = mb[k], p = k.split('/');
    return el('tr', null, td(p[0], 'num'), td(p[1]), td(String(v.length), 'num'), td(fmtNs(sum(v, function (x) { return x; }) / v.length), 'num'),
      td(fmtNs(Math.min.apply(null, v)), 'num'), td(fmtNs(Math.max.apply(null, v)), 'num'));
  })));
  renderTransfers(sec, r);
  renderRepeated(sec, r);
};

/* Repeated executions grouped, as `tilegraph analyse trace` lists them: one
 * row per device, step kind and phase of host step 0 (replica 0) with its
 * count, total, mean, min and max; a click on a row shows each execution. */
function renderRepeated(sec, r) {
  var groups = {}, order = [];
  r.trace.forEach(function (e) {
    if (e.replica !== 0) return;
    var k = e.device + '|' + e.kind + '|' + e.phase;
    if (!groups[k]) { groups[k] = { device: e.device, kind: e.kind, phase: e.phase, list: [] }; order.push(k); }
    groups[k].list.push(e);
  });
  var list = order.map(function (k) { return groups[k]; }).sort(function (a, b) { return a.device - b.device || a.list[0].s - b.list[0].s; });
  sec.appendChild(el('h2', null, 'Repeated executions, grouped (host step 0, replica 0)'));
  var rows = [];
  list.forEach(function (g, i) {
    var d = g.list.map(function (e) { return e.e - e.s; }), tot = sum(d, function (x) { return x; });
    var detail = el('tr', { cls: 'repeat-detail', 'data-group': i, style: 'display:none' },
      el('td', { colspan: 9 }, table(['iteration', 'micro-batch', 'start', 'duration', 'bytes'], g.list.map(function (e) {
        return el('tr', null, td(String(e.iteration), 'num'), td(e.micro_batch >= 0 ? String(e.micro_batch) : '-', 'num'), td(fmtNs(e.s), 'num'), td(fmtNs(e.e - e.s), 'num'), td(fmtBytes(e.bytes || 0), 'num'));
      }))));
    rows.push(el('tr', { cls: 'repeat-group', 'data-group': i, 'data-device': g.device, 'data-kind': g.kind, 'data-phase': g.phase, 'data-count': g.list.length, 'data-total': tot,
      style: 'cursor:pointer', onclick: function () { detail.style.display = detail.style.display === 'none' ? '' : 'none'; } },
      td('\u25b8 ' + g.device, 'num'), td(g.kind), td(g.phase), td(String(g.list.length), 'num'), td(fmtNs(tot), 'num'), td(fmtNs(tot / d.length), 'num'),
      td(fmtNs(Math.min.apply(null, d)), 'num'), td(fmtNs(Math.max.apply(null, d)), 'num'), td(fmtBytes(sum(g.list, function (e) { return e.bytes || 0; })), 'num')));
    rows.push(detail);
  });
  sec.appendChild(table(['device', 'step', 'phase', 'count', 'total', 'mean', 'min', 'max', 'bytes'], rows, { id: 'trace-repeated', 'data-rows': list.length }));
  sec.appendChild(el('p', { cls: 'muted' }, 'A step repeated per micro-batch and device iteration is one row; click a row for each execution.'));
}

/* Bytes per host stream and per inter-device copy in host step 0 (replica
 * 0), as `tilegraph analyse trace` lists them: a copy is recorded on the
 * sender (Tx) with the receiver as peer; the receiver's Rx rows are the same
 * events seen from the other side. */
function renderTransfers(sec, r) {
  var groups = {}, add = function (device, what, peer, e) {
    var k = device + '|' + what + '|' + peer, g = groups[k] = groups[k] || { device: device, what: what, peer: peer, n: 0, bytes: 0, ns: 0 };
    g.n++; g.bytes += e.bytes || 0; g.ns += e.e - e.s;
  };
  r.trace.forEach(function (e) {
    if (e.replica !== 0) return;
    if (e.kind === 'stream from host') add(e.device, 'stream from host (Rx)', -1, e);
    else if (e.kind === 'stream to host') add(e.device, 'stream to host (Tx)', -1, e);
    else if (e.kind === 'copy to device') { add(e.device, 'copy to device (Tx)', e.peer, e); if (e.peer >= 0) add(e.peer, 'copy from device (Rx)', e.device, e); }
  });
  var list = Object.keys(groups).map(function (k) { return groups[k]; })
    .sort(function (a, b) { return a.device - b.device || (a.what < b.what ? -1 : a.what > b.what ? 1 : 0) || a.peer - b.peer; });
  sec.appendChild(el('h2', null, 'Transfers (host step 0, replica 0)'));
  if (!list.length) {
    sec.appendChild(el('p', { cls: 'muted', id: 'transfers-none' }, 'The trace records no host streams or inter-device copies.'));
    return;
  }
  sec.appendChild(table(['device', 'transfer', 'peer', 'count', 'bytes', 'time', 'GB/s'], list.map(function (g) {
    return el('tr', { 'data-device': g.device, 'data-transfer': g.what, 'data-peer': g.peer, 'data-count': g.n, 'data-bytes': g.bytes },
      td(String(g.device), 'num'), td(g.what), td(g.peer >= 0 ? String(g.peer) : 'host'), td(String(g.n), 'num'), td(fmtBytes(g.bytes), 'num'),
      td(fmtNs(g.ns), 'num'), td(g.ns > 0 ? (g.bytes / g.ns).toFixed(3) : '-', 'num'));
  }), { id: 'transfers', 'data-rows': list.length }));
  sec.appendChild(el('p', { cls: 'muted' }, 'GB/s = bytes / time, the time including any wait for a free slot.'));
}

/* ---- Memory per tile (tiled targets) ----
 * data.tiles = {per_device: N, devices: [{device, bytes: {category: [N]}}]}.
 * Each device gets a heat map (one cell per tile, coloured by its bytes
 * against memory_per_tile, tiles over capacity crossed) and a histogram. */
function tileTotals(r) {
  if (r.tileTotals) return r.tileTotals;
  var n = r.tiles.per_device;
  r.tileTotals = r.tiles.devices.map(function (d) {
    var tot = new Float64Array(n);
    Object.keys(d.bytes).forEach(function (c) { var a = d.bytes[c]; for (var i = 0; i < n; i++) tot[i] += a[i]; });
    var max = 0, maxTile = 0, over = 0;
    for (var i = 0; i < n; i++) { if (tot[i] > max) { max = tot[i]; maxTile = i; } }
    var cap = +r.meta.memory_per_tile || 0;
    if (cap) for (i = 0; i < n; i++) if (tot[i] > cap) over++;
    return { device: d.device, tot: tot, max: max, maxTile: maxTile, over: over, cats: d.bytes };
  });
  return r.tileTotals;
}
/* white -> yellow -> red for 0..1 of the tile's capacity */
function heat(f) {
  f = Math.max(0, Math.min(1, f));
  var r, g, b;
  if (f < 0.5) { var t = f / 0.5; r = 255; g = 255 - t * 40; b = 255 - t * 200; }
  else { t = (f - 0.5) / 0.5; r = 255 - t * 60; g = 215 - t * 185; b = 55 - t * 25; }
  return 'rgb(' + (r | 0) + ',' + (g | 0) + ',' + (b | 0) + ')';
}
function renderTiles(sec, r, args) {
  var cap = +r.meta.memory_per_tile || 0, n = r.tiles.per_device, tt = tileTotals(r);
  var COLS = 64, CELL = 12, rowsN = Math.ceil(n / COLS);
  /* Colour scale: the tile memory, or (when every tile is far below it, as
   * on small models) the fullest tile of all devices, so the spread shows. */
  var fullest = Math.max.apply(null, tt.map(function (d) { return d.max; }).concat([1]));
  var scaleBy = args.scale || (cap && fullest > cap / 4 ? 'capacity' : 'fullest');
  var ref = scaleBy === 'capacity' && cap ? cap : fullest;
  sec.appendChild(el('h2', null, 'Memory per tile (' + n + ' tiles per device, ' + fmtBytes(cap) + ' each)'));
  sec.appendChild(el('p', { cls: 'muted' }, 'Each cell is a tile (tile 0 top left, ' + COLS + ' per row), coloured by its bytes; tiles over capacity are dark with a cross. Hover a tile for its bytes; click it for its bytes by category.'));
  var scalePick = el('select', { id: 'tile-scale', onchange: function () { setHash('memory', { device: args.device, tdev: args.tdev, tile: args.tile, scale: this.value }); } },
    el('option', { value: 'capacity' }, 'the tile memory (' + fmtBytes(cap) + ')'), el('option', { value: 'fullest' }, 'the fullest tile (' + fmtBytes(fullest) + ')'));
  scalePick.value = scaleBy;
  sec.appendChild(el('div', { cls: 'controls' }, 'colour scale: 100% = ', scalePick));
  var leg = el('div', { cls: 'legend', id: 'tile-legend' });
  [0, 0.25, 0.5, 0.75, 1].forEach(function (f) { leg.appendChild(el('span', null, el('i', { style: 'background:' + heat(f) }), fmtBytes(f * ref))); });
  leg.appendChild(el('span', null, el('i', { style: 'background:#3b0764' }), 'over capacity'));
  sec.appendChild(leg);

  var selDev = args.tdev != null && args.tdev !== '' ? +args.tdev : null, selTile = args.tile != null && args.tile !== '' ? +args.tile : null;
  tt.forEach(function (d) {
    var box = el('div', { cls: 'tile-device' });
    box.appendChild(el('h3', { id: 'tile-map-title-' + d.device }, 'device ' + d.device + ': fullest tile ',
      el('span', { id: 'tile-max-' + d.device, 'data-value': d.max, 'data-tile': d.maxTile }, fmtBytes(d.max) + ' (tile ' + d.maxTile + ', ' + (cap ? pct(d.max / cap) : '-') + ')'),
      ', ', el('span', { id: 'tile-over-' + d.device, 'data-value': d.over }, d.over + ' over capacity'),
      ', mean ' + fmtBytes(sum(d.tot, function (x) { return x; }) / n)));
    var W = COLS * CELL, H = rowsN * CELL;
    var cv = el('canvas', { id: 'tile-map-' + d.device, cls: 'tile-map', width: W, height: H, 'data-tiles': n });
    var ctx = cv.getContext('2d');
    for (var i = 0; i < n; i++) {
      var x = (i % COLS) * CELL, y = Math.floor(i / COLS) * CELL, f = cap ? d.tot[i] / cap : 0;
      ctx.fillStyle = f > 1 ? '#3b0764' : heat(d.tot[i] / ref);
      ctx.fillRect(x, y, CELL - 1, CELL - 1);
      if (f > 1) { ctx.strokeStyle = '#fff'; ctx.beginPath(); ctx.moveTo(x + 2, y + 2); ctx.lineTo(x + CELL - 3, y + CELL - 3); ctx.moveTo(x + CELL - 3, y + 2); ctx.lineTo(x + 2, y + CELL - 3); ctx.stroke(); }
    }
    if (selDev === d.device && selTile != null && selTile < n) {
      ctx.strokeStyle = '#2f6fdb'; ctx.lineWidth = 2;
      ctx.strokeRect((selTile % COLS) * CELL - 1, Math.floor(selTile / COLS) * CELL - 1, CELL + 1, CELL + 1);
    }
    var tileAt = function (ev) { var c = Math.floor(ev.offsetX / CELL), rr = Math.floor(ev.offsetY / CELL), t = rr * COLS + c; return c < COLS && t < n ? t : -1; };
    cv.addEventListener('mousemove', function (ev) {
      var t = tileAt(ev);
      cv.title = t < 0 ? '' : 'tile ' + t + ': ' + fmtBytes(d.tot[t]) + (cap ? ' (' + pct(d.tot[t] / cap) + ')' : '') + '\n' +
        Object.keys(d.cats).filter(function (c) { return d.cats[c][t]; }).map(function (c) { return c + ': ' + fmtBytes(d.cats[c][t]); }).join('\n');
    });
    cv.addEventListener('click', function (ev) { var t = tileAt(ev); if (t >= 0) setHash('memory', { device: args.device, tdev: d.device, tile: t }); });
    var side = el('div');
    /* histogram of the tiles' bytes: 20 bins up to the capacity (or the max) */
    var top = Math.max(ref, d.max, 1), NB = 20, bins = new Array(NB + 1).join('0').split('').map(Number);
    for (i = 0; i < n; i++) bins[Math.min(NB - 1, Math.floor(d.tot[i] / top * NB))]++;
    var HW = 420, HH = 150, bmax = Math.max.apply(null, bins.concat([1]));
    var g = svg('svg', { width: HW, height: HH + 30, class: 'chart', id: 'tile-hist-' + d.device, 'data-bins': bins.join(',') });
    bins.forEach(function (b, k) {
      var h = (HH - 10) * b / bmax, x = 30 + k * (HW - 40) / NB;
      var rc = svg('rect', { x: x, y: HH - h, width: (HW - 40) / NB - 2, height: h, fill: (k + 1) * top / NB > cap && cap ? '#b42318' : '#2f6fdb' });
      var tl = svg('title', {}); tl.textContent = fmtBytes(k * top / NB) + ' - ' + fmtBytes((k + 1) * top / NB) + ': ' + b + ' tiles'; rc.appendChild(tl);
      g.appendChild(rc);
    });
    var l0 = svg('text', { x: 30, y: HH + 14, 'font-size': 10, fill: '#667085' }); l0.textContent = '0'; g.appendChild(l0);
    var l1 = svg('text', { x: HW - 10, y: HH + 14, 'font-size': 10, fill: '#667085', 'text-anchor': 'end' }); l1.textContent = fmtBytes(top); g.appendChild(l1);
    var l2 = svg('text', { x: 30, y: HH + 27, 'font-size': 10, fill: '#667085' }); l2.textContent = 'tiles by bytes (' + bmax + ' in the tallest bin; red: over the tile memory)'; g.appendChild(l2);
    side.appendChild(g);
    if (selDev === d.device && selTile != null && selTile < n) {
      side.appendChild(el('h3', { id: 'tile-detail-title', 'data-device': d.device, 'data-tile': selTile }, 'tile ' + selTile + ': ' + fmtBytes(d.tot[selTile]) + (cap ? ' of ' + fmtBytes(cap) : '')));
      side.appendChild(table(['category', 'bytes'], Object.keys(d.cats).map(function (c) {
        return el('tr', { 'data-category': c }, td(c), td(fmtBytes(d.cats[c][selTile]), 'num', { 'data-value': d.cats[c][selTile] }));
      }), { id: 'tile-detail', 'data-value': d.tot[selTile] }));
    }
    box.appendChild(el('div', { cls: 'flex' }, cv, side));
    sec.appendChild(box);
  });
  renderVertexTypes(sec, r);
}
/* Vertex types (profile table vertex_types): per device and op type the
 * vertices the tile plan places, their estimated state and code bytes, as
 * PopVision's memory report lists them. */
function renderVertexTypes(sec, r) {
  var vt = r.vertex_types || [];
  if (!vt.length) return;
  sec.appendChild(el('h2', null, 'Vertex types (estimated state and code)'));
  sec.appendChild(table(['device', 'vertex type', 'vertices', 'state bytes', 'code bytes'], vt.map(function (v) {
    return el('tr', { 'data-device': v.device, 'data-type': v.type }, td(String(v.device), 'num'), td(v.type),
      td(String(v.vertices), 'num', { 'data-value': v.vertices }),
      td(fmtBytes(v.state_bytes), 'num', { 'data-value': v.state_bytes }),
      td(fmtBytes(v.code_bytes), 'num', { 'data-value': v.code_bytes }));
  }), { id: 'vertex-types' }));
}

/* Two reports on a tiled target: per device the tile summary of A and B
 * with the differences, then each device's heat maps of A and B side by
 * side on one colour scale (the tile memory, or the fullest tile of both). */
function renderTilesCompare(sec, a, b, args) {
  var ta = tileTotals(a), tb = tileTotals(b), cap = +a.meta.memory_per_tile || +b.meta.memory_per_tile || 0;
  var na = a.tiles.per_device, nb = b.tiles.per_device;
  cmpHeading(sec, 'Memory per tile', a, b);
  var nd = Math.max(ta.length, tb.length), rows = [];
  var stat = function (t, n) { return t ? { tiles: n, max: t.max, mean: sum(t.tot, function (x) { return x; }) / n, over: t.over } : { tiles: 0, max: 0, mean: 0, over: 0 }; };
  for (var i = 0; i < nd; i++) {
    var da = ta[i] ? ta[i].device : tb[i].device, sa = stat(ta[i], na), sb = stat(tb[i], nb);
    [['tiles', 'tiles', String], ['largest tile', 'max', fmtBytes], ['mean tile', 'mean', fmtBytes], ['tiles over capacity', 'over', String]].forEach(function (k, j) {
      rows.push(el('tr', { 'data-device': da, 'data-stat': k[1] }, td(j ? '' : 'device ' + da), td(k[0]),
        td(k[2](sa[k[1]]), 'num', { id: 'tile-cmp-' + k[1] + '-a-' + da, 'data-value': sa[k[1]] }),
        td(k[2](sb[k[1]]), 'num', { id: 'tile-cmp-' + k[1] + '-b-' + da, 'data-value': sb[k[1]] }), diffCells(sa[k[1]], sb[k[1]], k[2])));
    });
  }
  sec.appendChild(table(['device', '', 'A', 'B', 'diff', 'diff %'], rows, { id: 'tile-compare' }));
  var fullest = Math.max.apply(null, ta.concat(tb).map(function (d) { return d.max; }).concat([1]));
  var scaleBy = args.scale || (cap && fullest > cap / 4 ? 'capacity' : 'fullest'), ref = scaleBy === 'capacity' && cap ? cap : fullest;
  var leg = el('div', { cls: 'legend', id: 'tile-compare-legend', 'data-ref': ref });
  leg.appendChild(el('span', null, 'one colour scale for A and B, 100% = ' + (ref === cap ? 'the tile memory' : 'the fullest tile of both') + ':'));
  [0, 0.25, 0.5, 0.75, 1].forEach(function (f) { leg.appendChild(el('span', null, el('i', { style: 'background:' + heat(f) }), fmtBytes(f * ref))); });
  leg.appendChild(el('span', null, el('i', { style: 'background:#3b0764' }), 'over capacity'));
  sec.appendChild(leg);
  var COLS = 64, CELL = 9;
  var map = function (d, n, label, id) {
    var cv = el('canvas', { id: id, cls: 'tile-map', width: COLS * CELL, height: Math.ceil(n / COLS) * CELL, 'data-tiles': n, 'data-ref': ref });
    var ctx = cv.getContext('2d');
    for (var i = 0; i < n; i++) {
      var x = (i % COLS) * CELL, y = Math.floor(i / COLS) * CELL, over = cap && d.tot[i] > cap;
      ctx.fillStyle = over ? '#3b0764' : heat(d.tot[i] / ref);
      ctx.fillRect(x, y, CELL - 1, CELL - 1);
    }
    cv.addEventListener('mousemove', function (ev) {
      var t = Math.floor(ev.offsetY / CELL) * COLS + Math.floor(ev.offsetX / CELL);
      cv.title = t < n ? label + ' tile ' + t + ': ' + fmtBytes(d.tot[t]) : '';
    });
    return el('div', null, el('div', { cls: 'muted' }, label + ': largest ' + fmtBytes(d.max) + ' (tile ' + d.maxTile + ')'), cv);
  };
  for (i = 0; i < nd; i++) {
    var dev = ta[i] ? ta[i].device : tb[i].device;
    sec.appendChild(el('h3', null, 'device ' + dev + ': A and B'));
    sec.appendChild(el('div', { cls: 'flex' }, ta[i] ? map(ta[i], na, 'A', 'tile-cmp-map-a-' + dev) : el('div', null, 'not in A'),
      tb[i] ? map(tb[i], nb, 'B', 'tile-cmp-map-b-' + dev) : el('div', null, 'not in B')));
  }
  sec.appendChild(el('h2', null, 'Showing: ' + reports[cur].path));
}

/* ---- Host (TILEGRAPH_TRACE regions) ----
 * Regions of each thread nest (start order, containment); the call tree
 * aggregates them by call path: thread > region > region ... with calls,
 * total time and self time (total minus its children's). */
function hostModel(r) {
  if (r.hostModel) return r.hostModel;
  var ev = r.host_trace, t0 = Infinity, t1 = -Infinity;
  ev.forEach(function (e) { if (e.start_ns < t0) t0 = e.start_ns; if (e.end_ns > t1) t1 = e.end_ns; });
  var root = { name: 'all threads', path: '', calls: 0, total: 0, self: 0, kids: {}, order: [], depth: 0 };
  var threads = [], byThread = {};
  ev.forEach(function (e) { if (!byThread[e.thread]) { byThread[e.thread] = []; threads.push(e.thread); } byThread[e.thread].push(e); });
  function child(p, name) {
    var k = p.kids[name];
    if (!k) { k = p.kids[name] = { name: name, path: p.path ? p.path + ' > ' + name : name, calls: 0, total: 0, self: 0, kids: {}, order: [], depth: p.depth + 1, parent: p }; p.order.push(k); }
    return k;
  }
  threads.forEach(function (th) {
    var list = byThread[th].slice().sort(function (a, b) { return a.start_ns - b.start_ns || a.depth - b.depth || b.end_ns - a.end_ns; });
    var tn = child(root, th), stack = [];
    list.forEach(function (e) {
      while (stack.length && !(stack[stack.length - 1].e.start_ns <= e.start_ns && e.end_ns <= stack[stack.length - 1].e.end_ns)) stack.pop();
      var node = child(stack.length ? stack[stack.length - 1].node : tn, e.name), d = e.end_ns - e.start_ns;
      node.calls++; node.total += d;
      e.lvl = stack.length; e.node = node;
      if (!stack.length) { tn.total += d; tn.calls++; }
      stack.push({ e: e, node: node });
    });
  });
  function finish(n) {
    var kt = 0;
    n.order.forEach(function (k) { finish(k); kt += k.total; });
    n.self = n.parent ? Math.max(0, n.total - kt) : 0;
    n.order.sort(function (a, b) { return b.total - a.total; });
  }
  root.order.forEach(function (k) { root.total += k.total; });
  finish(root);
  root.order.forEach(function (k) { k.self = 0; }); /* a thread's time is its regions' */
  var byPath = {};
  (function index(n) { byPath[n.path] = n; n.order.forEach(index); })(root);
  r.hostModel = { t0: t0, span: t1 - t0, root: root, threads: threads, byThread: byThread, byPath: byPath };
  return r.hostModel;
}
/* Two reports: the call trees of A and B merged by call path (thread >
 * region > ...), each path with its calls, total and self time in A and B
 * and the differences; paths in one report only are marked. */
function renderHostCompare(sec, a, b) {
  sec.appendChild(el('h2', null, 'Host call tree: A compared with B'));
  sec.appendChild(el('p', { cls: 'muted' }, 'A = ' + a.path + ', B = ' + b.path + '. Differences are B - A. Below, the timeline, flame graph and call tree of A, then of B.'));
  var ma = hostModel(a), mb = hostModel(b), rows = [], nOnly = { A: 0, B: 0 };
  var nsFmt = function (x) { return fmtNs(x); };
  (function walk(na, nb, depth) {
    var kids = [], seen = {};
    (na ? na.order : []).concat(nb ? nb.order : []).forEach(function (k) { if (!seen[k.name]) { seen[k.name] = 1; kids.push(k.name); } });
    var tot = function (name) { var x = na && na.kids[name], y = nb && nb.kids[name]; return Math.max(x ? x.total : 0, y ? y.total : 0); };
    kids.sort(function (x, y) { return tot(y) - tot(x); });
    kids.forEach(function (name) {
      var ka = na && na.kids[name] || null, kb = nb && nb.kids[name] || null, k = ka || kb;
      var only = !kb ? 'only in A' : !ka ? 'only in B' : '';
      if (only) nOnly[only.slice(-1)]++;
      var ca = ka ? ka.calls : 0, cb = kb ? kb.calls : 0, ta = ka ? ka.total : 0, tb = kb ? kb.total : 0, sa = ka ? ka.self : 0, sb = kb ? kb.self : 0;
      if (rows.length < 3000) rows.push(el('tr', { 'data-path': k.path, 'data-name': name, 'data-calls-a': ca, 'data-calls-b': cb, 'data-total-a': ta, 'data-total-b': tb, 'data-in': only ? only.slice(-1) : 'AB' },
        el('td', { style: 'padding-left:' + (8 + 14 * (depth - 1)) + 'px' }, name),
        td(String(ca), 'num'), td(String(cb), 'num'), diffCells(ca, cb, String)[0],
        td(fmtNs(ta), 'num'), td(fmtNs(tb), 'num'), diffCells(ta, tb, nsFmt),
        td(fmtNs(sa), 'num'), td(fmtNs(sb), 'num'), diffCells(sa, sb, nsFmt),
        td(only, only === 'only in A' ? 'only-a' : only ? 'only-b' : '')));
      walk(ka, kb, depth + 1);
    });
  })(ma.root, mb.root, 1);
  sec.appendChild(el('p', { id: 'host-compare-only', 'data-only-a': nOnly.A, 'data-only-b': nOnly.B },
    'All threads: total A ' + fmtNs(ma.root.total) + ', B ' + fmtNs(mb.root.total) + '. Call paths in one report only: ' + nOnly.A + ' only in A, ' + nOnly.B + ' only in B' + (rows.length >= 3000 ? ' (first 3000 paths listed)' : '') + '.'));
  sec.appendChild(table(['call path', 'calls A', 'calls B', 'diff', 'total A', 'total B', 'diff', 'diff %', 'self A', 'self B', 'diff', 'diff %', ''], rows, { id: 'host-compare' }));
}
/* With two reports the compared call tree comes first, then the timeline,
 * flame graph and call tree of A and of B one above the other (ids of B's
 * suffixed -b). */
renderers.host = function (sec, args) {
  if (!reports[1]) { hostView(sec, reports[0], args, ''); return; }
  renderHostCompare(sec, reports[0], reports[1]);
  reports.forEach(function (r, i) {
    sec.appendChild(el('h2', { cls: 'report-head' }, (i ? 'B: ' : 'A: ') + r.path));
    hostView(sec, r, args, i ? '-b' : '');
  });
};
/* ---- Histograms: weights and gradients per tensor at the recorded runs
 * (profile table histograms), as `tilegraph analyse REPORT histograms`:
 * a bar chart of the 32 bins (min to max) per tensor and kind, a run picker,
 * and a name filter. */
renderers.histograms = function (sec, args) {
  reports.forEach(function (r, i) {
    if (reports[1]) sec.appendChild(el('h2', { cls: 'report-head' }, (i ? 'B: ' : 'A: ') + r.path));
    histogramsOf(sec, r, args, i ? '-b' : '');
  });
};
/* Three significant digits: weights and gradients are small numbers. */
function fmtSig(x) { return x == null ? '-' : Math.abs(x) >= 1e3 || x === 0 ? fmtNum(x) : String(Number(x.toPrecision(3))); }
function histogramsOf(sec, r, args, sfx) {
  if (!r.histograms.length) { sec.appendChild(el('p', { id: 'histograms-empty' + sfx }, 'This profile holds no weight or gradient histograms (they are recorded for the recorded runs of a training program).')); return; }
  var runs = [];
  r.histograms.forEach(function (h) { if (runs.indexOf(h.run) < 0) runs.push(h.run); });
  var run = args.run != null && runs.indexOf(+args.run) >= 0 ? +args.run : runs[runs.length - 1], q = (args.filter || '').toLowerCase();
  var pick = el('select', { id: 'histograms-run' + sfx }, runs.map(function (x) { var o = el('option', { value: x }, 'recorded run ' + x); if (x === run) o.selected = true; return o; }));
  var filter = el('input', { type: 'search', id: 'histograms-filter' + sfx, placeholder: 'tensor name contains', value: args.filter || '' });
  var go = function () { setHash('histograms', { run: pick.value, filter: filter.value }); };
  pick.addEventListener('change', go); filter.addEventListener('change', go);
  sec.appendChild(el('div', { cls: 'controls' }, pick, filter));
  var rows = r.histograms.filter(function (h) { return h.run === run && (!q || h.tensor.toLowerCase().indexOf(q) >= 0); });
  var box = el('div', { id: 'histograms' + sfx, 'data-count': rows.length, 'data-run': run });
  rows.forEach(function (h) {
    var bins = []; try { bins = JSON.parse(h.bins) || []; } catch (e) { bins = []; }
    var W = 330, H = 90, top = Math.max.apply(null, bins.concat([1])), bw = (W - 10) / (bins.length || 1);
    var g = svg('svg', { width: W, height: H + 16, 'class': 'histogram', 'data-tensor': h.tensor, 'data-kind': h.kind, 'data-elements': h.elements,
      'data-sum': sum(bins, function (x) { return x; }), 'data-non-finite': h.non_finite });
    bins.forEach(function (c, k) {
      var bh = c / top * H;
      g.appendChild(svg('rect', { x: 5 + k * bw, y: H - bh, width: Math.max(1, bw - 1), height: bh, fill: h.kind === 'gradient' ? '#d9822b' : '#2f6fdb' }));
    });
    var lo = svg('text', { x: 2, y: H + 12, 'font-size': 10, fill: '#667085' }); lo.textContent = h.min == null ? '' : fmtSig(h.min);
    var hi = svg('text', { x: W - 60, y: H + 12, 'font-size': 10, fill: '#667085' }); hi.textContent = h.max == null ? '' : fmtSig(h.max);
    g.appendChild(lo); g.appendChild(hi);
    var cap = h.tensor + ' (' + h.kind + '): ' + fmtNum(h.elements) + ' values, mean ' + (h.mean == null ? '-' : fmtSig(h.mean)) + ', std ' + (h.std == null ? '-' : fmtSig(h.std)) +
      (h.zeros ? ', ' + pct(h.zeros / h.elements) + ' zeros' : '') + (h.non_finite ? ', ' + h.non_finite + ' non-finite' : '');
    box.appendChild(el('figure', { style: 'display:inline-block;margin:4px 12px 8px 0' }, el('figcaption', null, cap), g));
  });
  sec.appendChild(box);
}

/* Counters per host step (profile table counters) as line graphs, one per
 * counter: host step on x, the value on y from its min to its max. */
function renderCounters(sec, r, sfx) {
  var series = {}, names = [];
  r.counters.forEach(function (c) {
    if (!series[c.name]) { series[c.name] = []; names.push(c.name); }
    if (c.value != null) series[c.name].push(c);
  });
  if (!names.length) return;
  sec.appendChild(el('h2', null, 'Counters per host step'));
  var W = 420, H = 130, L = 60, B = 20;
  var box = el('div', { cls: 'counters', id: 'counters' + sfx, 'data-count': names.length });
  names.forEach(function (n) {
    var pts = series[n], lo = Infinity, hi = -Infinity, s0 = Infinity, s1 = -Infinity;
    pts.forEach(function (p) { lo = Math.min(lo, p.value); hi = Math.max(hi, p.value); s0 = Math.min(s0, p.step); s1 = Math.max(s1, p.step); });
    if (hi === lo) { hi += Math.abs(hi) * 0.05 || 1; lo -= Math.abs(lo) * 0.05 || 1; }
    var X = function (s) { return L + (s1 > s0 ? (s - s0) / (s1 - s0) : 0.5) * (W - L - 10); };
    var Y = function (v) { return 10 + (1 - (v - lo) / (hi - lo)) * (H - 10 - B); };
    var fmt = /bytes/.test(n) ? fmtBytes : /\(ns\)/.test(n) ? fmtNs : fmtNum;
    var g = svg('svg', { width: W, height: H, 'class': 'counter-graph', 'data-counter': n, 'data-points': pts.length,
      'data-first': pts.length ? pts[0].value : '', 'data-last': pts.length ? pts[pts.length - 1].value : '' });
    g.appendChild(svg('polyline', { points: pts.map(function (p) { return X(p.step).toFixed(1) + ',' + Y(p.value).toFixed(1); }).join(' '), fill: 'none', stroke: '#2f6fdb', 'stroke-width': 1.5 }));
    [[hi, 14], [lo, H - B]].forEach(function (t) { var tx = svg('text', { x: 2, y: t[1], 'font-size': 10, fill: '#667085' }); tx.textContent = fmt(t[0]); g.appendChild(tx); });
    var ax = svg('text', { x: L, y: H - 4, 'font-size': 10, fill: '#667085' }); ax.textContent = 'host step ' + (pts.length ? s0 + ' \u2013 ' + s1 : '');
    g.appendChild(ax);
    g.appendChild(svg('line', { x1: L, y1: H - B, x2: W - 10, y2: H - B, stroke: '#eaecf0' }));
    box.appendChild(el('figure', { style: 'display:inline-block;margin:4px 12px 8px 0' }, el('figcaption', null, n), g));
  });
  sec.appendChild(box);
}

/* Search the host trace's regions by name (a substring, any case): each
 * matching name with its count and total time, and the first matches with
 * their thread and start. */
function renderHostSearch(sec, r, args, sfx) {
  var q = (args.search || '').toLowerCase();
  var input = el('input', { id: 'host-search' + sfx, type: 'search', placeholder: 'search events by name', value: args.search || '' });
  input.addEventListener('change', function () { var a = {}; for (var k in args) a[k] = args[k]; a.search = input.value; setHash('host', a); });
  sec.appendChild(el('div', { cls: 'controls' }, input));
  if (!q) return;
  var by = {}, hits = [];
  r.host_trace.forEach(function (e) {
    if (e.name.toLowerCase().indexOf(q) < 0) return;
    var g = by[e.name] = by[e.name] || { name: e.name, n: 0, ns: 0 };
    g.n++; g.ns += e.end_ns - e.start_ns; hits.push(e);
  });
  var names = Object.keys(by).sort(function (a, b) { return by[b].ns - by[a].ns; });
  sec.appendChild(table(['event', 'count', 'total time'], names.map(function (n) {
    return el('tr', { 'data-name': n, 'data-count': by[n].n }, td(n), td(String(by[n].n), 'num'), td(fmtNs(by[n].ns), 'num'));
  }), { id: 'host-search-results' + sfx, 'data-matches': hits.length }));
  var t0 = Math.min.apply(null, r.host_trace.map(function (e) { return e.start_ns; }));
  sec.appendChild(table(['thread', 'event', 'start', 'duration'], hits.slice(0, 100).map(function (e) {
    return el('tr', null, td(e.thread), td(e.name), td(fmtNs(e.start_ns - t0), 'num'), td(fmtNs(e.end_ns - e.start_ns), 'num'));
  })));
  if (hits.length > 100) sec.appendChild(el('p', { cls: 'muted' }, 'The first 100 of ' + hits.length + ' matches.'));
}

function hostView(sec, r, args, sfx) {
  renderCounters(sec, r, sfx);
  if (r.host_trace.length) renderHostSearch(sec, r, args, sfx);
  if (!r.host_trace.length) { sec.appendChild(el('p', { id: 'host-empty' + sfx }, 'This profile holds no host trace: run with TILEGRAPH_TRACE=\'{"enable":"true","directory":"DIR"}\' to record the host threads\' regions.')); return; }
  var m = hostModel(r), selPath = args.path || '', sel = selPath ? m.byPath[selPath] || null : null;
  sec.appendChild(el('h2', null, 'Host threads (' + m.threads.length + ' threads, ' + r.host_trace.length + ' regions over ' + fmtNs(m.span) + ')'));
  /* timeline: one lane per thread, a row per nesting level */
  var RH = 14, LEFT = 170, W = 1340, PW = W - LEFT - 10, lanes = [], y = 20;
  m.threads.forEach(function (th) {
    var maxLvl = 0; m.byThread[th].forEach(function (e) { if (e.lvl > maxLvl) maxLvl = e.lvl; });
    lanes.push({ th: th, y: y, levels: maxLvl + 1 }); y += (maxLvl + 1) * RH + 8;
  });
  var H = y + 20, view = { from: 0, to: m.span || 1 };
  var cv = el('canvas', { id: 'host-timeline' + sfx, width: W, height: H, 'data-threads': m.threads.length });
  sec.appendChild(el('h3', null, 'Timeline (wheel zooms, drag pans, double-click resets)'));
  sec.appendChild(cv);
  var ctx = cv.getContext('2d');
  var X = function (t) { return LEFT + (t - view.from) / (view.to - view.from) * PW; };
  function colourFor(name) { var h = 0; for (var i = 0; i < name.length; i++) h = (h * 31 + name.charCodeAt(i)) % 360; return 'hsl(' + h + ',60%,62%)'; }
  function drawTimeline() {
    ctx.clearRect(0, 0, W, H); ctx.font = '10px sans-serif';
    lanes.forEach(function (l) {
      ctx.fillStyle = '#1d2430'; ctx.fillText(l.th.length > 26 ? l.th.slice(0, 25) + '\u2026' : l.th, 4, l.y + 10);
      ctx.strokeStyle = '#eaecf0'; ctx.beginPath(); ctx.moveTo(LEFT, l.y + l.levels * RH + 3); ctx.lineTo(W - 10, l.y + l.levels * RH + 3); ctx.stroke();
      var lastX = [];
      m.byThread[l.th].forEach(function (e) {
        var s = e.start_ns - m.t0, en = e.end_ns - m.t0;
        if (en < view.from || s > view.to) return;
        var x0 = Math.max(LEFT, X(s)), x1 = Math.min(W - 10, X(en));
        if (x1 - x0 < 0.5 && lastX[e.lvl] !== undefined && x0 - lastX[e.lvl] < 0.5) return; /* skip sub-pixel crowds */
        lastX[e.lvl] = x1;
        ctx.fillStyle = sel && e.node === sel ? '#2f6fdb' : colourFor(e.name);
        ctx.fillRect(x0, l.y + e.lvl * RH, Math.max(0.5, x1 - x0 - 0.5), RH - 2);
        if (x1 - x0 > 40) { ctx.fillStyle = '#1d2430'; ctx.fillText(e.name.slice(0, Math.floor((x1 - x0) / 6)), x0 + 2, l.y + e.lvl * RH + 10); }
      });
    });
    ctx.fillStyle = '#667085';
    for (var k = 0; k <= 8; k++) { var t = view.from + (view.to - view.from) * k / 8; ctx.fillText(fmtNs(t), X(t) - (k === 8 ? 50 : 0), H - 6); }
  }
  drawTimeline();
  var drag = null;
  cv.addEventListener('wheel', function (ev) {
    ev.preventDefault();
    var t = view.from + (ev.offsetX - LEFT) / PW * (view.to - view.from), f = ev.deltaY > 0 ? 1.25 : 0.8;
    view = { from: Math.max(0, t - (t - view.from) * f), to: Math.min(m.span, t + (view.to - t) * f) }; drawTimeline();
  }, { passive: false });
  cv.addEventListener('mousedown', function (ev) { drag = { x: ev.offsetX, v: { from: view.from, to: view.to } }; });
  cv.addEventListener('mousemove', function (ev) {
    if (!drag) return;
    var dt = (drag.x - ev.offsetX) / PW * (drag.v.to - drag.v.from); view = { from: drag.v.from + dt, to: drag.v.to + dt }; drawTimeline();
  });
  window.addEventListener('mouseup', function () { drag = null; });
  cv.addEventListener('dblclick', function () { view = { from: 0, to: m.span || 1 }; drawTimeline(); });
  /* flame graph: width = total time of the path, children under parents */
  sec.appendChild(el('h3', null, 'Flame graph (aggregated by call path; click a box to select it in the call tree)'));
  var FH = 16, maxDepth = 0;
  (function dep(n) { if (n.depth > maxDepth) maxDepth = n.depth; n.order.forEach(dep); })(m.root);
  var fc = el('canvas', { id: 'host-flame' + sfx, width: W, height: (maxDepth + 1) * FH + 4 });
  sec.appendChild(fc);
  var fctx = fc.getContext('2d'), boxes = [];
  fctx.font = '10px sans-serif';
  (function lay(n, x, w) {
    if (w < 0.3) return;
    var yy = n.depth * FH;
    fctx.fillStyle = sel === n ? '#2f6fdb' : n.depth === 0 ? '#d0d5dd' : colourFor(n.name);
    fctx.fillRect(x, yy, Math.max(0.5, w - 1), FH - 1);
    if (sel === n) { fctx.strokeStyle = '#1d2430'; fctx.lineWidth = 2; fctx.strokeRect(x + 1, yy + 1, w - 3, FH - 3); }
    if (w > 30) { fctx.fillStyle = sel === n ? '#fff' : '#1d2430'; fctx.fillText((n.name + ' ' + fmtNs(n.total)).slice(0, Math.floor(w / 6)), x + 3, yy + 11); }
    boxes.push({ x: x, y: yy, w: w, n: n });
    var cx = x;
    n.order.forEach(function (k) { var kw = n.total ? w * k.total / n.total : 0; lay(k, cx, kw); cx += kw; });
  })(m.root, 0, W);
  var boxAt = function (ev) { for (var i = boxes.length - 1; i >= 0; i--) { var b = boxes[i]; if (ev.offsetX >= b.x && ev.offsetX < b.x + b.w && ev.offsetY >= b.y && ev.offsetY < b.y + FH) return b.n; } return null; };
  fc.addEventListener('mousemove', function (ev) { var n = boxAt(ev); fc.title = n ? (n.path || n.name) + '\n' + n.calls + ' calls, total ' + fmtNs(n.total) + ', self ' + fmtNs(n.self) : ''; });
  fc.addEventListener('click', function (ev) { var n = boxAt(ev); if (n) setHash('host', { path: n.path }); });
  /* call tree: expanded to depth 2 and along the selected path */
  var open = {}, total = m.root.total || 1;
  for (var p = sel; p; p = p.parent) open[p.path] = 1;
  if (!sel) m.root.order.forEach(function (k) { open[k.path] = 1; });
  var body = el('tbody'), rowsShown = 0;
  function addRows(n) {
    n.order.forEach(function (k) {
      var kidsN = k.order.length, isOpen = !!open[k.path];
      var tog = kidsN ? el('span', { cls: 'tog' }, isOpen ? '\u25be ' : '\u25b8 ') : el('span', { cls: 'tog' }, '  ');
      var tr = el('tr', { 'data-path': k.path, 'data-name': k.name, 'data-calls': k.calls, 'data-total': k.total, 'data-self': k.self, cls: sel === k ? 'selected' : '' },
        el('td', { style: 'padding-left:' + (8 + 14 * (k.depth - 1)) + 'px' }, tog, k.name),
        td(String(k.calls), 'num'), td(fmtNs(k.total), 'num'), td(pct(k.total / total), 'num'), td(fmtNs(k.self), 'num'), td(pct(k.self / total), 'num'));
      if (sel === k) tr.id = 'host-selected' + sfx;
      if (kidsN) tr.addEventListener('click', function () { if (isOpen) delete open[k.path]; else open[k.path] = 1; redraw(); });
      body.appendChild(tr); rowsShown++;
      if (kidsN && isOpen && rowsShown < 2000) addRows(k);
    });
  }
  function redraw() { body.textContent = ''; rowsShown = 0; addRows(m.root); }
  sec.appendChild(el('h3', null, 'Call tree' + (sel ? ': ' + sel.path : '') + ' (click a row to expand or collapse it)'));
  addRows(m.root);
  sec.appendChild(table(['call path', 'calls', 'total', 'total %', 'self', 'self %'], [], { id: 'host-tree' + sfx }));
  var tbl = sec.querySelector('#host-tree' + sfx); tbl.replaceChild(body, tbl.querySelector('tbody'));
  /* regions by name, over every path */
  var names = {};
  r.host_trace.forEach(function (e) { var x = names[e.name] = names[e.name] || { calls: 0, total: 0, self: 0 }; x.calls++; x.total += e.end_ns - e.start_ns; });
  (function selfs(n) { if (n.depth >= 2) names[n.name].self += n.self; n.order.forEach(selfs); })(m.root);
  sec.appendChild(el('h3', null, 'Regions by name (all call paths)'));
  sec.appendChild(table(['region', 'calls', 'total', 'self', 'self %'], Object.keys(names).sort(function (a, b) { return names[b].self - names[a].self; }).map(function (k) {
    var x = names[k];
    return el('tr', { 'data-name': k, 'data-calls': x.calls }, td(k), td(String(x.calls), 'num'), td(fmtNs(x.total), 'num'), td(fmtNs(x.self), 'num'), td(pct(x.self / total), 'num'));
  }), { id: 'host-names' + sfx }));
}

/* ---- start ---- */
(function start() {
  var nav = document.getElementById('tabs');
  TABS.forEach(function (t) { nav.appendChild(el('a', { href: '#' + t[0], id: 'nav-' + t[0] }, t[1])); });
  if (!reports.length) return;
  if (!reports.some(function (r) { return r.host_trace.length || r.counters.length; })) document.getElementById('nav-host').hidden = true;
  var a = reports[0];
  /* each report described by its own meta: B may be of another strategy */
  var describe = function (r) { return r.meta.program + ' program, ' + r.nDevices + ' device(s), ' + r.meta.strategy + ' - ' + r.path; };
  var sub = document.getElementById('subtitle');
  sub.textContent = reports[1] ? 'A: ' + describe(a) + '  |  B: ' + describe(reports[1]) : describe(a);
  sub.setAttribute('data-strategy-a', a.meta.strategy || '');
  if (reports[1]) sub.setAttribute('data-strategy-b', reports[1].meta.strategy || '');
  if (reports.length > 1) {
    var pick = document.getElementById('report-pick');
    reports.forEach(function (r, i) { pick.appendChild(el('option', { value: i }, (i ? 'target: ' : 'source: ') + r.path)); });
    pick.addEventListener('change', function () { cur = +pick.value; route(); });
    document.getElementById('report-pick-label').hidden = false;
  }
  window.addEventListener('hashchange', route);
  var timingRun = /^#timing/.test(location.hash);
  if (timingRun) history.replaceState(null, '', '#summary');
  route();
  timings.setAttribute('data-load', performance.now().toFixed(1));
  if (timingRun) {
    TABS.forEach(function (t) { history.replaceState(null, '', '#' + t[0]); route(); });
    history.replaceState(null, '', '#summary'); route();
  }
  document.body.setAttribute('data-ready', '1');
})();
