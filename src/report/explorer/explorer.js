// snapdiff's explorer: the interactive part of the HTML report.
// Reads the data container of docs/explorer.md (base64 of a gzip'd "SDX1"
// container) from #sd-explorer-data and builds, inside #sd-explorer, the
// timelines, the allocation's story, the moment panel and the search.
// Names from the snapshot are data: they reach the page only through
// textContent and setAttribute. Hand-written, no library, nothing fetched.
(function () {
  'use strict';

  var root = document.getElementById('sd-explorer');
  var api = {};
  var readyResolve = null;
  var readyReject = null;
  api.ready = new Promise(function (res, rej) { readyResolve = res; readyReject = rej; });
  api.ready.catch(function () { /* shown in the page; a test awaits it */ });
  window.snapdiffExplorer = api;
  if (!root) {
    readyReject(new Error('the page has no #sd-explorer'));
    return;
  }

  var ALIVE = 2147483647;
  var INDIVIDUAL_MAX = 6000;        // allocations in view drawn one by one at most
  var PLOT_H = 250;                  // a timeline canvas's CSS height
  var M = { l: 72, r: 14, t: 20, b: 40 };   // the plot's margins inside the canvas
  var SITE_ROWS = 20;

  // ---------------------------------------------------------------- helpers
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function add(parent, child) { parent.appendChild(child); return child; }
  function fmtBytes(b) {
    var a = Math.abs(b);
    var units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
    var u = 0;
    while (a >= 1024 && u < units.length - 1) { a /= 1024; u++; }
    if (u === 0) return (b < 0 ? '-' : '') + a + ' B';
    var s = a >= 100 ? a.toFixed(0) : a >= 10 ? a.toFixed(1) : a.toFixed(2);
    return (b < 0 ? '-' : '') + s + ' ' + units[u];
  }
  function fmtInt(n) {
    var s = String(Math.round(Math.abs(n)));
    var out = '';
    while (s.length > 3) { out = ',' + s.slice(-3) + out; s = s.slice(0, -3); }
    return (n < 0 ? '-' : '') + s + out;
  }
  function fmtCount(n) {
    if (Math.abs(n) >= 1e6) return parseFloat((n / 1e6).toFixed(2)) + 'M';
    if (Math.abs(n) >= 1e4) return parseFloat((n / 1e3).toFixed(1)) + 'k';
    return String(Math.round(n));
  }
  // an axis label of event e for ticks every s events: as many decimals as the step needs
  function tickLabel(e, s) {
    if (e >= 1e6 && s >= 1e4) return (e / 1e6).toFixed(Math.max(0, Math.ceil(-Math.log10(s / 1e6) - 1e-9))) + 'M';
    if (e >= 1e4 && s >= 10) return (e / 1e3).toFixed(Math.max(0, Math.ceil(-Math.log10(s / 1e3) - 1e-9))) + 'k';
    return fmtInt(e);
  }
  function fmtTime(us) {
    if (us >= 1e6) return (us / 1e6).toFixed(us >= 1e7 ? 1 : 2) + ' s';
    if (us >= 1e3) return (us / 1e3).toFixed(us >= 1e4 ? 0 : 1) + ' ms';
    return Math.round(us) + ' \u00b5s';
  }
  function fmtPct(x) { return (x * 100).toFixed(x >= 0.1 ? 1 : 2) + '%'; }
  // first index i in [lo, hi) with a[i] > v (a ascending)
  function upperBound(a, v, lo, hi) {
    if (lo === undefined) { lo = 0; hi = a.length; }
    while (lo < hi) { var m = (lo + hi) >>> 1; if (a[m] <= v) lo = m + 1; else hi = m; }
    return lo;
  }
  function lowerBound(a, v, lo, hi) {
    if (lo === undefined) { lo = 0; hi = a.length; }
    while (lo < hi) { var m = (lo + hi) >>> 1; if (a[m] < v) lo = m + 1; else hi = m; }
    return lo;
  }
  function clamp(x, lo, hi) { return x < lo ? lo : x > hi ? hi : x; }
  // every handler runs through this: an error shows as a line, never uncaught
  function guard(fn) {
    return function () {
      try { return fn.apply(this, arguments); } catch (err) { showStatus('explorer error: ' + (err && err.message || err)); }
      return undefined;
    };
  }
  var statusLine = null;
  function showStatus(text) { if (statusLine) statusLine.textContent = text; }

  // ---------------------------------------------------------------- decoding
  function base64Bytes(s) {
    // both skip ASCII white space and throw on anything outside the alphabet
    if (typeof Uint8Array.fromBase64 === 'function') return Uint8Array.fromBase64(s);
    var bin = atob(s);
    var n = bin.length;
    var u = new Uint8Array(n);
    for (var i = 0; i < n; i++) u[i] = bin.charCodeAt(i);
    return u;
  }
  function inflate(bytes) {
    if (typeof DecompressionStream !== 'function') {
      return Promise.reject(new Error('this browser cannot inflate gzip (no DecompressionStream)'));
    }
    var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'));
    return new Response(stream).arrayBuffer();
  }
  var TYPES = { i8: Int8Array, u8: Uint8Array, i16: Int16Array, u16: Uint16Array, i32: Int32Array, u32: Uint32Array, f64: Float64Array };
  function parseContainer(buf) {
    if (buf.byteLength < 8) throw new Error('the data is too short');
    var u8 = new Uint8Array(buf);
    if (u8[0] !== 0x53 || u8[1] !== 0x44 || u8[2] !== 0x58 || u8[3] !== 0x31) throw new Error('the data is not an SDX1 container');
    var hlen = new DataView(buf).getUint32(4, true);
    if (8 + hlen > buf.byteLength) throw new Error('the header runs past the data');
    var header = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(u8.subarray(8, 8 + hlen)));
    if (!header || header.version !== 1) throw new Error('unknown container version');
    var views = (header.arrays || []).map(function (a, k) {
      var T = TYPES[a.type];
      if (!T) throw new Error('array ' + k + ': unknown type ' + a.type);
      if (a.offset % 8 !== 0 || a.offset < 8 + hlen || a.offset + a.length * T.BYTES_PER_ELEMENT > buf.byteLength) {
        throw new Error('array ' + k + ' lies outside the data');
      }
      return new T(buf, a.offset, a.length);
    });
    function arr(ref, type, length) {
      if (ref === null || ref === undefined) return null;
      var a = views[ref.array];
      if (!a) throw new Error('a reference to a missing array');
      if (type && !(a instanceof TYPES[type])) throw new Error('array ' + ref.array + ' is not ' + type);
      if (length !== undefined && a.length !== length) throw new Error('array ' + ref.array + ' has ' + a.length + ' elements, not ' + length);
      return a;
    }
    return { header: header, arr: arr };
  }

  // ---------------------------------------------------------------- the model
  function buildRun(c, h, k) {
    var arr = c.arr;
    var r = {
      idx: k, label: h.label || '', input: h.input || '', device: h.device || 0, N: h.events | 0,
      cats: h.categories || [], phases: h.phases || [], iterations: h.iterations || [],
      peak: h.peak || null, ooms: h.ooms || [], frames: h.frames || [], sites: h.sites || [],
      evidence: h.evidence || [], kernels: h.kernels || [], states: [], levels: []
    };
    r.C = r.cats.length;
    r.name = (r.label ? r.label + ': ' : '') + (r.input || 'run') + ' (cuda:' + r.device + ')';
    (h.levels || []).forEach(function (L) {
      var B = L.buckets;
      r.levels.push({ B: B, event: arr(L.event, 'i32', B), byCat: arr(L.by_category, 'f64', B * r.C),
        req: arr(L.requested, 'f64', B), alc: arr(L.allocated, 'f64', B), res: arr(L.reserved, 'f64', B) });
    });
    if (!r.levels.length) throw new Error('run ' + k + ' has no levels');
    var fin = r.levels[r.levels.length - 1];
    var time = arr(h.time_us, 'f64', h.time_us ? fin.B : undefined);
    // the finest level's non-empty columns: event -> column, for moments and times
    var nz = 0, i;
    for (i = 0; i < fin.B; i++) if (fin.event[i] >= 0) nz++;
    r.colEv = new Int32Array(nz); r.colIx = new Int32Array(nz); r.colTime = time ? new Float64Array(nz) : null;
    nz = 0;
    for (i = 0; i < fin.B; i++) {
      if (fin.event[i] < 0) continue;
      r.colEv[nz] = fin.event[i]; r.colIx[nz] = i; if (time) r.colTime[nz] = time[i]; nz++;
    }
    var A = h.allocs || { count: 0, total: 0, note: '' };
    var n = A.count | 0;
    r.n = n; r.total = A.total | 0; r.note = A.note || '';
    // events [cFrom, cTo] where every allocation live then is in the page
    r.cFrom = typeof A.complete_from === 'number' ? A.complete_from : (r.n === r.total ? 0 : 1);
    r.cTo = typeof A.complete_to === 'number' ? A.complete_to : (r.n === r.total ? Infinity : 0);
    r.aAlloc = arr(A.alloc, 'i32', n) || new Int32Array(0);
    r.aFree = arr(A.free, 'i32', n) || new Int32Array(0);
    r.aSize = arr(A.size, 'f64', n) || new Float64Array(0);
    r.aAddr = arr(A.addr, 'f64', n);
    r.aCat = arr(A.category, 'u16', n) || new Uint16Array(0);
    r.aStack = arr(A.stack, 'i32', n) || new Int32Array(0);
    r.aEvid = arr(A.evidence, 'u16', n) || new Uint16Array(0);
    r.aKernel = arr(A.kernel, 'i32', n);
    var st = h.stacks || {};
    r.sParent = arr(st.parent, 'i32') || new Int32Array(1);
    r.sFrame = arr(st.frame, 'i32', r.sParent.length) || new Int32Array(1);
    r.sSite = arr(st.site, 'i32', r.sParent.length) || new Int32Array(1).fill(-1);
    (h.states || []).forEach(function (s) {
      var sg = s.segments || {}, bl = s.blocks || {};
      var ns = (arr(sg.addr, 'f64') || []).length, nb = (arr(bl.addr, 'f64') || []).length;
      r.states.push({ label: s.label || '', event: s.event,
        segAddr: arr(sg.addr, 'f64', ns), segSize: arr(sg.size, 'f64', ns),
        bSeg: arr(bl.segment, 'i32', nb), bAddr: arr(bl.addr, 'f64', nb), bSize: arr(bl.size, 'f64', nb), bAlloc: arr(bl.alloc, 'i32', nb) });
    });
    // allocations by free event (counting sort: stable by index)
    var N = r.N;
    var cnt = new Int32Array(N + 2);
    for (i = 0; i < n; i++) { var f = r.aFree[i]; cnt[(f >= 0 && f < N ? f : N) + 1]++; }
    for (i = 1; i < N + 2; i++) cnt[i] += cnt[i - 1];
    r.freeOrder = new Int32Array(n); r.freeSorted = new Int32Array(n);
    for (i = 0; i < n; i++) { var f2 = r.aFree[i]; var key = f2 >= 0 && f2 < N ? f2 : N; var p = cnt[key]++; r.freeOrder[p] = i; r.freeSorted[p] = f2 >= 0 && f2 < N ? f2 : ALIVE; }
    r.pos = new Int32Array(n).fill(-1);
    r.match = null; r.matchCount = 0; r.matchLive = null;
    r.lower = null;
    r.last = { mode: 'levels', drawn: 0, segs: null, nsegs: 0, level: null };
    return r;
  }

  // alignment of run B onto run A's events (diff): piecewise linear between
  // iteration starts, else by fraction of the run
  function makeMap(run, ref) {
    if (!ref || ref === run) { run.map = function (e) { return e; }; run.unmap = function (u) { return u; }; return; }
    var xs = [0], us = [0];
    var n = Math.min(run.iterations.length, ref.iterations.length);
    for (var k = 0; k < n; k++) {
      var a = run.iterations[k].start, b = ref.iterations[k].start;
      if (a > xs[xs.length - 1] && b > us[us.length - 1] && a < run.N && b < ref.N) { xs.push(a); us.push(b); }
    }
    xs.push(Math.max(run.N, xs[xs.length - 1] + 1)); us.push(Math.max(ref.N, us[us.length - 1] + 1));
    function lin(from, to) {
      return function (v) {
        var j = clamp(upperBound(from, v) - 1, 0, from.length - 2);
        return to[j] + (v - from[j]) * (to[j + 1] - to[j]) / (from[j + 1] - from[j]);
      };
    }
    run.map = lin(xs, us); run.unmap = lin(us, xs);
  }

  // ---------------------------------------------------------------- state
  var model = null;      // {kind, title, runs}
  var runs = [];
  var colors = {};
  var moment = null;     // {run, event, exact, total, byCat, bySite...}
  var pinned = null;     // {run, index}
  var hover = null;      // {run, index} under the mouse
  var searchState = { text: '', site: null, only: false };
  var rafPending = false;
  var firstDone = false;
  var ui = {};

  function readColors() {
    var cs = getComputedStyle(root);
    var names = ['bg', 'fg', 'muted', 'grid', 'allocated', 'reserved', 'peak', 'oom', 'cursor', 'highlight',
      'ph-forward', 'ph-backward', 'ph-optimizer', 'ph-other', 'free-block', 'foreign-block', 'pin'];
    names.forEach(function (n) { colors[n] = cs.getPropertyValue('--sd-' + n).trim() || '#888'; });
  }

  // ---------------------------------------------------------------- views
  function newView(uMax) { return { u0: 0, u1: uMax, uMax: uMax }; }
  function setViewU(v, u0, u1) {
    var minSpan = Math.min(8, v.uMax);
    var span = clamp(u1 - u0, minSpan, v.uMax);
    var c = (u0 + u1) / 2;
    u0 = clamp(c - span / 2, 0, v.uMax - span);
    v.u0 = u0; v.u1 = u0 + span;
  }
  // the plot's width in CSS pixels: measured once a frame (and when a hook asks)
  function measureW(run) { run.W = Math.max(10, (run.canvas.clientWidth || 800) - M.l - M.r); return run.W; }
  function plotW(run) { return run.W || measureW(run); }
  function uAtX(run, x) { var v = run.view; return v.u0 + (x - M.l) / plotW(run) * (v.u1 - v.u0); }
  function xOfU(run, u) { var v = run.view; return M.l + (u - v.u0) / (v.u1 - v.u0) * plotW(run); }
  function xOfE(run, e) { return xOfU(run, run.map(e)); }

  function scheduleRender() {
    if (rafPending) return;
    rafPending = true;
    requestAnimationFrame(function () {
      try { frame(); } catch (err) {
        if (!firstDone) fail(err); else showStatus('explorer error: ' + (err && err.message || err));
      }
    });
  }
  var renderWaiters = [];
  function frame() {
    rafPending = false;
    performance.mark('sd-step-start');
    runs.forEach(function (r) { prepare(r); });
    // a diff shares one y scale; a report's devices each have theirs
    if (model.kind === 'diff') {
      var m = 0;
      runs.forEach(function (r) { m = Math.max(m, r.yMax); });
      runs.forEach(function (r) { r.yMax = m; });
    }
    runs.forEach(function (r) { draw(r); });
    performance.measure('sd-step', 'sd-step-start');
    performance.clearMarks('sd-step-start');
    if (!firstDone) {
      firstDone = true;
      performance.mark('sd-first-render');
      readyResolve(true);
    }
    var w = renderWaiters; renderWaiters = [];
    w.forEach(function (f) { f(); });
  }

  // the level of detail and the y scale for the visible range
  function prepare(run) {
    var v = run.view;
    var e0 = run.unmap(v.u0), e1 = run.unmap(v.u1);
    run.e0 = e0; run.e1 = e1;
    var W = measureW(run);
    var N = Math.max(1, run.N);
    var lvIx = run.levels.length - 1;
    for (var k = 0; k < run.levels.length; k++) {
      if ((e1 - e0) * run.levels[k].B / N >= W) { lvIx = k; break; }
    }
    run.lv = run.levels[lvIx];
    var L = run.lv;
    run.b0 = clamp(Math.floor(e0 * L.B / N) - 1, 0, L.B);
    run.b1 = clamp(Math.ceil((e1 + 1) * L.B / N) + 1, 0, L.B);
    var m = 0;
    for (var b = run.b0; b < run.b1; b++) {
      if (L.res[b] > m) m = L.res[b];
      if (L.alc[b] > m) m = L.alc[b];
      if (L.req[b] > m) m = L.req[b];
    }
    // individual allocations: all of them in the page, and few enough in view
    var lo = Math.floor(e0), hi = Math.ceil(e1);
    run.lo = lo; run.hi = hi;
    var inView = run.n ? upperBound(run.aAlloc, hi) - upperBound(run.freeSorted, lo) : 0;
    run.inView = inView;
    run.individual = run.n > 0 && (run.n === run.total || (lo >= run.cFrom && hi <= run.cTo)) && inView <= INDIVIDUAL_MAX;
    run.yMax = niceMax(m > 0 ? m * 1.05 : 1024);
  }
  function tickStep(raw) {
    // binary units: 1, 2, 5 x 1024^p (and 10, 20, 50, 100, 200, 500 of a unit)
    var unit = 1;
    while (raw / unit >= 1024) unit *= 1024;
    var m = raw / unit;
    var steps = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1024];
    for (var i = 0; i < steps.length; i++) if (m <= steps[i]) return steps[i] * unit;
    return 1024 * unit;
  }
  function niceMax(m) { var s = tickStep(m / 5); return Math.ceil(m / s) * s; }

  function yOf(run, bytes) { var ph = PLOT_H - M.t - M.b; return M.t + ph - bytes / run.yMax * ph; }
  function bytesAtY(run, y) { var ph = PLOT_H - M.t - M.b; return (M.t + ph - y) / ph * run.yMax; }

  function phaseAt(run, e) {
    var ph = run.phases;
    var lo = 0, hi = ph.length;
    while (lo < hi) { var m = (lo + hi) >>> 1; if (ph[m].start <= e) lo = m + 1; else hi = m; }
    var p = ph[lo - 1];
    if (p && e >= p.start && e < p.end) return p;
    return null;
  }
  function phaseWords(p) {
    if (!p) return '';
    return (p.iteration > 0 ? 'iter ' + p.iteration + ' ' : '') + p.phase;
  }
  function eventWords(run, e) {
    if (e < 0) return 'before the recorded history';
    if (e >= ALIVE) return 'alive at the end';
    var p = phaseAt(run, e);
    return 'event ' + fmtInt(e) + (p ? ' (' + phaseWords(p) + ')' : '') + (run.colTime ? ', ' + fmtTime(timeAt(run, e)) : '');
  }
  function timeAt(run, e) {
    var ev = run.colEv, t = run.colTime;
    if (!t || !ev.length) return 0;
    var j = upperBound(ev, e) - 1;
    if (j < 0) return t[0];
    if (j >= ev.length - 1) return t[ev.length - 1];
    return t[j] + (e - ev[j]) * (t[j + 1] - t[j]) / Math.max(1, ev[j + 1] - ev[j]);
  }

  // ---------------------------------------------------------------- drawing
  function draw(run) {
    var cv = run.canvas;
    var dpr = window.devicePixelRatio || 1;
    var cssW = cv.clientWidth || 800;
    var wantW = Math.round(cssW * dpr), wantH = Math.round(PLOT_H * dpr);
    if (cv.width !== wantW || cv.height !== wantH) { cv.width = wantW; cv.height = wantH; }
    var ctx = run.ctx;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, cssW, PLOT_H);
    var W = plotW(run), PH = PLOT_H - M.t - M.b;
    ctx.font = '11px system-ui, sans-serif';
    ctx.textBaseline = 'middle';
    // phases
    ctx.save();
    ctx.beginPath(); ctx.rect(M.l, 0, W, PLOT_H); ctx.clip();
    drawPhases(run, ctx, W, PH);
    // y grid
    var step = tickStep(run.yMax / 5);
    ctx.strokeStyle = colors.grid; ctx.lineWidth = 1;
    ctx.beginPath();
    for (var y = step; y <= run.yMax; y += step) { var py = Math.round(yOf(run, y)) + 0.5; ctx.moveTo(M.l, py); ctx.lineTo(M.l + W, py); }
    ctx.stroke();
    run.last.drawn = 0; run.last.mode = 'levels';
    ctx.save();
    ctx.beginPath(); ctx.rect(M.l, M.t, W, PH); ctx.clip();
    var ok = false;
    if (run.individual) ok = drawAllocations(run, ctx);
    if (!ok) drawLevels(run, ctx);
    drawLines(run, ctx);
    ctx.restore();
    drawMarks(run, ctx, PH);
    ctx.restore();
    drawAxes(run, ctx, W, PH, step);
    var note = run.last.mode === 'allocations' ? fmtInt(run.last.drawn) + ' allocations drawn'
      : (run.n < run.total && run.inView <= INDIVIDUAL_MAX ? 'summary (only the peak\'s iteration has every allocation in this page)' : 'summary: ' + fmtInt(run.lv.B) + ' columns');
    run.modeLine.textContent = note;
  }

  function drawPhases(run, ctx, W, PH) {
    var kinds = { forward: 'ph-forward', backward: 'ph-backward', optimizer: 'ph-optimizer' };
    var ph = run.phases;
    var eA = run.e0, eB = run.e1;
    for (var i = 0; i < ph.length; i++) {
      var p = ph[i];
      if (p.end <= eA || p.start > eB) continue;
      var x0 = xOfE(run, p.start), x1 = xOfE(run, p.end);
      ctx.globalAlpha = p.iteration % 2 ? 0.55 : 0.32;
      ctx.fillStyle = colors[kinds[p.phase] || 'ph-other'];
      ctx.fillRect(x0, M.t, x1 - x0, PH);
      ctx.globalAlpha = 1;
      var label = (p.iteration > 0 ? 'iter ' + p.iteration + ' ' : '') + p.phase;
      var vis0 = Math.max(x0, M.l), vis1 = Math.min(x1, M.l + W);
      if (vis1 - vis0 > ctx.measureText(label).width + 8) {
        ctx.fillStyle = colors.muted;
        ctx.fillText(label, vis0 + 4, M.t - 8);
      }
    }
  }

  function drawLevels(run, ctx) {
    var L = run.lv, C = run.C, N = Math.max(1, run.N);
    var b0 = run.b0, b1 = run.b1, nb = b1 - b0;
    if (nb <= 0) return;
    var xs0 = new Float64Array(nb), xs1 = new Float64Array(nb), row = new Int32Array(nb), base = new Float64Array(nb);
    var prev = -1, i, b;
    for (b = b0 - 1; b >= 0 && prev < 0; b--) if (L.event[b] >= 0) prev = b;
    for (i = 0; i < nb; i++) {
      b = b0 + i;
      if (L.event[b] >= 0) prev = b;
      row[i] = prev;
      xs0[i] = xOfE(run, Math.floor(b * N / L.B));
      xs1[i] = xOfE(run, Math.floor((b + 1) * N / L.B));
    }
    var searching = run.match !== null;
    ctx.globalAlpha = searching ? 0.3 : 0.9;
    for (var c = 0; c < C; c++) {
      var any = false;
      for (i = 0; i < nb; i++) if (row[i] >= 0 && L.byCat[row[i] * C + c] > 0) { any = true; break; }
      if (!any) continue;
      ctx.beginPath();
      ctx.moveTo(xs0[0], yOf(run, base[0]));
      for (i = 0; i < nb; i++) {
        var v = row[i] >= 0 ? L.byCat[row[i] * C + c] : 0;
        var yy = yOf(run, base[i] + v);
        ctx.lineTo(xs0[i], yy); ctx.lineTo(xs1[i], yy);
      }
      for (i = nb - 1; i >= 0; i--) {
        var yb = yOf(run, base[i]);
        ctx.lineTo(xs1[i], yb); ctx.lineTo(xs0[i], yb);
        base[i] += row[i] >= 0 ? L.byCat[row[i] * C + c] : 0;
      }
      ctx.closePath();
      ctx.fillStyle = run.cats[c].color;
      ctx.fill();
    }
    ctx.globalAlpha = 1;
    if (searching && run.matchLive) {
      // the matching allocations' live bytes, at each column's event
      ctx.beginPath();
      ctx.moveTo(xs0[0], yOf(run, 0));
      for (i = 0; i < nb; i++) {
        var e = row[i] >= 0 ? L.event[row[i]] : -1;
        var mv = e >= 0 ? run.matchLive[e] : 0;
        var ym = yOf(run, mv);
        ctx.lineTo(xs0[i], ym); ctx.lineTo(xs1[i], ym);
      }
      ctx.lineTo(xs1[nb - 1], yOf(run, 0));
      ctx.closePath();
      ctx.fillStyle = colors.highlight;
      ctx.fill();
    }
    run.last.mode = 'levels';
    run.last.drawn = 0;
  }

  function drawLines(run, ctx) {
    // allocated and reserved: bucket maxima of the level in use (the finest when drawing allocations)
    var L = run.last.mode === 'allocations' ? run.levels[run.levels.length - 1] : run.lv;
    var N = Math.max(1, run.N);
    var b0, b1;
    if (L === run.lv) { b0 = run.b0; b1 = run.b1; } else {
      b0 = clamp(Math.floor(run.e0 * L.B / N) - 1, 0, L.B); b1 = clamp(Math.ceil((run.e1 + 1) * L.B / N) + 1, 0, L.B);
    }
    [['res', 'reserved', [5, 3]], ['alc', 'allocated', []]].forEach(function (d) {
      var a = L[d[0]];
      ctx.beginPath();
      var started = false;
      for (var b = b0; b < b1; b++) {
        var x0 = xOfE(run, Math.floor(b * N / L.B)), x1 = xOfE(run, Math.floor((b + 1) * N / L.B));
        var y = yOf(run, a[b]);
        if (!started) { ctx.moveTo(x0, y); started = true; } else ctx.lineTo(x0, y);
        ctx.lineTo(x1, y);
      }
      ctx.strokeStyle = colors[d[1]]; ctx.lineWidth = 1.5; ctx.setLineDash(d[2]);
      ctx.stroke();
    });
    ctx.setLineDash([]);
  }

  function drawMarks(run, ctx, PH) {
    function vline(e, color, label, dash, top) {
      if (e < run.e0 - 1 || e > run.e1 + 1) return;
      var x = Math.round(xOfE(run, e)) + 0.5;
      ctx.strokeStyle = color; ctx.lineWidth = 1.5; ctx.setLineDash(dash);
      ctx.beginPath(); ctx.moveTo(x, M.t); ctx.lineTo(x, M.t + PH); ctx.stroke();
      ctx.setLineDash([]);
      if (label) {
        ctx.fillStyle = color;
        var w = ctx.measureText(label).width;
        var lx = x + 4 + w > M.l + plotW(run) ? x - 4 - w : x + 4;
        ctx.fillText(label, lx, M.t + 8 + (top || 0));
      }
    }
    run.ooms.forEach(function (o) { vline(o.event, colors.oom, 'OOM', [3, 2], 14); });
    if (run.peak && run.peak.event >= 0) vline(run.peak.event, colors.peak, 'peak ' + fmtBytes(run.peak.requested), [], 0);
    if (moment && moment.run === run.idx) vline(moment.event, colors.cursor, '', [2, 2], 0);
    else if (moment && runs[moment.run] && runs[moment.run].view === run.view) {
      // a diff: the same place on the shared axis (iteration k at the same x)
      var m = runs[moment.run];
      vline(run.unmap(m.map(moment.event)), colors.cursor, '', [1, 4], 0);
    }
  }

  function drawAxes(run, ctx, W, PH, step) {
    ctx.fillStyle = colors.fg;
    ctx.strokeStyle = colors.muted; ctx.lineWidth = 1;
    ctx.beginPath();
    ctx.moveTo(M.l + 0.5, M.t); ctx.lineTo(M.l + 0.5, M.t + PH + 0.5); ctx.lineTo(M.l + W, M.t + PH + 0.5);
    ctx.stroke();
    ctx.textAlign = 'right';
    for (var y = 0; y <= run.yMax + 1; y += step) ctx.fillText(fmtBytes(y), M.l - 6, yOf(run, y));
    ctx.textAlign = 'center';
    var span = Math.max(1e-9, run.e1 - run.e0);
    var raw = span / Math.max(1, W / 110);
    var p10 = Math.pow(10, Math.floor(Math.log10(Math.max(raw, 1e-9))));
    var s = [1, 2, 5, 10].map(function (m) { return m * p10; }).filter(function (x) { return x >= raw; })[0] || 10 * p10;
    s = Math.max(1, s);
    ctx.beginPath();
    for (var e = Math.ceil(run.e0 / s) * s; e <= run.e1; e += s) {
      var x = xOfE(run, e);
      ctx.moveTo(x, M.t + PH); ctx.lineTo(x, M.t + PH + 4);
      edgeText(ctx, tickLabel(e, s), x, M.t + PH + 12, M.l, M.l + W + M.r - 2);
      if (run.colTime) edgeText(ctx, fmtTime(timeAt(run, e)), x, M.t + PH + 26, M.l, M.l + W + M.r - 2);
    }
    ctx.stroke();
    ctx.textAlign = 'right';
    ctx.fillStyle = colors.muted;
    ctx.fillText('event', M.l - 14, M.t + PH + 12);
    if (run.colTime) ctx.fillText('time', M.l - 14, M.t + PH + 26);
    ctx.textAlign = 'left';
  }

  // a label centred on x, kept inside [lo, hi]
  function edgeText(ctx, text, x, y, lo, hi) {
    var w = ctx.measureText(text).width;
    var left = clamp(x - w / 2, lo, hi - w);
    ctx.textAlign = 'left';
    ctx.fillText(text, left, y);
    ctx.textAlign = 'center';
  }

  // the individual allocations in view, stacked in allocation order (as
  // memory_viz draws them); a rect per stretch of constant offset
  function drawAllocations(run, ctx) {
    var lo = run.lo, hi = run.hi, n = run.n;
    var aA = run.aAlloc, aF = run.aFree, aS = run.aSize, pos = run.pos;
    var only = searchState.only && run.match;
    var match = run.match;
    var W = plotW(run);
    var minEv = 0.5 * Math.max(1e-9, run.e1 - run.e0) / W;   // half a pixel, in events
    var cap = n + 64;
    var live = run.liveBuf || (run.liveBuf = new Int32Array(Math.min(cap, 1 << 16)));
    var off = run.offBuf || (run.offBuf = new Float64Array(live.length));
    var st = run.stBuf || (run.stBuf = new Float64Array(live.length));
    var segs = run.last.segs || (run.last.segs = { es: new Float64Array(1 << 15), ee: new Float64Array(1 << 15), off: new Float64Array(1 << 15), id: new Int32Array(1 << 15) });
    var ns = 0, nl = 0, top = 0, budget = 3000000;
    function grow() {
      var m = segs.es.length * 2;
      ['es', 'ee', 'off'].forEach(function (k) { var a = new Float64Array(m); a.set(segs[k]); segs[k] = a; });
      var d = new Int32Array(m); d.set(segs.id); segs.id = d;
    }
    function emit(i, s, e, o) {
      if (e <= s) return;
      if (ns >= segs.es.length) grow();
      segs.es[ns] = s; segs.ee[ns] = e; segs.off[ns] = o; segs.id[ns] = i; ns++;
    }
    function push(i, ev) {
      if (nl >= live.length) {
        var m = live.length * 2;
        var a = new Int32Array(m); a.set(live); live = run.liveBuf = a;
        var b = new Float64Array(m); b.set(off); off = run.offBuf = b;
        var c = new Float64Array(m); c.set(st); st = run.stBuf = c;
      }
      live[nl] = i; off[nl] = top; st[nl] = ev; pos[i] = nl; nl++; top += aS[i];
    }
    var iEnd0 = upperBound(aA, lo);
    var startEv = Math.max(lo, -1);
    for (var i = 0; i < iEnd0; i++) {
      if (aF[i] > lo && !(only && !match[i])) push(i, startEv);
    }
    var ia = iEnd0, iaEnd = upperBound(aA, hi);
    var jf = upperBound(run.freeSorted, lo), jfEnd = upperBound(run.freeSorted, hi);
    var fo = run.freeOrder, fs = run.freeSorted;
    var aborted = false;
    // A free leaves a hole; the allocations above drop by its size. That is
    // applied lazily: once the holes add up to half a pixel of height (and at
    // most once per half pixel of time), the list is compacted and the
    // allocations whose offset changed start a new rect.
    var halfPx = 0.5 * run.yMax / (PLOT_H - M.t - M.b);
    var pending = 0, minDead = ALIVE, lastFlush = -2;
    function flush(ev) {
      var w = minDead, cum = minDead < nl ? off[minDead] : top;
      budget -= nl - minDead;
      for (var k = minDead; k < nl; k++) {
        var id = live[k];
        if (id < 0) continue;
        if (off[k] !== cum) {
          if (ev - st[k] >= minEv) { emit(id, st[k], ev, off[k]); st[k] = ev; }
        }
        live[w] = id; off[w] = cum; st[w] = st[k]; pos[id] = w; w++;
        cum += aS[id];
      }
      nl = Math.min(nl, w); top = cum; pending = 0; minDead = ALIVE; lastFlush = ev;
    }
    while (ia < iaEnd || jf < jfEnd) {
      var fe = jf < jfEnd ? fs[jf] : ALIVE, ae = ia < iaEnd ? aA[ia] : ALIVE;
      if (fe <= ae) {
        var j = fo[jf++];
        var p = pos[j];
        if (p < 0) continue;
        emit(j, st[p], fe, off[p]);
        live[p] = -1; pos[j] = -1;
        pending += aS[j];
        if (p < minDead) minDead = p;
        if (pending >= halfPx && fe - lastFlush >= minEv) flush(fe);
        if (budget < 0) { aborted = true; break; }
      } else {
        var i2 = ia++;
        if (pending >= halfPx && ae - lastFlush >= minEv) flush(ae);
        if (!(only && !match[i2])) push(i2, ae);
      }
    }
    for (var q = 0; q < nl; q++) {
      var lq = live[q];
      if (lq < 0) continue;
      if (!aborted) emit(lq, st[q], hi + 1, off[q]);
      pos[lq] = -1;
    }
    if (aborted) { for (var z = 0; z < n; z++) pos[z] = -1; return false; }
    run.last.nsegs = ns;
    run.last.mode = 'allocations';
    // how many distinct allocations were drawn
    var drawn = 0, seen = run.seenBuf || (run.seenBuf = new Uint8Array(n));
    for (var s = 0; s < ns; s++) { var d = segs.id[s]; if (!seen[d]) { seen[d] = 1; drawn++; } }
    for (s = 0; s < ns; s++) seen[segs.id[s]] = 0;
    run.last.drawn = drawn;
    // fill: per category, even and odd allocations in two shades; the search dims the rest
    var C = run.C, cat = run.aCat, dpr = window.devicePixelRatio || 1;
    // the rects grouped by fill (category x parity x matching), one pass
    // over them: a counting sort on the group key
    var G = C * 4, gcount = new Int32Array(G + 1), order = run.orderBuf;
    if (!order || order.length < ns) order = run.orderBuf = new Int32Array(Math.max(ns, 1024));
    function key(id) { return ((cat[id] * 2 + (id & 1)) * 2) + (match && !only && match[id] === 1 ? 1 : 0); }
    for (s = 0; s < ns; s++) gcount[key(segs.id[s]) + 1]++;
    for (var g = 0; g < G; g++) gcount[g + 1] += gcount[g];
    var fill = gcount.slice(0, G);
    for (s = 0; s < ns; s++) order[fill[key(segs.id[s])]++] = s;
    // dimmed (non-matching) groups first, matching ones on top
    for (var pass = 0; pass < 2; pass++) {
      for (g = 0; g < G; g++) {
        var isMatch = (g & 1) === 1;
        if ((pass === 1) !== isMatch) continue;
        var from = gcount[g], to = gcount[g + 1];
        if (from === to) continue;
        var c = g >> 2, par = (g >> 1) & 1;
        ctx.fillStyle = run.cats[c].color;
        ctx.globalAlpha = (match && !only && !isMatch ? 0.22 : 1) * (par ? 0.78 : 1);
        for (var k = from; k < to; k++) {
          s = order[k];
          var id2 = segs.id[s];
          // edges snapped to device pixels: the stack's shared edges round
          // alike, so each pixel row goes to one allocation (no gaps, no
          // pale blend of many thinner-than-a-pixel allocations)
          var y0 = Math.round(yOf(run, segs.off[s] + aS[id2]) * dpr) / dpr, y1 = Math.round(yOf(run, segs.off[s]) * dpr) / dpr;
          if (y1 <= y0) continue;
          var x0 = Math.round(xOfE(run, segs.es[s]) * dpr) / dpr, x1 = Math.round(xOfE(run, segs.ee[s]) * dpr) / dpr;
          if (x1 <= x0) x1 = x0 + 1 / dpr;
          ctx.fillRect(x0, y0, x1 - x0, y1 - y0);
        }
      }
    }
    ctx.globalAlpha = 1;
    outlineAlloc(run, ctx, hover, colors.fg, 1);
    outlineAlloc(run, ctx, pinned, colors.pin, 2.5);
    return true;
  }
  function outlineAlloc(run, ctx, which, color, width) {
    if (!which || which.run !== run.idx) return;
    var segs = run.last.segs, sz = run.aSize[which.index];
    ctx.beginPath();
    for (var s = 0; s < run.last.nsegs; s++) {
      if (segs.id[s] !== which.index) continue;
      var x0 = xOfE(run, segs.es[s]), x1 = xOfE(run, segs.ee[s]);
      var y0 = yOf(run, segs.off[s] + sz), y1 = yOf(run, segs.off[s]);
      ctx.rect(x0, y0, Math.max(1, x1 - x0), Math.max(1, y1 - y0));
    }
    ctx.strokeStyle = color; ctx.lineWidth = width; ctx.stroke();
  }

  // the allocation under a point of the canvas (individual drawing only)
  function allocAt(run, x, y) {
    if (run.last.mode !== 'allocations' || !run.last.segs) return -1;
    var e = run.unmap(uAtX(run, x)), b = bytesAtY(run, y);
    var segs = run.last.segs, sz = run.aSize;
    // a thin allocation stays hoverable: a pixel of slack
    var slackE = Math.max(1e-9, run.e1 - run.e0) / plotW(run), slackB = run.yMax / (PLOT_H - M.t - M.b);
    for (var s = run.last.nsegs - 1; s >= 0; s--) {
      var id = segs.id[s];
      if (e >= segs.es[s] - slackE && e < segs.ee[s] + slackE && b >= segs.off[s] - slackB && b < segs.off[s] + sz[id] + slackB) {
        if (e >= segs.es[s] && e < segs.ee[s] && b >= segs.off[s] && b < segs.off[s] + sz[id]) return id;
        var exact = -1;
        for (var t = s - 1; t >= 0; t--) {
          var d = segs.id[t];
          if (e >= segs.es[t] && e < segs.ee[t] && b >= segs.off[t] && b < segs.off[t] + sz[d]) { exact = d; break; }
        }
        return exact >= 0 ? exact : id;
      }
    }
    return -1;
  }

  // ---------------------------------------------------------------- tooltip
  function showTip(clientX, clientY, lines) {
    var t = ui.tip;
    while (t.firstChild) t.removeChild(t.firstChild);
    lines.forEach(function (l, i) { add(t, el('div', i === 0 ? 'sd-tip-head' : '', l)); });
    t.hidden = false;
    var w = t.offsetWidth, h = t.offsetHeight;
    var x = clientX + 14, y = clientY + 14;
    if (x + w > window.innerWidth - 4) x = clientX - 14 - w;
    if (y + h > window.innerHeight - 4) y = clientY - 14 - h;
    t.style.left = Math.max(2, x) + 'px';
    t.style.top = Math.max(2, y) + 'px';
  }
  function hideTip() { ui.tip.hidden = true; }
  function allocLines(run, i) {
    var site = siteOf(run, i);
    return [fmtBytes(run.aSize[i]) + ' \u00b7 ' + (run.cats[run.aCat[i]] ? run.cats[run.aCat[i]].name : '?'),
      site >= 0 ? run.sites[site] : '(no site)',
      'allocated ' + eventWords(run, run.aAlloc[i]),
      run.aFree[i] >= ALIVE ? 'alive at the end' : 'freed ' + eventWords(run, run.aFree[i])];
  }
  function siteOf(run, i) {
    var s = run.aStack[i];
    return s >= 0 && s < run.sSite.length ? run.sSite[s] : -1;
  }

  // ---------------------------------------------------------------- the timeline's controls
  function zoomAt(run, x, factor) {
    var v = run.view;
    var uc = uAtX(run, clamp(x, M.l, M.l + plotW(run)));
    setViewU(v, uc - (uc - v.u0) * factor, uc + (v.u1 - uc) * factor);
    // keep the cursor's point under the cursor when the span is clamped at the edges
    scheduleRender();
  }
  function panBy(run, du) {
    var v = run.view;
    setViewU(v, v.u0 + du, v.u1 + du);
    scheduleRender();
  }
  function resetView(run) { setViewU(run.view, 0, run.view.uMax); scheduleRender(); }

  function attachCanvas(run) {
    var cv = run.canvas;
    var drag = null;
    var lastX = null;
    function local(ev) { var r = cv.getBoundingClientRect(); return { x: ev.clientX - r.left, y: ev.clientY - r.top }; }
    cv.addEventListener('wheel', guard(function (ev) {
      ev.preventDefault();
      var p = local(ev);
      var dy = ev.deltaY * (ev.deltaMode === 1 ? 33 : ev.deltaMode === 2 ? 400 : 1);
      zoomAt(run, p.x, Math.exp(clamp(dy, -600, 600) * 0.0015));
    }), { passive: false });
    cv.addEventListener('mousedown', guard(function (ev) {
      if (ev.button !== 0) return;
      var p = local(ev);
      drag = { x: ev.clientX, y: ev.clientY, u0: run.view.u0, u1: run.view.u1, moved: false, px: p.x, py: p.y };
      ev.preventDefault();
      cv.focus();
    }));
    window.addEventListener('mousemove', guard(function (ev) {
      if (!drag) return;
      var dx = ev.clientX - drag.x;
      if (Math.abs(dx) > 3 || Math.abs(ev.clientY - drag.y) > 3) drag.moved = true;
      if (!drag.moved) return;
      var du = -dx / plotW(run) * (drag.u1 - drag.u0);
      setViewU(run.view, drag.u0 + du, drag.u1 + du);
      hideTip();
      scheduleRender();
    }));
    window.addEventListener('mouseup', guard(function (ev) {
      if (!drag) return;
      var d = drag; drag = null;
      if (d.moved || ev.button !== 0) return;
      clickAt(run, d.px, d.py);
    }));
    cv.addEventListener('mousemove', guard(function (ev) {
      if (drag && drag.moved) return;
      var p = local(ev);
      lastX = p.x;
      var id = allocAt(run, p.x, p.y);
      var before = hover;
      if (id >= 0) {
        hover = { run: run.idx, index: id };
        showTip(ev.clientX, ev.clientY, allocLines(run, id));
      } else {
        hover = null;
        if (p.x >= M.l && p.x <= M.l + plotW(run) && p.y >= M.t && p.y <= PLOT_H - M.b) {
          showTip(ev.clientX, ev.clientY, columnLines(run, p.x));
        } else hideTip();
      }
      if ((before && before.index) !== (hover && hover.index) || (before && before.run) !== (hover && hover.run)) scheduleRender();
    }));
    cv.addEventListener('mouseleave', guard(function () { hideTip(); if (hover) { hover = null; scheduleRender(); } }));
    cv.addEventListener('dblclick', guard(function (ev) { ev.preventDefault(); resetView(run); }));
    cv.addEventListener('keydown', guard(function (ev) {
      var v = run.view, span = v.u1 - v.u0;
      var x = lastX !== null ? lastX : M.l + plotW(run) / 2;
      var handled = true;
      switch (ev.key) {
        case '+': case '=': zoomAt(run, x, 0.7); break;
        case '-': case '_': zoomAt(run, x, 1 / 0.7); break;
        case 'ArrowLeft': panBy(run, -span * 0.15); break;
        case 'ArrowRight': panBy(run, span * 0.15); break;
        case 'Home': resetView(run); break;
        case 'Enter': if (hover && hover.run === run.idx) pin(run.idx, hover.index); else setMomentAt(run, uAtX(run, x)); break;
        case 'Escape': unpin(); break;
        default: handled = false;
      }
      if (handled) ev.preventDefault();
    }));
  }
  function clickAt(run, x, y) {
    var id = allocAt(run, x, y);
    if (id >= 0) { pin(run.idx, id); return; }
    if (x < M.l || x > M.l + plotW(run)) return;
    setMomentAt(run, uAtX(run, x));
  }
  function setMomentAt(run, u) {
    var e = Math.round(run.unmap(u));
    setMoment(run.idx, clamp(e, 0, Math.max(0, run.N - 1)));
  }
  function columnLines(run, x) {
    if (!run.lv) return ['\u2026'];
    var e = clamp(Math.round(run.unmap(uAtX(run, x))), 0, Math.max(0, run.N - 1));
    var L = run.lv, N = Math.max(1, run.N);
    var b = clamp(Math.floor(e * L.B / N), 0, L.B - 1);
    var lines = ['event ' + fmtInt(e) + (phaseAt(run, e) ? ' \u00b7 ' + phaseWords(phaseAt(run, e)) : '')];
    if (L.event[b] >= 0) {
      lines.push('column max (event ' + fmtInt(L.event[b]) + '): requested ' + fmtBytes(L.req[b]));
      lines.push('allocated ' + fmtBytes(L.alc[b]) + ' \u00b7 reserved ' + fmtBytes(L.res[b]));
    }
    lines.push('click: what is live here');
    return lines;
  }

  // ---------------------------------------------------------------- pinning and the story
  function pin(r, index) {
    var run = runs[r];
    if (!run || index < 0 || index >= run.n) throw new Error('no allocation ' + index + ' in run ' + r);
    pinned = { run: r, index: index };
    renderStory();
    scheduleRender();
  }
  function unpin() { pinned = null; renderStory(); scheduleRender(); }

  function renderStory() {
    var box = ui.story;
    while (box.firstChild) box.removeChild(box.firstChild);
    add(box, el('h3', null, 'Allocation'));
    if (!pinned) {
      add(box, el('p', 'sd-muted', 'Zoom in until allocations are drawn one by one, then click one (or press Enter on it) to see its story.'));
      return;
    }
    var run = runs[pinned.run], i = pinned.index;
    var head = add(box, el('p', 'sd-story-head'));
    add(head, el('strong', null, fmtBytes(run.aSize[i])));
    add(head, document.createTextNode(' (' + fmtInt(run.aSize[i]) + ' B) '));
    var cat = run.cats[run.aCat[i]] || { name: '?', color: '#888' };
    var sw = add(head, el('span', 'sd-swatch'));
    sw.style.background = cat.color;
    add(head, el('span', 'sd-cat', cat.name));
    if (runs.length > 1) add(head, el('span', 'sd-muted', ' \u00b7 ' + run.name));
    var close = add(head, el('button', 'sd-btn', 'unpin'));
    close.type = 'button';
    close.addEventListener('click', guard(unpin));
    var dl = add(box, el('dl', 'sd-kv'));
    function kv(k, v) { add(dl, el('dt', null, k)); return add(dl, el('dd', null, v)); }
    var ev = run.evidence[run.aEvid[i]];
    if (ev) { var dd = kv('why', ev.text); add(dd, el('span', 'sd-muted', ' (rule: ' + ev.rule + ')')); }
    var site = siteOf(run, i);
    kv('site', site >= 0 ? run.sites[site] : '(none)');
    kv('allocated', eventWords(run, run.aAlloc[i]));
    kv('freed', run.aFree[i] >= ALIVE ? 'alive at the end' : eventWords(run, run.aFree[i]));
    if (run.aKernel && run.aKernel[i] >= 0) kv('kernel', run.kernels[run.aKernel[i]] || '?');
    var pk = run.peak;
    if (pk && run.aAlloc[i] <= pk.event && pk.event < run.aFree[i] && pk.requested > 0) {
      kv('share of the peak', fmtPct(run.aSize[i] / pk.requested) + " of the peak's requested bytes");
    } else if (pk) kv('share of the peak', 'not live at the peak');
    kv('allocation', '#' + i + ' of ' + fmtInt(run.n));
    if (run.aAddr) kv('address', '0x' + run.aAddr[i].toString(16));
    var frames = [];
    var s = run.aStack[i], guardN = 0;
    while (s > 0 && s < run.sParent.length && guardN++ < 100000) { frames.push(run.sFrame[s]); s = run.sParent[s]; }
    // the user's own frames first (innermost first), then the whole stack
    // with the library, native and internal runs folded
    var mine = frames.filter(function (fr) { var f = run.frames[fr]; return f && (f.kind === 'user' || f.kind === 'scope'); });
    if (mine.length) {
      add(box, el('h4', null, 'Your code (innermost first)'));
      var ml = add(box, el('ol', 'sd-stack sd-mine'));
      mine.forEach(function (fr) { add(ml, frameItem(run.frames[fr])); });
    }
    add(box, el('h4', null, 'Full stack (innermost first)'));
    if (!frames.length) { add(box, el('p', 'sd-muted', 'no stack recorded')); return; }
    var list = add(box, el('ol', 'sd-stack'));
    var k = 0;
    while (k < frames.length) {
      var f = run.frames[frames[k]] || { label: '?', kind: 'internal' };
      if (f.kind === 'user' || f.kind === 'scope') { add(list, frameItem(f)); k++; continue; }
      var j = k;
      while (j < frames.length && !((run.frames[frames[j]] || {}).kind === 'user' || (run.frames[frames[j]] || {}).kind === 'scope')) j++;
      var li = add(list, el('li', 'sd-fold'));
      var det = add(li, el('details'));
      add(det, el('summary', null, (j - k) + ' library frame' + (j - k === 1 ? '' : 's')));
      var inner = add(det, el('ol', 'sd-stack'));
      for (var q = k; q < j; q++) add(inner, frameItem(run.frames[frames[q]] || { label: '?', kind: 'internal' }));
      k = j;
    }
  }
  function frameItem(f) {
    var li = el('li', 'sd-frame sd-k-' + (/^[a-z]+$/.test(f.kind) ? f.kind : 'other'));
    add(li, el('span', 'sd-kind', f.kind));
    add(li, el('code', null, f.label));
    return li;
  }

  // ---------------------------------------------------------------- the moment
  function setMoment(r, e) {
    var run = runs[r];
    if (!run) throw new Error('no run ' + r);
    e = clamp(Math.round(e), -1, Math.max(0, run.N - 1));
    var C = run.C, byCat = new Float64Array(C), bySite = new Map(), exact = true, total = 0;
    if (run.n === run.total || (e >= run.cFrom && e <= run.cTo)) {
      var iEnd = upperBound(run.aAlloc, e);
      for (var i = 0; i < iEnd; i++) {
        if (run.aFree[i] > e) {
          var sz = run.aSize[i];
          byCat[run.aCat[i]] += sz;
          var st = siteOf(run, i);
          var cur = bySite.get(st);
          if (cur) { cur[0] += sz; cur[1]++; } else bySite.set(st, [sz, 1]);
        }
      }
    } else {
      exact = false;
      var ev = run.colEv;
      if (ev.length) {
        var j = upperBound(ev, e);
        var best = j >= ev.length ? ev.length - 1 : j === 0 ? 0 : (e - ev[j - 1] <= ev[j] - e ? j - 1 : j);
        e = ev[best];
        var col = run.colIx[best], fin = run.levels[run.levels.length - 1];
        for (var c = 0; c < C; c++) byCat[c] = fin.byCat[col * C + c];
      }
    }
    for (var c2 = 0; c2 < C; c2++) total += byCat[c2];
    moment = { run: r, event: e, exact: exact, total: total, byCat: byCat, bySite: bySite };
    renderMoment();
    scheduleRender();
    return api.moment();
  }

  function renderMoment() {
    var box = ui.moment;
    while (box.firstChild) box.removeChild(box.firstChild);
    add(box, el('h3', null, 'Moment'));
    if (!moment) {
      add(box, el('p', 'sd-muted', 'Click the timeline (or pick a moment above) to see what is live then.'));
      renderSegments();
      return;
    }
    var run = runs[moment.run];
    add(box, el('p', 'sd-moment-head', (runs.length > 1 ? run.name + ' \u00b7 ' : '') + 'live after ' + eventWords(run, moment.event)));
    if (!moment.exact) {
      add(box, el('p', 'sd-note', 'Not every allocation is in this page (' + (run.note || fmtInt(run.n) + ' of ' + fmtInt(run.total)) +
        '): the figures are the nearest summary column\u2019s, exact at event ' + fmtInt(moment.event) + '; the moment moved there.'));
    }
    var t = add(box, el('table', 'sd-table'));
    var hr = add(add(t, el('thead')), el('tr'));
    ['category', 'bytes', '%'].forEach(function (h, k) { add(hr, el('th', k ? 'n' : null, h)); });
    var tb = add(t, el('tbody'));
    var order = [];
    for (var c = 0; c < run.C; c++) order.push(c);
    order.sort(function (a, b) { return moment.byCat[b] - moment.byCat[a] || a - b; });
    order.forEach(function (c) {
      var v = moment.byCat[c];
      if (v === 0) return;
      var tr = add(tb, el('tr'));
      tr.setAttribute('data-category', run.cats[c].name);
      var td = add(tr, el('td'));
      var sw = add(td, el('span', 'sd-swatch')); sw.style.background = run.cats[c].color;
      add(td, document.createTextNode(run.cats[c].name));
      numCell(tr, v, fmtBytes(v));
      add(tr, el('td', 'n', moment.total > 0 ? fmtPct(v / moment.total) : ''));
    });
    var trT = add(tb, el('tr', 'total'));
    add(trT, el('td', null, 'total'));
    numCell(trT, moment.total, fmtBytes(moment.total));
    add(trT, el('td', 'n', ''));
    if (moment.exact) {
      add(box, el('h4', null, 'By site (largest ' + SITE_ROWS + ')'));
      var ts = add(box, el('table', 'sd-table'));
      var hs = add(add(ts, el('thead')), el('tr'));
      ['bytes', 'count', 'site'].forEach(function (h, k) { add(hs, el('th', k < 2 ? 'n' : null, h)); });
      var tbs = add(ts, el('tbody'));
      var rows = Array.from(moment.bySite.entries()).sort(function (a, b) { return b[1][0] - a[1][0] || a[0] - b[0]; });
      rows.slice(0, SITE_ROWS).forEach(function (kv) {
        var tr = add(tbs, el('tr'));
        tr.setAttribute('data-site-index', String(kv[0]));
        numCell(tr, kv[1][0], fmtBytes(kv[1][0]));
        numCell(tr, kv[1][1], fmtInt(kv[1][1]));
        add(tr, el('td', 'site', kv[0] >= 0 ? run.sites[kv[0]] : '(no site)'));
        if (kv[0] >= 0) {
          tr.tabIndex = 0;
          tr.className = 'sd-site-row';
          tr.title = 'highlight this site\u2019s allocations';
          var go = guard(function () { siteSearch(run.sites[kv[0]]); });
          tr.addEventListener('click', go);
          tr.addEventListener('keydown', function (ev) { if (ev.key === 'Enter') { ev.preventDefault(); go(); } });
        }
      });
      if (rows.length > SITE_ROWS) {
        var rest = 0, rc = 0;
        rows.slice(SITE_ROWS).forEach(function (kv) { rest += kv[1][0]; rc += kv[1][1]; });
        var tro = add(tbs, el('tr', 'sd-other'));
        numCell(tro, rest, fmtBytes(rest)); numCell(tro, rc, fmtInt(rc));
        add(tro, el('td', 'site', (rows.length - SITE_ROWS) + ' other sites'));
      }
      var trs = add(tbs, el('tr', 'total'));
      numCell(trs, moment.total, fmtBytes(moment.total));
      add(trs, el('td', 'n', ''));
      add(trs, el('td', null, 'total'));
    }
    renderSegments();
  }
  function numCell(tr, v, text) {
    var td = add(tr, el('td', 'n', text));
    td.setAttribute('data-v', String(v));
    return td;
  }

  // the allocator's segments at the moment, when stored
  function renderSegments() {
    var box = ui.segments;
    while (box.firstChild) box.removeChild(box.firstChild);
    add(box, el('h3', null, 'Allocator state'));
    ui.segHits = null;
    if (!moment) { add(box, el('p', 'sd-muted', 'No moment chosen.')); return; }
    var run = runs[moment.run];
    var state = null;
    run.states.forEach(function (s) { if (s.event === moment.event && !state) state = s; });
    if (!state) {
      var p = add(box, el('p', 'sd-muted', run.states.length ? 'No allocator state is stored for this moment; stored: ' : 'No allocator state is stored in this page.'));
      run.states.forEach(function (s, k) {
        if (k) add(p, document.createTextNode(', '));
        var b = add(p, el('button', 'sd-link', s.label + ' (event ' + fmtInt(s.event) + ')'));
        b.type = 'button';
        b.addEventListener('click', guard(function () { jumpTo(run.idx, s.event); }));
      });
      return;
    }
    var ns = state.segAddr.length, nb = state.bAddr.length;
    var reserved = 0, used = 0, free = 0, largest = 0, i;
    for (i = 0; i < ns; i++) reserved += state.segSize[i];
    for (i = 0; i < nb; i++) {
      if (state.bAlloc[i] === -1) { free += state.bSize[i]; if (state.bSize[i] > largest) largest = state.bSize[i]; } else used += state.bSize[i];
    }
    add(box, el('p', 'sd-seg-totals', state.label + ' (event ' + fmtInt(state.event) + '): ' + fmtInt(ns) + ' segments \u00b7 reserved ' + fmtBytes(reserved) +
      ' \u00b7 used ' + fmtBytes(used) + ' \u00b7 free ' + fmtBytes(free) + ' \u00b7 largest free block ' + fmtBytes(largest) +
      ' \u00b7 fragmentation ' + (free > 0 ? fmtPct(1 - largest / free) : '0%')));
    var cv = add(box, el('canvas', 'sd-segcanvas'));
    cv.tabIndex = 0;
    cv.setAttribute('role', 'img');
    cv.setAttribute('aria-label', 'the allocator\u2019s segments and blocks; arrow keys step through the blocks, Enter pins one');
    var W = Math.max(200, (box.clientWidth || 800) - 4);
    // linear widths: the largest segment at most a row, all of them in about 10 rows
    var maxSeg = 0;
    for (i = 0; i < ns; i++) if (state.segSize[i] > maxSeg) maxSeg = state.segSize[i];
    var pxPerByte = Math.min(W / Math.max(1, maxSeg), W * 10 / Math.max(1, reserved));
    var ROW = 16, GAP = 4, x = 0, y = 0;
    var place = new Float64Array(ns * 3);
    for (i = 0; i < ns; i++) {
      var w = Math.max(4, state.segSize[i] * pxPerByte);
      if (x > 0 && x + w > W) { x = 0; y += ROW + GAP; }
      place[i * 3] = x; place[i * 3 + 1] = y; place[i * 3 + 2] = w;
      x += w + GAP;
    }
    var H = Math.min(4000, y + ROW + 2);
    var dpr = window.devicePixelRatio || 1;
    cv.style.width = W + 'px'; cv.style.height = H + 'px';
    cv.width = Math.round(W * dpr); cv.height = Math.round(H * dpr);
    var ctx = cv.getContext('2d');
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    var hatch = document.createElement('canvas');
    hatch.width = 6; hatch.height = 6;
    var hc = hatch.getContext('2d');
    hc.fillStyle = colors['free-block']; hc.globalAlpha = 0.35; hc.fillRect(0, 0, 6, 6); hc.globalAlpha = 1;
    hc.strokeStyle = colors['free-block']; hc.beginPath(); hc.moveTo(0, 6); hc.lineTo(6, 0); hc.stroke();
    var pattern = ctx.createPattern(hatch, 'repeat');
    var hits = [];
    for (i = 0; i < nb; i++) {
      var sg = state.bSeg[i];
      if (sg < 0 || sg >= ns) continue;
      var sx = place[sg * 3], sy = place[sg * 3 + 1], sw = place[sg * 3 + 2];
      var bx = sx + (state.bAddr[i] - state.segAddr[sg]) / state.segSize[sg] * sw;
      var bw = Math.max(0.5, state.bSize[i] / state.segSize[sg] * sw);
      var a = state.bAlloc[i];
      ctx.fillStyle = a === -1 ? pattern : a === -2 ? colors['foreign-block'] : (run.cats[run.aCat[a]] || { color: '#888' }).color;
      ctx.fillRect(bx, sy, bw, ROW);
      hits.push([bx, sy, bw, i]);
      if (pinned && pinned.run === run.idx && a === pinned.index) {
        ctx.strokeStyle = colors.pin; ctx.lineWidth = 2; ctx.strokeRect(bx, sy, Math.max(2, bw), ROW);
      }
    }
    ctx.strokeStyle = colors.muted; ctx.lineWidth = 1;
    for (i = 0; i < ns; i++) ctx.strokeRect(place[i * 3] + 0.5, place[i * 3 + 1] + 0.5, place[i * 3 + 2] - 1, ROW - 1);
    function blockAt(ev) {
      var r = cv.getBoundingClientRect(), px = ev.clientX - r.left, py = ev.clientY - r.top;
      for (var k = hits.length - 1; k >= 0; k--) {
        var hb = hits[k];
        if (px >= hb[0] - 0.5 && px <= hb[0] + hb[2] + 0.5 && py >= hb[1] && py <= hb[1] + ROW) return hb[3];
      }
      return -1;
    }
    cv.addEventListener('mousemove', guard(function (ev) {
      var b = blockAt(ev);
      if (b < 0) { hideTip(); return; }
      var a2 = state.bAlloc[b];
      var lines = [fmtBytes(state.bSize[b]) + (a2 === -1 ? ' free block' : a2 === -2 ? ' used (allocation not in this page)' : ' block'),
        'address 0x' + state.bAddr[b].toString(16)];
      if (a2 >= 0) lines = lines.concat(allocLines(run, a2)).concat(['click: pin this allocation']);
      showTip(ev.clientX, ev.clientY, lines);
    }));
    cv.addEventListener('mouseleave', guard(hideTip));
    // keys: arrows step through the blocks, Enter pins the block's allocation
    var kb = -1;
    cv.addEventListener('keydown', guard(function (ev) {
      if (!hits.length) return;
      if (ev.key === 'ArrowRight' || ev.key === 'ArrowDown') kb = Math.min(hits.length - 1, kb + 1);
      else if (ev.key === 'ArrowLeft' || ev.key === 'ArrowUp') kb = Math.max(0, kb - 1);
      else if (ev.key === 'Enter') { if (kb >= 0 && state.bAlloc[hits[kb][3]] >= 0) pin(run.idx, state.bAlloc[hits[kb][3]]); ev.preventDefault(); return; }
      else if (ev.key === 'Escape') { hideTip(); return; }
      else return;
      ev.preventDefault();
      var r = cv.getBoundingClientRect(), hb = hits[kb];
      var b = hb[3], a3 = state.bAlloc[b];
      var lines = ['block ' + (kb + 1) + ' of ' + hits.length + ': ' + fmtBytes(state.bSize[b]) + (a3 === -1 ? ' free' : a3 === -2 ? ' used (allocation not in this page)' : '')];
      if (a3 >= 0) lines = lines.concat(allocLines(run, a3)).concat(['Enter: pin this allocation']);
      showTip(r.left + hb[0] + hb[2] / 2, r.top + hb[1] + ROW, lines);
    }));
    cv.addEventListener('blur', guard(hideTip));
    cv.addEventListener('click', guard(function (ev) {
      var b = blockAt(ev);
      if (b >= 0 && state.bAlloc[b] >= 0) pin(run.idx, state.bAlloc[b]);
    }));
    var legend = add(box, el('p', 'sd-muted', 'Each bar is a segment (width by size), each block colored by its allocation\u2019s category; hatched: free; dark: used by an allocation not in this page.'));
    legend.setAttribute('data-role', 'legend');
  }

  // ---------------------------------------------------------------- jumps
  function jumpTo(r, e) {
    var run = runs[r];
    var u = run.map(e), v = run.view;
    if (u < v.u0 || u > v.u1) { var span = v.u1 - v.u0; setViewU(v, u - span / 2, u + span / 2); }
    setMoment(r, e);
  }
  function fillJump() {
    var s = ui.jump;
    add(s, el('option', null, 'jump to\u2026')).value = '';
    runs.forEach(function (run) {
      var g = add(s, el('optgroup'));
      g.label = runs.length > 1 ? run.name : 'moments';
      function opt(text, e) { var o = add(g, el('option', null, text)); o.value = run.idx + ':' + e; }
      if (run.peak && run.peak.event >= 0) opt('the peak (event ' + fmtInt(run.peak.event) + ')', run.peak.event);
      run.ooms.forEach(function (o) { opt('OOM at event ' + fmtInt(o.event) + (o.label ? ': ' + o.label : ''), o.event); });
      run.states.forEach(function (st) { opt(st.label + ' (event ' + fmtInt(st.event) + ', allocator state)', st.event); });
      run.phases.forEach(function (p) { if (p.end > p.start) opt(phaseWords(p) + ' starts (event ' + fmtInt(p.start) + ')', p.start); });
    });
    s.addEventListener('change', guard(function () {
      var v = s.value;
      if (!v) return;
      var parts = v.split(':');
      jumpTo(Number(parts[0]), Number(parts[1]));
    }));
  }

  // ---------------------------------------------------------------- search
  function runSearch(text, site) {
    searchState.text = text || '';
    searchState.site = site === undefined ? null : site;
    var q = searchState.text.toLowerCase();
    var total = 0;
    runs.forEach(function (run) {
      if (!q && searchState.site === null) { run.match = null; run.matchCount = 0; run.matchLive = null; return; }
      var i, S = run.sParent.length, n = run.n;
      var siteMatch = new Uint8Array(run.sites.length);
      var nodeMatch = new Uint8Array(S);
      var catMatch = new Uint8Array(run.C), kMatch = new Uint8Array(run.kernels.length);
      if (searchState.site !== null) {
        for (i = 0; i < run.sites.length; i++) siteMatch[i] = run.sites[i] === searchState.site ? 1 : 0;
      } else {
        if (!run.lower) run.lower = { frames: run.frames.map(function (f) { return String(f.label).toLowerCase(); }), sites: run.sites.map(function (s) { return String(s).toLowerCase(); }) };
        var fm = new Uint8Array(run.frames.length);
        for (i = 0; i < fm.length; i++) fm[i] = run.lower.frames[i].indexOf(q) >= 0 ? 1 : 0;
        for (i = 0; i < run.sites.length; i++) siteMatch[i] = run.lower.sites[i].indexOf(q) >= 0 ? 1 : 0;
        for (i = 0; i < run.C; i++) catMatch[i] = String(run.cats[i].name).toLowerCase().indexOf(q) >= 0 ? 1 : 0;
        for (i = 0; i < run.kernels.length; i++) kMatch[i] = String(run.kernels[i]).toLowerCase().indexOf(q) >= 0 ? 1 : 0;
        // a node matches if its frame does or its parent does (parents first)
        var par = run.sParent, fr = run.sFrame;
        var ordered = true;
        for (i = 1; i < S; i++) if (par[i] >= i) { ordered = false; break; }
        if (ordered) {
          for (i = 1; i < S; i++) nodeMatch[i] = (fm[fr[i]] || nodeMatch[par[i]]) ? 1 : 0;
        } else {
          var done = new Uint8Array(S); done[0] = 1;
          var chain = [];
          for (i = 1; i < S; i++) {
            var s = i; chain.length = 0;
            while (!done[s] && chain.length <= S) { chain.push(s); s = par[s] >= 0 && par[s] < S ? par[s] : 0; }
            for (var k = chain.length - 1; k >= 0; k--) { var t = chain[k]; nodeMatch[t] = (fm[fr[t]] || nodeMatch[par[t] >= 0 && par[t] < S ? par[t] : 0]) ? 1 : 0; done[t] = 1; }
          }
        }
      }
      var match = run.match && run.match.length === n ? run.match : new Uint8Array(n);
      var cnt = 0, st = run.aStack, ss = run.sSite, ker = run.aKernel, cat = run.aCat;
      for (i = 0; i < n; i++) {
        var node = st[i];
        var sIx = node >= 0 && node < S ? ss[node] : -1;
        var m = (sIx >= 0 && siteMatch[sIx]) || (node >= 0 && node < S && nodeMatch[node]) || catMatch[cat[i]] || (ker && ker[i] >= 0 && kMatch[ker[i]]) ? 1 : 0;
        match[i] = m; cnt += m;
      }
      run.match = match; run.matchCount = cnt;
      // the matching allocations' live bytes after each event
      var N = run.N;
      var live = run.matchLive && run.matchLive.length === N ? run.matchLive : new Float64Array(Math.max(1, N));
      live.fill(0);
      var base = 0;
      for (i = 0; i < n; i++) {
        if (!match[i]) continue;
        var a = run.aAlloc[i], f = run.aFree[i], sz = run.aSize[i];
        if (a < 0) base += sz; else if (a < N) live[a] += sz;
        if (f >= 0 && f < N) live[f] -= sz;
      }
      var acc = base;
      for (i = 0; i < N; i++) { acc += live[i]; live[i] = acc; }
      run.matchLive = live;
      total += cnt;
    });
    var active = !!q || searchState.site !== null;
    ui.count.textContent = active ? total + (total === 1 ? ' allocation matches' : ' allocations match') : '';
    ui.mode.textContent = searchState.site !== null ? 'site = ' + searchState.site : '';
    ui.modeClear.hidden = searchState.site === null;
    scheduleRender();
    return total;
  }
  function siteSearch(site) {
    ui.search.value = '';
    var n = runSearch('', site);
    root.scrollIntoView({ block: 'start' });
    return n;
  }

  // ---------------------------------------------------------------- building the DOM
  function build(header) {
    model = { kind: header.kind === 'diff' ? 'diff' : 'report', title: header.title || '' };
    while (root.firstChild) root.removeChild(root.firstChild);
    root.classList.add('sd-explorer');
    var bar = add(root, el('div', 'sd-bar'));
    add(bar, el('h2', 'sd-title', 'Explorer'));
    var lab = add(bar, el('label', 'sd-search-label'));
    add(lab, el('span', null, 'search '));
    ui.search = add(lab, el('input'));
    ui.search.id = 'sd-search'; ui.search.type = 'search';
    ui.search.placeholder = 'frame, file, site, category, kernel';
    ui.search.setAttribute('aria-label', 'search allocations by frame, file, site, category or kernel');
    var lo = add(bar, el('label', 'sd-only'));
    ui.only = add(lo, el('input'));
    ui.only.type = 'checkbox'; ui.only.id = 'sd-search-only';
    add(lo, document.createTextNode(' only matching'));
    ui.count = add(bar, el('output', 'sd-count'));
    ui.count.id = 'sd-search-count';
    ui.count.setAttribute('aria-live', 'polite');
    ui.mode = add(bar, el('span', 'sd-mode'));
    ui.mode.id = 'sd-search-mode';
    ui.modeClear = add(bar, el('button', 'sd-btn', 'clear'));
    ui.modeClear.type = 'button'; ui.modeClear.hidden = true;
    var jl = add(bar, el('label', 'sd-jump-label'));
    add(jl, el('span', null, 'moment '));
    ui.jump = add(jl, el('select'));
    ui.jump.id = 'sd-jump';
    add(root, el('p', 'sd-help', 'Wheel: zoom \u00b7 drag: pan \u00b7 double-click or Home: reset \u00b7 click: the moment, or pin an allocation \u00b7 keys on a timeline: + \u2212 \u2190 \u2192 Enter Escape'));
    statusLine = add(root, el('p', 'sd-status'));
    statusLine.setAttribute('role', 'status');
    var tl = add(root, el('div', 'sd-timelines'));
    runs.forEach(function (run) {
      var fig = add(tl, el('figure', 'sd-run'));
      var cap = add(fig, el('figcaption'));
      add(cap, el('strong', null, run.label ? run.label : ''));
      add(cap, document.createTextNode((run.label ? ' ' : '') + run.input + ' \u00b7 cuda:' + run.device + ' \u00b7 ' + fmtInt(run.N) + ' events \u00b7 ' + fmtInt(run.total) + ' allocations'));
      if (run.n < run.total) add(cap, el('span', 'sd-note', ' \u00b7 in this page: ' + (run.note || fmtInt(run.n))));
      run.canvas = add(fig, el('canvas', 'sd-timeline'));
      run.canvas.tabIndex = 0;
      run.canvas.setAttribute('role', 'img');
      run.canvas.setAttribute('aria-label', 'memory timeline of ' + run.name + '; keys: + and - zoom, arrows pan, Home resets, Enter pins, Escape unpins');
      run.canvas.style.height = PLOT_H + 'px';
      run.ctx = run.canvas.getContext('2d');
      var legend = add(fig, el('div', 'sd-legend'));
      run.cats.forEach(function (c) {
        var item = add(legend, el('span', 'sd-legend-item'));
        var sw = add(item, el('span', 'sd-swatch')); sw.style.background = c.color;
        add(item, document.createTextNode(c.name));
      });
      [['allocated', 'sd-line-allocated'], ['reserved', 'sd-line-reserved'], ['peak', 'sd-line-peak'], ['OOM', 'sd-line-oom']].forEach(function (d) {
        var item = add(legend, el('span', 'sd-legend-item'));
        add(item, el('span', 'sd-line ' + d[1]));
        add(item, document.createTextNode(d[0]));
      });
      run.modeLine = add(legend, el('span', 'sd-mode-line sd-muted'));
      attachCanvas(run);
    });
    var panels = add(root, el('div', 'sd-panels'));
    ui.story = add(panels, el('section', 'sd-panel'));
    ui.story.id = 'sd-story';
    var mom = add(panels, el('section', 'sd-panel'));
    ui.moment = add(mom, el('div'));
    ui.moment.id = 'sd-moment';
    ui.segments = add(mom, el('div'));
    ui.segments.id = 'sd-segments';
    ui.tip = add(root, el('div', 'sd-tip'));
    ui.tip.hidden = true;
    ui.tip.setAttribute('role', 'tooltip');
    fillJump();
    renderStory();
    renderMoment();
    ui.search.addEventListener('input', guard(function () { runSearch(ui.search.value); }));
    ui.only.addEventListener('change', guard(function () { searchState.only = ui.only.checked; scheduleRender(); }));
    ui.modeClear.addEventListener('click', guard(function () { ui.search.value = ''; runSearch(''); }));
    // the report's tables: a site row searches that site in every run
    Array.prototype.forEach.call(document.querySelectorAll('tr[data-site]'), function (tr) {
      if (root.contains(tr)) return;
      tr.tabIndex = 0;
      tr.classList.add('sd-site-row');
      var go = guard(function () { siteSearch(tr.getAttribute('data-site')); });
      tr.addEventListener('click', go);
      tr.addEventListener('keydown', function (ev) { if (ev.key === 'Enter') { ev.preventDefault(); go(); } });
    });
    // a resize redraws the timelines, and the segments once it settles
    var segTimer = 0;
    window.addEventListener('resize', function () {
      scheduleRender();
      clearTimeout(segTimer);
      segTimer = setTimeout(guard(function () { if (moment) renderSegments(); }), 150);
    });
    if (window.matchMedia) {
      var mq = window.matchMedia('(prefers-color-scheme: dark)');
      var onScheme = guard(function () { readColors(); renderSegments(); scheduleRender(); });
      if (mq.addEventListener) mq.addEventListener('change', onScheme);
    }
  }

  // ---------------------------------------------------------------- the test hook
  function runOf(r) { var run = runs[r]; if (!run) throw new Error('no run ' + r); return run; }
  api.runs = 0;
  api.view = function (r) { var run = runOf(r); return { e0: run.unmap(run.view.u0), e1: run.unmap(run.view.u1) }; };
  api.setView = function (r, e0, e1) {
    var run = runOf(r);
    setViewU(run.view, run.map(e0), run.map(e1));
    scheduleRender();
    return new Promise(function (res) { renderWaiters.push(res); });
  };
  api.xOf = function (r, e) { var run = runOf(r); measureW(run); return run.canvas.getBoundingClientRect().left + xOfE(run, e); };
  api.yMid = function (r) { var run = runOf(r); return run.canvas.getBoundingClientRect().top + M.t + (PLOT_H - M.t - M.b) / 2; };
  api.drawnAllocations = function (r) { return runOf(r).last.drawn; };
  api.moment = function () {
    if (!moment) return null;
    var run = runs[moment.run], bc = {};
    for (var c = 0; c < run.C; c++) bc[run.cats[c].name] = moment.byCat[c];
    return { run: moment.run, event: moment.event, exact: moment.exact, total: moment.total, by_category: bc };
  };
  api.setMoment = function (r, e) { runOf(r); return setMoment(r, e); };
  api.pinned = function () { return pinned ? { run: pinned.run, index: pinned.index } : null; };
  api.pin = function (r, i) { pin(r, i); };
  api.search = function (text) { if (!runs.length) return 0; if (ui.search) ui.search.value = text; return runSearch(text); };
  api.searchSite = function (site) { return siteSearch(site); };
  api.highlighted = function (r) { var run = runOf(r); return run.match ? run.matchCount : 0; };
  api.stepTimes = function () { return performance.getEntriesByName('sd-step', 'measure').map(function (m) { return m.duration; }); };

  // ---------------------------------------------------------------- start
  function fail(err) {
    var msg = (err && err.message) ? err.message : String(err);
    while (root.firstChild) root.removeChild(root.firstChild);
    add(root, el('p', 'sd-error', 'The explorer could not read its data: ' + msg));
    readyReject(err instanceof Error ? err : new Error(msg));
  }
  function start() {
    var node = document.getElementById('sd-explorer-data');
    if (!node) { fail(new Error('the page has no explorer data')); return; }
    var bytes;
    try { bytes = base64Bytes(node.textContent || ''); } catch (e) { fail(new Error('the data is not base64')); return; }
    inflate(bytes).catch(function (err) {
      throw new Error('the data does not inflate as gzip (' + ((err && err.message) || err) + ')');
    }).then(function (buf) {
      var c = parseContainer(buf);
      var h = c.header;
      if (!Array.isArray(h.runs)) throw new Error('the header has no runs');
      runs = h.runs.map(function (rh, k) { return buildRun(c, rh, k); });
      api.runs = runs.length;
      if (!runs.length) {
        // an input without any allocation history (dumped blocks only, an
        // empty trace): nothing to draw, which is not an error
        while (root.firstChild) root.removeChild(root.firstChild);
        add(root, el('p', 'sd-note', 'Nothing to explore: this input records no allocation history ' +
          '(no trace entries). The report below says what it holds.'));
        performance.mark('sd-first-render');
        readyResolve(true);
        return;
      }
      var ref = runs[0];
      var shared = null;
      if (h.kind === 'diff') {
        runs.forEach(function (run) { makeMap(run, run.label === 'B' ? ref : null); });
        var uMax = 1;
        runs.forEach(function (run) { uMax = Math.max(uMax, run.map(run.N)); });
        shared = newView(uMax);
      }
      runs.forEach(function (run) {
        if (!run.map) makeMap(run, null);
        run.view = shared || newView(Math.max(1, run.N));
      });
      readColors();
      build(h);
      scheduleRender();
    }).catch(fail);
  }
  try { start(); } catch (err) { fail(err); }
})();
