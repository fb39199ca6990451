// One file over 600 lines: the page is one script the report embeds whole (no bundler), drawing one data model.
// evenkeel's run report page: draws the data model of docs/report_format.md (format_version
// 1) and computes nothing the C++ side decides (verdicts, incidents, GPU-hours).
//
// Panels share one time axis and the same left/right margins (GUTTER, RIGHT), so a time is
// the same x in every panel: a ruler, the attempts lane, the verdict band, the utilization
// and power heatmaps (canvas + ImageData) and one uPlot chart per series. An overlay canvas
// over the stack draws checkpoint and attempt lines and the hover cursor across panels.
//
// Heatmaps draw per screen column the min (or, toggled, the max) of the chosen level's
// cells in that column, never an average, so that one rank at 0 % for two samples stays
// visible at the widest zoom; when ranks outnumber pixel rows, ranks are folded the same
// way. The chosen level is the coarsest whose cells are no wider than a pixel column (every
// column then holds at least one cell), else the finest there is.
//
// Runs after uPlot (global `uPlot`) and after <script id="ek-data">. Opens from disk with no
// network; in live mode (data.live) it refetches /data.json every data.poll_s seconds.
'use strict';
(() => {
  const GUTTER = 76;  // px left of every plot area: rank and axis labels
  const RIGHT = 16;   // px right of every plot area
  const SEVERITY = ['DEADLOCK_SUSPECT', 'STARVATION', 'COMMUNICATION', 'UNKNOWN', 'CHECKPOINT',
    'IDLE', 'HEALTHY'];
  const OUTCOME_COLORS = {completed: '#009E73', failed: '#D55E00', hung: '#CC79A7',
    running: '#56B4E9', cancelled: '#999999'};
  const MISSING_RGB = [217, 217, 217];  // light grey, no hatch: a cell with no reading
  const NO_VERDICT_RGB = [238, 238, 238];
  // Viridis (matplotlib's, CC0) sampled at 33 points, linearly interpolated to 256 entries:
  // within 2/255 of matplotlib's 256-entry table in every channel.
  const VIRIDIS33 = '440154470d6048186a482374472d7b4537814240863e49893b528b375b8d33638d2f6b8e' +
    '2c728e297a8e26828e23898e21918c1f978b1f9f8821a68527ad8131b57b3dbc744cc26c5cc8636ece5881d34d' +
    '95d840aadc32c0df25d5e21aeae51afde725';
  const SERIES = [
    {key: 'tokens_per_s', title: 'tokens/s', color: '#0072B2'},
    {key: 'step', title: 'step', color: '#000000'},
    {key: 'loss', title: 'loss', color: '#D55E00'},
  ];
  const TICKS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600,
    43200, 86400, 172800, 604800];

  const $ = (id) => document.getElementById(id);
  const el = (tag, cls, text) => {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  };
  const clamp = (v, lo, hi) => Math.min(hi, Math.max(lo, v));

  // ---- colors --------------------------------------------------------------------------

  const VIRIDIS = (() => {
    const a = [];
    for (let i = 0; i < 33; i++) {
      a.push([0, 2, 4].map((k) => parseInt(VIRIDIS33.substr(i * 6 + k, 2), 16)));
    }
    const lut = [];
    for (let i = 0; i < 256; i++) {
      const f = i * 32 / 255, j = Math.min(31, Math.floor(f)), w = f - j;
      lut.push([0, 1, 2].map((k) => Math.round(a[j][k] + (a[j + 1][k] - a[j][k]) * w)));
    }
    return lut;
  })();
  const LITTLE = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;
  const pack = ([r, g, b], a = 255) =>
    LITTLE ? ((a << 24) | (b << 16) | (g << 8) | r) >>> 0 : ((r << 24) | (g << 16) | (b << 8) | a) >>> 0;
  const hexRgb = (hex) => {
    const m = /^#?([0-9a-f]{6})$/i.exec(String(hex || ''));
    if (!m) return [0, 0, 0];
    const n = parseInt(m[1], 16);
    return [n >> 16, (n >> 8) & 255, n & 255];
  };
  // byte -> packed RGBA for a metric whose full scale is `top` (100 for util, 254 for power)
  function lut32(top) {
    const t = new Uint32Array(256);
    for (let v = 0; v < 256; v++) {
      t[v] = v === 255 ? pack(MISSING_RGB) : pack(VIRIDIS[Math.round(Math.min(v, top) * 255 / top)]);
    }
    return t;
  }
  const LUT = {util: lut32(100), power: lut32(254)};

  // ---- formatting ----------------------------------------------------------------------

  const pad2 = (n) => String(n).padStart(2, '0');
  function fmtTime(t, withDate, step) {
    if (!Number.isFinite(t)) return '—';
    const d = new Date(t * 1000);
    let s = pad2(d.getUTCHours()) + ':' + pad2(d.getUTCMinutes());
    if (step === undefined || step < 60) s += ':' + pad2(d.getUTCSeconds());
    if (step !== undefined && step < 1) s += '.' + String(d.getUTCMilliseconds()).padStart(3, '0');
    if (withDate) s = d.getUTCFullYear() + '-' + pad2(d.getUTCMonth() + 1) + '-' + pad2(d.getUTCDate()) + ' ' + s;
    return s;
  }
  function fmtDur(s) {
    if (!Number.isFinite(s)) return '—';
    if (s < 120) return (Math.round(s * 10) / 10) + ' s';
    if (s < 7200) return Math.round(s / 60) + ' min';
    return (Math.round(s / 360) / 10) + ' h';
  }
  function fmtSI(v) {
    if (v === null || !Number.isFinite(v)) return '';
    const a = Math.abs(v);
    for (const [d, u] of [[1e12, 'T'], [1e9, 'G'], [1e6, 'M'], [1e3, 'k']]) {
      if (a >= d) return +(v / d).toPrecision(3) + u;
    }
    return String(+v.toPrecision(4));
  }
  const fmtInt = (v) => (Number.isFinite(v) ? Math.round(v).toLocaleString('en-US') : '—');
  function fmtRanks(ranks) {
    if (!Array.isArray(ranks) || !ranks.length) return 'all';
    const r = [...ranks].sort((a, b) => a - b), out = [];
    for (let i = 0; i < r.length;) {
      let j = i;
      while (j + 1 < r.length && r[j + 1] === r[j] + 1) j++;
      out.push(j > i ? r[i] + '-' + r[j] : String(r[i]));
      i = j + 1;
    }
    return out.join(',');
  }
  function fmtList(a, most = 6) {
    if (!Array.isArray(a) || !a.length) return 'all';
    return a.length <= most ? a.join(', ') : a.slice(0, most).join(', ') + ` … (+${a.length - most})`;
  }

  // ---- the model -----------------------------------------------------------------------

  function decode64(s) {
    if (typeof s !== 'string') return null;
    if (typeof Uint8Array.fromBase64 === 'function') return Uint8Array.fromBase64(s);
    const bin = atob(s), a = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) a[i] = bin.charCodeAt(i);
    return a;
  }

  // Decodes every base64 grid once and checks its size; a part that does not fit the
  // format is left out with a page note, never guessed at.
  function prepare(data) {
    const problems = [];
    const world = Array.isArray(data.ranks) && data.ranks.length ? data.ranks.length
      : (data.run && data.run.world) || 0;
    const levels = [];
    const hm = data.heatmap;
    if (hm && Array.isArray(hm.levels)) {
      hm.levels.forEach((L, i) => {
        const g = {cols: L.cols, t0: L.t0, dt: L.dt};
        let ok = L.cols > 0 && L.dt > 0 && Number.isFinite(L.t0) && world > 0;
        for (const [k, src] of [['umin', 'util_min'], ['umax', 'util_max'], ['pmin', 'power_min'], ['pmax', 'power_max']]) {
          g[k] = ok ? decode64(L[src]) : null;
          if (!g[k] || g[k].length !== world * L.cols) ok = false;
        }
        if (ok) levels.push(g);
        else problems.push(`heatmap level ${i} does not hold ${world} x ${L.cols} cells: left out`);
      });
    }
    const v = data.verdicts || {};
    const names = Array.isArray(v.names) ? v.names : [];
    const colors = names.map((n) => pack(hexRgb((v.colors || {})[n])));
    const sev = names.map((n) => (SEVERITY.includes(n) ? SEVERITY.indexOf(n) : SEVERITY.length));
    const bands = [];
    (Array.isArray(v.band) ? v.band : []).forEach((B, i) => {
      const values = B.cols > 0 && B.dt > 0 ? decode64(B.values) : null;
      if (values && values.length === B.cols) bands.push({cols: B.cols, t0: B.t0, dt: B.dt, values});
      else problems.push(`verdict band ${i} does not hold ${B.cols} columns: left out`);
    });
    let t0 = data.time && data.time.start, t1 = data.time && data.time.end;
    if (!(Number.isFinite(t0) && Number.isFinite(t1) && t1 > t0)) {
      const ts = [];
      for (const L of levels) ts.push(L.t0, L.t0 + L.cols * L.dt);
      for (const s of SERIES) for (const p of (data.series || {})[s.key] || []) ts.push(p[0]);
      t0 = ts.length ? Math.min(...ts) : 0;
      t1 = ts.length ? Math.max(...ts) : 1;
      if (t1 <= t0) t1 = t0 + 1;
      problems.push('no time range given: taken from the data');
    }
    // One line per attempt: a gap (null) where a new attempt starts between two points.
    const starts = (Array.isArray(data.attempts) ? data.attempts : []).map((a) => a.start)
      .filter(Number.isFinite).sort((a, b) => a - b);
    const series = [];
    for (const s of SERIES) {
      const pts = (data.series || {})[s.key];
      if (!Array.isArray(pts) || !pts.length) continue;
      const x = [], y = [];
      let k = 0;
      for (const [t, v] of pts) {
        while (k < starts.length && starts[k] <= t) {
          if (x.length && starts[k] > x[x.length - 1]) { x.push(starts[k]); y.push(null); }
          k++;
        }
        x.push(t);
        y.push(v === null || v === undefined ? null : +v);
      }
      series.push({...s, x, y});
    }
    return {
      data, world, levels, bands, names, colors, sev, t0, t1, series, problems,
      ranks: Array.isArray(data.ranks) ? data.ranks : [],
      powerMax: (hm && hm.scale && hm.scale.power_max_w) || 1500,
      segments: Array.isArray(v.segments) ? v.segments : [],
      attempts: Array.isArray(data.attempts) ? data.attempts : [],
      checkpoints: Array.isArray(data.checkpoints) ? data.checkpoints : [],
      incidents: Array.isArray(data.incidents) ? data.incidents : [],
      finestDt: levels.length ? levels[levels.length - 1].dt : (t1 - t0) / 4096,
    };
  }

  // ---- state and the public API --------------------------------------------------------

  const S = {
    m: null, view: {t0: 0, t1: 1}, max: false, tall: false, renders: 0,
    panels: [], plots: [], overlay: null, hover: null, drag: null, frame: 0, level: -1, readyMs: null,
  };

  function levelFor(t0, t1, widthPx, levels = S.m.levels) {
    if (!levels.length) return -1;
    const px = (t1 - t0) / Math.max(1, widthPx);
    for (let i = 0; i < levels.length; i++) if (levels[i].dt <= px) return i;
    return levels.length - 1;
  }
  const colOf = (L, t) => Math.floor((t - L.t0) / L.dt);

  function cell(rank, t) {
    const m = S.m;
    if (!(rank >= 0 && rank < m.world)) return null;
    for (let i = m.levels.length - 1; i >= 0; i--) {
      const L = m.levels[i], c = colOf(L, t);
      if (c < 0 || c >= L.cols) continue;
      const k = rank * L.cols + c, u = (a) => (a[k] === 255 ? null : a[k]);
      const w = (a) => (a[k] === 255 ? null : a[k] * m.powerMax / 254);
      return {utilMin: u(L.umin), utilMax: u(L.umax), powerMinW: w(L.pmin), powerMaxW: w(L.pmax), level: i};
    }
    return null;
  }

  function verdictAt(t) {
    const m = S.m;
    for (let i = m.bands.length - 1; i >= 0; i--) {
      const B = m.bands[i], c = colOf(B, t);
      if (c < 0 || c >= B.cols) continue;
      const v = B.values[c];
      return v < m.names.length ? m.names[v] : null;
    }
    return null;
  }

  function setView(t0, t1, now = true) {
    const m = S.m, full = m.t1 - m.t0;
    let span = clamp(t1 - t0, Math.min(full, Math.max(1e-3, m.finestDt * 4)), full);
    if (!Number.isFinite(span)) span = full;
    let a = Number.isFinite(t0) ? t0 : m.t0;
    if (t1 - t0 !== span) a = (t0 + t1) / 2 - span / 2;
    a = clamp(a, m.t0, m.t1 - span);
    S.view = {t0: a, t1: a + span};
    if (now) render();
    else if (!S.frame) S.frame = requestAnimationFrame(() => { S.frame = 0; render(); });
  }
  const isFull = () => S.view.t0 <= S.m.t0 + 1e-6 && S.view.t1 >= S.m.t1 - 1e-6;

  let resolveReady, rejectReady;
  const api = {
    ready: new Promise((res, rej) => { resolveReady = res; rejectReady = rej; }),
    get data() { return S.m && S.m.data; },
    get view() { return {t0: S.view.t0, t1: S.view.t1}; },
    get renders() { return S.renders; },
    get mode() { return S.max ? 'max' : 'min'; },
    get level() { return S.level; },      // the heatmap level of the last render (-1: none)
    get readyMs() { return S.readyMs; },  // performance.now() when the first render completed
    setView: (t0, t1) => setView(t0, t1),
    levelFor: (t0, t1, widthPx) => levelFor(t0, t1, widthPx),
    cell, verdictAt,
    // For tests: where (t, rank) is drawn in the heatmap canvases' pixels, and the color of
    // a value there (metric 'util' in %, 'power' in W).
    pixelFor(t, rank) {
      const p = S.panels.find((q) => q.kind === 'util');
      if (!p) return null;
      const x = Math.floor((t - S.view.t0) / (S.view.t1 - S.view.t0) * p.canvas.width);
      const H = p.canvas.height, N = S.m.world;
      if (N <= H) return {x, y: Math.floor((Math.round(rank * H / N) + Math.round((rank + 1) * H / N)) / 2)};
      let y = Math.floor(rank * H / N);  // the pixel row whose ranks [y*N/H, (y+1)*N/H) hold rank
      while (y + 1 < H && Math.floor((y + 1) * N / H) <= rank) y++;
      while (y > 0 && Math.floor(y * N / H) > rank) y--;
      return {x, y};
    },
    colorOf(metric, value) {
      if (value === null) return [...MISSING_RGB];
      const top = metric === 'power' ? S.m.powerMax : 100;
      return [...VIRIDIS[Math.round(clamp(value / top, 0, 1) * 255)]];
    },
  };
  window.evenkeel = api;

  // ---- layout --------------------------------------------------------------------------

  function heatHeight(N) {
    const fit = clamp(Math.round(window.innerHeight * 0.42), 180, 640);
    const maxH = S.tall ? Math.min(8192, Math.max(N, fit)) : fit;
    if (N <= maxH) {
      const rowPx = Math.max(1, Math.min(12, Math.floor(maxH / N)));
      return {h: N * rowPx, rowPx};
    }
    return {h: maxH, rowPx: 0};
  }

  function build() {
    const m = S.m, stack = $('ek-stack');
    for (const u of S.plots) u.destroy();
    S.plots = [];
    S.panels = [];
    stack.textContent = '';
    const W = Math.max(320, stack.clientWidth);
    const plotW = W - GUTTER - RIGHT, dpr = window.devicePixelRatio || 1;
    const lane = (kind, caption, h) => {
      const box = el('div', 'ek-panel ek-' + kind);
      if (caption !== null) box.appendChild(el('div', 'ek-cap', caption));
      const row = el('div', 'ek-row');
      row.style.height = h + 'px';
      const gutter = el('canvas', 'ek-gutter'), canvas = el('canvas', 'ek-plot');
      canvas.id = 'ek-' + kind + '-canvas';
      for (const [c, w] of [[gutter, GUTTER], [canvas, plotW]]) {
        c.width = Math.round(w * dpr);
        c.height = Math.round(h * dpr);
        c.style.width = w + 'px';
        c.style.height = h + 'px';
      }
      canvas.style.left = GUTTER + 'px';
      row.append(gutter, canvas);
      box.appendChild(row);
      stack.appendChild(box);
      const p = {kind, box, caption: box.querySelector('.ek-cap'), gutter, canvas, dpr, h,
        ctx: canvas.getContext('2d', {willReadFrequently: true}), gctx: gutter.getContext('2d')};
      S.panels.push(p);
      listen(canvas, p);
      return p;
    };
    lane('ruler', null, 22);
    if (m.attempts.length || m.checkpoints.length) lane('attempts', 'attempts and checkpoints', 18);
    if (m.bands.length) lane('band', 'triage verdict', 16);
    if (m.levels.length && m.world) {
      const {h, rowPx} = heatHeight(m.world);
      for (const kind of ['util', 'power']) lane(kind, '', h).rowPx = rowPx;
    }
    for (const s of m.series) {
      const box = el('div', 'ek-panel ek-series');
      box.appendChild(el('div', 'ek-cap', s.title));
      const host = el('div', 'ek-uplot');
      box.appendChild(host);
      stack.appendChild(box);
      const u = new uPlot(plotOpts(s, W), [s.x, s.y], host);
      u.ekSeries = s;
      S.plots.push(u);
      listen(u.over, {kind: 'series', u, s});
    }
    if (m.series.length && m.levels.length) lane('ruler', null, 22).bottom = true;
    const ov = el('canvas', 'ek-overlay');
    ov.width = Math.round(W * dpr);
    ov.height = Math.round(stack.scrollHeight * dpr);
    ov.style.width = W + 'px';
    ov.style.height = stack.scrollHeight + 'px';
    stack.appendChild(ov);
    S.overlay = {canvas: ov, ctx: ov.getContext('2d'), dpr, W};
    S.plotW = plotW;
    if (!m.series.length && !m.levels.length && !m.bands.length) {
      stack.insertBefore(el('p', 'ek-empty', 'Nothing to draw over time: see the notes above.'), stack.firstChild);
    }
  }

  function plotOpts(s, W) {
    return {
      width: W, height: 96, padding: [6, RIGHT, 4, 0],
      legend: {show: false}, cursor: {show: false, drag: {x: false, y: false}}, select: {show: false},
      scales: {x: {time: false, auto: false, range: () => [S.view.t0, S.view.t1]}},
      axes: [{show: false},
        {size: GUTTER, gap: 3, font: '11px system-ui, sans-serif', stroke: '#333',
          grid: {stroke: '#eee', width: 1}, ticks: {stroke: '#ccc', size: 4},
          values: (u, splits) => splits.map(fmtSI)}],
      series: [{}, {stroke: s.color, width: 1.25, points: {show: false}, spanGaps: false}],
      hooks: {drawClear: [(u) => shadeAttempts(u)]},
    };
  }

  function shadeAttempts(u) {
    const ctx = u.ctx, {top, height} = u.bbox;
    ctx.save();
    for (const a of S.m.attempts) {
      const x0 = u.valToPos(a.start, 'x', true), x1 = u.valToPos(a.end ?? S.m.t1, 'x', true);
      ctx.fillStyle = OUTCOME_COLORS[a.outcome] || '#999999';
      ctx.globalAlpha = 0.1;
      const l = Math.max(u.bbox.left, x0), r = Math.min(u.bbox.left + u.bbox.width, x1);
      if (r > l) ctx.fillRect(l, top, r - l, height);
    }
    ctx.restore();
  }

  // ---- drawing -------------------------------------------------------------------------

  function render() {
    const m = S.m;
    const li = levelFor(S.view.t0, S.view.t1, S.plotW * (window.devicePixelRatio || 1));
    S.level = li;
    for (const p of S.panels) {
      if (p.kind === 'ruler') drawRuler(p);
      else if (p.kind === 'attempts') drawAttempts(p);
      else if (p.kind === 'band') drawBand(p);
      else if (p.kind === 'util' || p.kind === 'power') drawHeat(p, li);
    }
    for (const u of S.plots) u.setScale('x', {min: S.view.t0, max: S.view.t1});
    drawOverlay();
    const span = S.view.t1 - S.view.t0;
    $('ek-range').textContent = `${fmtTime(S.view.t0, true)} – ${fmtTime(S.view.t1, true)} UTC (${fmtDur(span)})` +
      (li >= 0 ? ` · level ${li} of ${m.levels.length}, ${fmtDur(m.levels[li].dt)} cells` : '');
    // uPlot redraws in a microtask queued by setScale; count the render after it.
    queueMicrotask(() => {
      S.renders++;
      if (S.renders === 1) {
        S.readyMs = performance.now();
        resolveReady(api);
      }
    });
  }

  // Per pixel column x of a canvas W wide: the half-open range of cells [a[x], b[x]) of a
  // grid (cols, t0, dt) that overlap the column's time span.
  function columns(G, W) {
    const a = new Int32Array(W), b = new Int32Array(W);
    const s = (S.view.t1 - S.view.t0) / W;
    for (let x = 0; x < W; x++) {
      const ta = S.view.t0 + x * s;
      a[x] = Math.max(0, Math.floor((ta - G.t0) / G.dt));
      b[x] = Math.min(G.cols, Math.ceil((ta + s - G.t0) / G.dt));
    }
    return {a, b};
  }

  function drawHeat(p, li) {
    const m = S.m, L = m.levels[li], W = p.canvas.width, H = p.canvas.height, N = m.world;
    const util = p.kind === 'util';
    const grid = util ? (S.max ? L.umax : L.umin) : (S.max ? L.pmax : L.pmin);
    const lut = LUT[p.kind], max = S.max, cols = L.cols;
    const {a, b} = columns(L, W);
    const img = p.ctx.createImageData(W, H), px = new Uint32Array(img.data.buffer);
    const vals = new Uint8Array(W), acc = new Uint8Array(W);
    // One rank's value per pixel column: min (or max) over its cells, 255 if none.
    const reduce = (r) => {
      const base = r * cols;
      for (let x = 0; x < W; x++) {
        let v = max ? -1 : 255;
        for (let c = base + a[x], e = base + b[x]; c < e; c++) {
          const q = grid[c];
          if (max) { if (q !== 255 && q > v) v = q; } else if (q < v) v = q;
        }
        vals[x] = v < 0 ? 255 : v;
      }
    };
    const paint = (src, y0, y1) => {
      for (let x = 0; x < W; x++) {
        const c = lut[src[x]];
        for (let y = y0; y < y1; y++) px[y * W + x] = c;
      }
    };
    if (N <= H) {
      for (let r = 0; r < N; r++) {
        reduce(r);
        paint(vals, Math.round(r * H / N), Math.round((r + 1) * H / N));
      }
    } else {
      // Fold ranks into pixel rows the same way (min or max), ignoring missing cells.
      for (let y = 0; y < H; y++) {
        const r0 = Math.floor(y * N / H), r1 = Math.floor((y + 1) * N / H);
        acc.fill(255);
        for (let r = r0; r < r1; r++) {
          reduce(r);
          for (let x = 0; x < W; x++) {
            const v = vals[x], c = acc[x];
            if (max) { if (v !== 255 && (c === 255 || v > c)) acc[x] = v; } else if (v < c) acc[x] = v;
          }
        }
        paint(acc, y, y + 1);
      }
    }
    p.ctx.putImageData(img, 0, 0);
    const what = util ? 'GPU utilization (%)' : `board power (W, scale 0-${m.powerMax})`;
    const fold = N > H ? `, ${(N / H).toFixed(1)} ranks per pixel row` : '';
    p.caption.textContent = `${what} · ${max ? 'max' : 'min'} per pixel${fold}`;
    if (!p.gutterDone) {
      drawRankGutter(p);
      p.gutterDone = true;
    }
  }

  // Host labels in the gutter of a heatmap, thinned so that labels never overlap; GPU
  // numbers too when a rank has room for them.
  function drawRankGutter(p) {
    const g = p.gctx, dpr = p.dpr, N = S.m.world, H = p.canvas.height, ranks = S.m.ranks;
    const rowTop = (r) => Math.round(r * H / N), Wg = GUTTER * dpr;
    g.clearRect(0, 0, p.gutter.width, p.gutter.height);
    g.font = `${10 * dpr}px system-ui, sans-serif`;
    g.textBaseline = 'top';
    g.fillStyle = '#333';
    g.strokeStyle = '#888';
    g.lineWidth = dpr;
    const starts = [];  // first rank of each host
    for (let r = 0; r < N; r++) {
      if (!r || (ranks[r] || {}).host !== (ranks[r - 1] || {}).host) starts.push(r);
    }
    const perRank = H / N >= 9 * dpr, roomy = H / Math.max(1, starts.length) >= 6 * dpr;
    let lastY = -1e9;
    g.beginPath();
    for (const r of starts) {
      const y = rowTop(r), labelled = y - lastY >= 14 * dpr;
      if (roomy || labelled) {
        g.moveTo(roomy ? 0 : Wg - 6 * dpr, y + 0.5);
        g.lineTo(Wg, y + 0.5);
      }
      if (labelled) {
        const label = String((ranks[r] || {}).host ?? 'rank ' + r);
        g.textAlign = 'left';
        g.fillText(label.length > 10 ? label.slice(0, 9) + '…' : label, 2 * dpr, y + 1);
        lastY = y;
      }
    }
    g.stroke();
    if (perRank) {
      g.textAlign = 'right';
      for (let r = 0; r < N; r++) g.fillText(String((ranks[r] || {}).gpu ?? r), Wg - 4 * dpr, rowTop(r) + 1);
    }
  }

  function drawBand(p) {
    const m = S.m, W = p.canvas.width, H = p.canvas.height;
    const bi = levelFor(S.view.t0, S.view.t1, W, m.bands);
    const B = m.bands[bi], {a, b} = columns(B, W);
    const img = p.ctx.createImageData(W, H), px = new Uint32Array(img.data.buffer);
    const none = pack(NO_VERDICT_RGB);
    for (let x = 0; x < W; x++) {
      let best = -1, bestSev = 1e9;
      for (let c = a[x]; c < b[x]; c++) {
        const v = B.values[c];
        if (v < m.names.length && m.sev[v] < bestSev) { best = v; bestSev = m.sev[v]; }
      }
      const color = best < 0 ? none : m.colors[best];
      for (let y = 0; y < H; y++) px[y * W + x] = color;
    }
    p.ctx.putImageData(img, 0, 0);
  }

  const xOf = (t, W) => (t - S.view.t0) / (S.view.t1 - S.view.t0) * W;

  function drawAttempts(p) {
    const ctx = p.ctx, W = p.canvas.width, H = p.canvas.height, dpr = p.dpr;
    ctx.clearRect(0, 0, W, H);
    ctx.font = `${10 * dpr}px system-ui, sans-serif`;
    ctx.textBaseline = 'middle';
    for (const at of S.m.attempts) {
      const x0 = clamp(xOf(at.start, W), 0, W), x1 = clamp(xOf(at.end ?? S.m.t1, W), 0, W);
      if (x1 <= x0) continue;
      ctx.globalAlpha = 0.55;
      ctx.fillStyle = OUTCOME_COLORS[at.outcome] || '#999999';
      ctx.fillRect(x0, 2 * dpr, x1 - x0, H - 4 * dpr);
      ctx.globalAlpha = 1;
      const label = `attempt ${at.attempt} · ${at.outcome || '?'}`;
      if (ctx.measureText(label).width + 8 * dpr < x1 - x0) {
        ctx.fillStyle = '#000';
        ctx.textAlign = 'left';
        ctx.fillText(label, x0 + 4 * dpr, H / 2);
      }
    }
    for (const c of S.m.checkpoints) {
      const x = xOf(c.time, W);
      if (x < -5 || x > W + 5) continue;
      ctx.fillStyle = c.ok === false ? '#D55E00' : '#56B4E9';
      ctx.strokeStyle = '#000';
      ctx.lineWidth = dpr;
      ctx.beginPath();
      ctx.moveTo(x - 4 * dpr, 1);
      ctx.lineTo(x + 4 * dpr, 1);
      ctx.lineTo(x, H - 2);
      ctx.closePath();
      ctx.fill();
      ctx.stroke();
    }
  }

  function tickStep(span, W) {
    const want = span * 110 / W;
    for (const s of TICKS) if (s >= want) return s;
    return Math.ceil(want / 604800) * 604800;
  }

  function drawRuler(p) {
    const ctx = p.ctx, W = p.canvas.width, H = p.canvas.height, dpr = p.dpr;
    const span = S.view.t1 - S.view.t0, step = tickStep(span, W / dpr);
    ctx.clearRect(0, 0, W, H);
    ctx.font = `${11 * dpr}px system-ui, sans-serif`;
    ctx.fillStyle = '#333';
    ctx.strokeStyle = '#999';
    ctx.textAlign = 'center';
    ctx.textBaseline = p.bottom ? 'bottom' : 'top';
    ctx.beginPath();
    for (let t = Math.ceil(S.view.t0 / step) * step; t <= S.view.t1; t += step) {
      const x = Math.round(xOf(t, W)) + 0.5;
      ctx.moveTo(x, p.bottom ? 0 : H);
      ctx.lineTo(x, p.bottom ? 5 * dpr : H - 5 * dpr);
      const label = fmtTime(t, false, step);
      const w = ctx.measureText(label).width / 2;
      ctx.fillText(label, clamp(x, w, W - w), p.bottom ? H : 2 * dpr);
    }
    ctx.stroke();
    const g = p.gctx;
    g.clearRect(0, 0, p.gutter.width, p.gutter.height);
    g.font = ctx.font;
    g.fillStyle = '#666';
    g.textBaseline = ctx.textBaseline;
    g.fillText('UTC', 2 * dpr, p.bottom ? H : 2 * dpr);
  }

  // Lines across every panel: checkpoints, attempt starts and ends, the hover cursor.
  function drawOverlay() {
    const o = S.overlay;
    if (!o) return;
    const {ctx, dpr} = o, W = S.plotW * dpr, left = GUTTER * dpr, H = o.canvas.height;
    ctx.clearRect(0, 0, o.canvas.width, H);
    const line = (t, color, dash, width = 1) => {
      const x = xOf(t, W);
      if (x < 0 || x > W) return;
      ctx.strokeStyle = color;
      ctx.lineWidth = width * dpr;
      ctx.setLineDash(dash.map((d) => d * dpr));
      ctx.beginPath();
      ctx.moveTo(left + Math.round(x) + 0.5, 0);
      ctx.lineTo(left + Math.round(x) + 0.5, H);
      ctx.stroke();
    };
    for (const a of S.m.attempts) {
      const c = OUTCOME_COLORS[a.outcome] || '#999999';
      line(a.start, c, [6, 3]);
      if (a.end !== null && a.end !== undefined) line(a.end, c, [6, 3]);
    }
    for (const c of S.m.checkpoints) line(c.time, c.ok === false ? '#D55E00' : '#56B4E9', c.ok === false ? [3, 2] : []);
    if (S.hover !== null) line(S.hover, 'rgba(0,0,0,0.55)', [], 1);
    ctx.setLineDash([]);
  }

  // ---- interaction ---------------------------------------------------------------------

  function zoomAround(t, frac, k) {
    const span = (S.view.t1 - S.view.t0) * k;
    setView(t - frac * span, t - frac * span + span, false);
  }

  function listen(target, p) {
    target.addEventListener('wheel', (e) => {
      e.preventDefault();
      const r = target.getBoundingClientRect(), f = clamp((e.clientX - r.left) / r.width, 0, 1);
      const unit = e.deltaMode === 1 ? 40 : e.deltaMode === 2 ? 800 : 1;
      const k = Math.exp(clamp(e.deltaY * unit, -600, 600) * 0.0015);
      zoomAround(S.view.t0 + f * (S.view.t1 - S.view.t0), f, k);
    }, {passive: false});
    target.addEventListener('pointerdown', (e) => {
      if (e.button !== 0) return;
      S.drag = {x: e.clientX, view: {...S.view}, w: target.getBoundingClientRect().width};
      target.setPointerCapture(e.pointerId);
      target.classList.add('ek-dragging');
    });
    target.addEventListener('pointermove', (e) => {
      if (S.drag) {
        const d = (e.clientX - S.drag.x) / S.drag.w * (S.drag.view.t1 - S.drag.view.t0);
        setView(S.drag.view.t0 - d, S.drag.view.t1 - d, false);
        hideTip();
        return;
      }
      hover(e, target, p);
    });
    const end = () => { S.drag = null; target.classList.remove('ek-dragging'); };
    target.addEventListener('pointerup', end);
    target.addEventListener('pointercancel', end);
    target.addEventListener('pointerleave', () => { if (!S.drag) hideTip(); });
  }

  function hideTip() {
    $('ek-tip').hidden = true;
    if (S.hover !== null) { S.hover = null; drawOverlay(); }
  }

  function showTip(e, lines) {
    const tip = $('ek-tip');
    tip.textContent = '';
    lines.forEach((l, i) => tip.appendChild(el('div', i ? '' : 'ek-tip-head', l)));
    tip.hidden = false;
    const w = tip.offsetWidth, h = tip.offsetHeight;
    tip.style.left = (e.clientX + 14 + w > window.innerWidth ? e.clientX - 14 - w : e.clientX + 14) + 'px';
    tip.style.top = Math.max(0, e.clientY + 14 + h > window.innerHeight ? e.clientY - 14 - h : e.clientY + 14) + 'px';
  }

  function hover(e, target, p) {
    const r = target.getBoundingClientRect();
    const fx = (e.clientX - r.left) / r.width, fy = (e.clientY - r.top) / r.height;
    const t = S.view.t0 + fx * (S.view.t1 - S.view.t0);
    S.hover = t;
    drawOverlay();
    const lines = tipLines(p, t, fx, fy);
    if (lines) showTip(e, lines);
    else $('ek-tip').hidden = true;
  }

  function tipLines(p, t, fx, fy) {
    const m = S.m;
    if (p.kind === 'util' || p.kind === 'power') return heatTip(p, fx, fy);
    if (p.kind === 'band') {
      const seg = m.segments.find((s) => s.t0 <= t && t < s.t1);
      const v = verdictAt(t);
      if (!seg && !v) return null;
      return [seg ? seg.verdict : v, fmtTime(t, true) + ' UTC',
        ...(seg ? [`${fmtTime(seg.t0, false)} – ${fmtTime(seg.t1, false)} (${fmtDur(seg.t1 - seg.t0)})`,
          'ranks: ' + fmtRanks(seg.ranks), seg.reason || ''] : [])].filter(Boolean);
    }
    if (p.kind === 'attempts') {
      const W = p.canvas.width, x = fx * W;
      const c = m.checkpoints.find((q) => Math.abs(xOf(q.time, W) - x) <= 5 * p.dpr);
      if (c) {
        return [`checkpoint step ${fmtInt(c.step)} (${c.ok === false ? 'NOT OK' : 'ok'})`,
          fmtTime(c.time, true) + ' UTC', c.path || '', c.verdict && c.verdict !== 'ok' ? c.verdict : ''].filter(Boolean);
      }
      const a = m.attempts.find((q) => q.start <= t && t < (q.end ?? m.t1));
      if (!a) return null;
      return [`attempt ${a.attempt} · ${a.outcome || '?'}`,
        `${fmtTime(a.start, true)} – ${a.end != null ? fmtTime(a.end, false) : 'still running'} UTC`,
        a.decision ? 'decision: ' + fmtDecision(a) : '', a.reason || '', ...fmtCauses(a),
        a.flight_recorder ? 'flight recorder: ' + a.flight_recorder : ''].filter(Boolean);
    }
    if (p.kind === 'series') {
      const x = p.s.x;
      let lo = 0, hi = x.length - 1;
      while (lo < hi) { const mid = (lo + hi) >> 1; if (x[mid] < t) lo = mid + 1; else hi = mid; }
      if (lo > 0 && Math.abs(x[lo - 1] - t) < Math.abs(x[lo] - t)) lo--;
      const px = (S.view.t1 - S.view.t0) / S.plotW;
      if (Math.abs(x[lo] - t) > 20 * px) return [p.s.title + ': no point here', fmtTime(t, true) + ' UTC'];
      const y = p.s.y[lo];
      return [`${p.s.title} ${p.s.key === 'loss' ? (y === null ? '—' : y.toFixed(4)) : fmtInt(y)}`,
        fmtTime(x[lo], true) + ' UTC'];
    }
    return null;
  }

  // The cells under a heatmap pixel: the rank of its row (of the folded ranks, the one
  // holding the value drawn), the pixel column's cells at the drawn level, their readings.
  function heatTip(p, fx, fy) {
    const m = S.m, W = p.canvas.width, H = p.canvas.height, N = m.world;
    const li = levelFor(S.view.t0, S.view.t1, W), L = m.levels[li];
    const x = clamp(Math.floor(fx * W), 0, W - 1), y = clamp(Math.floor(fy * H), 0, H - 1);
    const s = (S.view.t1 - S.view.t0) / W, ta = S.view.t0 + x * s;
    const a = Math.max(0, Math.floor((ta - L.t0) / L.dt)), b = Math.min(L.cols, Math.ceil((ta + s - L.t0) / L.dt));
    if (b <= a) return null;
    let r0, r1;
    if (N <= H) { r0 = Math.min(N - 1, Math.floor(y * N / H)); r1 = r0 + 1; }
    else { r0 = Math.floor(y * N / H); r1 = Math.max(r0 + 1, Math.floor((y + 1) * N / H)); }
    const util = p.kind === 'util';
    const stats = (r) => {
      const k = r * L.cols, pick = (arr, lo) => {
        let v = lo ? 255 : -1;
        for (let c = a; c < b; c++) { const q = arr[k + c]; if (q !== 255 && (lo ? q < v : q > v)) v = q; }
        return v === 255 || v < 0 ? null : v;
      };
      return {umin: pick(L.umin, true), umax: pick(L.umax, false), pmin: pick(L.pmin, true), pmax: pick(L.pmax, false)};
    };
    // Of a folded row, the rank holding the drawn extreme.
    let rank = r0, st = stats(r0);
    for (let r = r0 + 1; r < r1; r++) {
      const q = stats(r), key = S.max ? (util ? 'umax' : 'pmax') : (util ? 'umin' : 'pmin');
      const better = q[key] !== null && (st[key] === null || (S.max ? q[key] > st[key] : q[key] < st[key]));
      if (better) { rank = r; st = q; }
    }
    const info = m.ranks[rank] || {}, w = (v) => (v === null ? '—' : Math.round(v * m.powerMax / 254));
    const range = (lo, hi, f, unit) => (lo === null && hi === null ? 'no reading'
      : lo === hi ? `${f(lo)} ${unit}` : `${f(lo)}–${f(hi)} ${unit}`);
    const c0 = L.t0 + a * L.dt, c1 = L.t0 + b * L.dt;
    const v = verdictAt((c0 + c1) / 2);
    return [
      `${info.host ?? '?'} · GPU ${info.gpu ?? '?'} · rank ${rank}`,
      `${fmtTime(c0, true, L.dt)} – ${fmtTime(c1, false, L.dt)} UTC`,
      `util ${range(st.umin, st.umax, (q) => (q === null ? '—' : q), '%')} (min–max)`,
      `power ${range(st.pmin, st.pmax, w, 'W')} (min–max)`,
      ...(r1 - r0 > 1 ? [`pixel row: ranks ${r0}-${r1 - 1}; shown: the ${S.max ? 'highest' : 'lowest'}`] : []),
      ...(v ? ['verdict ' + v] : []),
      `level ${li}: ${b - a} cell${b - a > 1 ? 's' : ''} of ${fmtDur(L.dt)}`,
    ];
  }

  function keys(e) {
    if (e.target && /INPUT|TEXTAREA|SELECT/.test(e.target.tagName)) return;
    const mid = (S.view.t0 + S.view.t1) / 2, span = S.view.t1 - S.view.t0;
    if (e.key === '+' || e.key === '=') zoomAround(mid, 0.5, 0.5);
    else if (e.key === '-' || e.key === '_') zoomAround(mid, 0.5, 2);
    else if (e.key === '0') setView(S.m.t0, S.m.t1);
    else if (e.key === 'ArrowLeft') setView(S.view.t0 - span / 10, S.view.t1 - span / 10, false);
    else if (e.key === 'ArrowRight') setView(S.view.t0 + span / 10, S.view.t1 + span / 10, false);
    else return;
    e.preventDefault();
  }

  // ---- header, legend, tables ----------------------------------------------------------

  // summary.json's goodput (docs/launch.md "Goodput"): the ratio, then a bar of the
  // wall time's parts, each segment as wide as its share and titled with its seconds.
  const GOODPUT_PARTS = [
    ['training', (g) => g.training_s], ['redone', (g) => g.redone_s],
    ['detection', (g) => g.restart_s?.detection], ['stopping', (g) => g.restart_s?.stopping],
    ['rendezvous', (g) => g.restart_s?.rendezvous], ['startup', (g) => g.restart_s?.startup],
    ['save_blocked', (g) => g.save_blocked_s], ['other', (g) => g.other_s],
  ];
  function goodputRow(g) {
    const pair = el('div', 'ek-goodput');
    const dd = el('dd', '', `${(100 * g.ratio).toFixed(1)}% of ${fmtDur(g.wall_s)}`);
    const bar = el('span', 'ek-goodput-bar');
    bar.id = 'ek-goodput';
    for (const [part, get] of GOODPUT_PARTS) {
      const v = Number(get(g)) || 0;
      if (v <= 0) continue;
      const seg = el('span', 'ek-gp ek-gp-' + part);
      seg.dataset.part = part;
      seg.dataset.seconds = String(v);
      seg.style.width = (100 * v / g.wall_s).toFixed(3) + '%';
      seg.title = `${part.replace('_', ' ')}: ${fmtDur(v)} (${(100 * v / g.wall_s).toFixed(1)}%)`;
      bar.appendChild(seg);
    }
    dd.appendChild(bar);
    pair.append(el('dt', '', 'goodput'), dd);
    return pair;
  }

  function header() {
    const m = S.m, d = m.data, run = d.run || {}, s = d.summary || {};
    $('ek-title').textContent = run.name ? `${run.name} · evenkeel run report` : 'evenkeel run report';
    document.title = $('ek-title').textContent;
    const dl = $('ek-summary');
    dl.textContent = '';
    const add = (k, v, cls) => {
      if (v === undefined || v === null || v === '') return;
      const pair = el('div');
      pair.append(el('dt', '', k), el('dd', cls || '', String(v)));
      dl.appendChild(pair);
    };
    add('outcome', s.outcome, 'ek-outcome ek-outcome-' + String(s.outcome || '').replace(/[^a-z_]/gi, ''));
    if (run.world) add('world', `${run.world} GPUs` + (run.nodes ? ` (${run.nodes} nodes × ${run.gpus_per_node ?? '?'})` : ''));
    if (s.steps !== undefined) add('steps', fmtInt(s.steps) + (s.planned_steps !== undefined ? ' / ' + fmtInt(s.planned_steps) : ''));
    if (s.tokens !== undefined) add('tokens', fmtSI(s.tokens));
    if (s.tokens_per_s !== undefined) add('tokens/s', fmtSI(s.tokens_per_s));
    add('attempts', s.attempts);
    if (s.gpu_hours_used !== undefined) add('GPU-hours used', s.gpu_hours_used.toLocaleString('en-US'));
    if (s.gpu_hours_lost !== undefined) add('GPU-hours lost', s.gpu_hours_lost.toLocaleString('en-US'));
    if (s.goodput && s.goodput.wall_s > 0) dl.appendChild(goodputRow(s.goodput));
    add('evenfix dropped blocks', s.evenfix_dropped_blocks);
    add('final checkpoint', s.final_checkpoint);
    if (d.time) add('time', `${fmtTime(m.t0, true)} – ${fmtTime(m.t1, true)} UTC (${fmtDur(m.t1 - m.t0)})`);
    add('run file', run.run_file ? run.run_file + (run.xxh3 ? ` (xxh3 ${run.xxh3})` : '') : undefined);
    add('generated', [d.generated, d.evenkeel_version ? 'evenkeel ' + d.evenkeel_version : ''].filter(Boolean).join(' · '));
    const notes = $('ek-notes');
    notes.textContent = '';
    const all = [...(Array.isArray(d.notes) ? d.notes : []).map(String), ...m.problems.map((p) => 'page: ' + p)];
    for (const n of all) notes.appendChild(el('li', '', n));
    notes.hidden = !all.length;
  }

  function legend() {
    const box = $('ek-legend'), m = S.m;
    box.textContent = '';
    const scale = (title, top, ticks, unit) => {
      const wrap = el('div', 'ek-scale');
      wrap.appendChild(el('span', 'ek-scale-title', title));
      const c = el('canvas');
      c.width = 256;
      c.height = 12;
      const ctx = c.getContext('2d'), img = ctx.createImageData(256, 12);
      for (let x = 0; x < 256; x++) {
        const [r, g, b] = VIRIDIS[x];
        for (let y = 0; y < 12; y++) img.data.set([r, g, b, 255], (y * 256 + x) * 4);
      }
      ctx.putImageData(img, 0, 0);
      const bar = el('span', 'ek-scale-bar');
      bar.appendChild(c);
      const lab = el('span', 'ek-scale-ticks');
      for (const t of ticks) {
        const s = el('span', '', t + unit);
        s.style.left = (t / top * 100) + '%';
        lab.appendChild(s);
      }
      bar.appendChild(lab);
      wrap.appendChild(bar);
      const miss = el('span', 'ek-chip');
      miss.style.setProperty('--c', `rgb(${MISSING_RGB})`);
      miss.textContent = 'no reading';
      wrap.appendChild(miss);
      box.appendChild(wrap);
    };
    if (m.levels.length) {
      scale('utilization', 100, [0, 25, 50, 75, 100], ' %');
      const top = m.powerMax, step = top >= 1000 ? 500 : top >= 400 ? 100 : 50;
      const ticks = [];
      for (let t = 0; t <= top + 1e-9; t += step) ticks.push(t);
      scale('power', top, ticks, ' W');
    }
    const chips = (title, pairs) => {
      if (!pairs.length) return;
      const row = el('div', 'ek-chips');
      row.appendChild(el('span', 'ek-scale-title', title));
      for (const [name, color] of pairs) {
        const c = el('span', 'ek-chip', name);
        c.style.setProperty('--c', color);
        row.appendChild(c);
      }
      box.appendChild(row);
    };
    if (m.bands.length) chips('verdict', m.names.map((n) => [n, (m.data.verdicts.colors || {})[n] || '#000']));
    const outcomes = [...new Set(m.attempts.map((a) => a.outcome))];
    chips('attempt', outcomes.map((o) => [o, OUTCOME_COLORS[o] || '#999999']));
    if (m.checkpoints.length) chips('checkpoint', [['verified', '#56B4E9'], ['not ok', '#D55E00']]);
  }

  // "stop · exit 93": the launch's exit code where the decision ended it (done, stop).
  function fmtDecision(a) {
    if (!a.decision) return '';
    return a.decision !== 'restart' && Number.isInteger(a.exit_code) ? `${a.decision} · exit ${a.exit_code}` : a.decision;
  }

  // One line per failed rank: "rank 1: OSError: ..."; absent causes (an older launcher) say so.
  function fmtCauses(a) {
    if (!Array.isArray(a.causes)) return a.outcome && a.outcome !== 'completed' ? ['causes: not recorded'] : [];
    return a.causes.map((c) => `rank ${c.rank}: ${c.cause}`);
  }

  function table(title, cols, rows, onClick) {
    const sec = el('section', 'ek-table');
    sec.appendChild(el('h2', '', `${title} (${rows.length})`));
    if (!rows.length) {
      sec.appendChild(el('p', 'ek-none', 'none'));
      return sec;
    }
    const t = el('table'), head = el('tr');
    for (const c of cols) head.appendChild(el('th', c.num ? 'ek-num' : '', c.title));
    t.appendChild(el('thead')).appendChild(head);
    const body = t.appendChild(el('tbody'));
    for (const r of rows) {
      const tr = el('tr');
      for (const c of cols) {
        tr.appendChild(el('td', c.num ? 'ek-num' : c.lines ? 'ek-wide ek-lines' : c.wide ? 'ek-wide' : '', String(c.get(r))));
      }
      if (onClick) {
        tr.tabIndex = 0;
        tr.classList.add('ek-click');
        tr.addEventListener('click', () => onClick(r));
      }
      body.appendChild(tr);
    }
    sec.appendChild(t);
    return sec;
  }

  function tables() {
    const m = S.m, box = $('ek-tables');
    box.textContent = '';
    const focus = (a, b) => {
      const pad = Math.max((b - a) * 0.25, m.finestDt * 20);
      setView(a - pad, b + pad);
      $('ek-stack').scrollIntoView({block: 'start'});
    };
    const inc = [...m.incidents].sort((a, b) => (a.since ?? 0) - (b.since ?? 0));
    const t = table('Incidents', [
      {title: 'source', get: (r) => r.source ?? ''},
      {title: 'kind', get: (r) => r.kind ?? ''},
      {wide: true, title: 'summary', get: (r) => r.summary ?? ''},
      {title: 'ranks', get: (r) => fmtRanks(r.ranks)},
      {wide: true, title: 'hosts', get: (r) => fmtList(r.hosts)},
      {title: 'since', get: (r) => fmtTime(r.since, true)},
      {title: 'until', get: (r) => (r.until == null ? 'ongoing' : fmtTime(r.until, false))},
      {lines: true, title: 'evidence', get: (r) => r.evidence ?? ''},
      {title: 'GPU-hours at stake', num: true, get: (r) => (Number.isFinite(r.gpu_hours) ? r.gpu_hours.toLocaleString('en-US') : '—')},
    ], inc, (r) => focus(r.since, r.until ?? m.t1));
    t.id = 'ek-incidents';
    box.appendChild(t);
    if (m.attempts.length) {
      box.appendChild(table('Attempts', [
        {title: 'attempt', num: true, get: (r) => r.attempt ?? ''},
        {title: 'start', get: (r) => fmtTime(r.start, true)},
        {title: 'end', get: (r) => (r.end == null ? 'running' : fmtTime(r.end, true))},
        {title: 'outcome', get: (r) => r.outcome ?? ''},
        {title: 'decision', get: (r) => fmtDecision(r)},
        {lines: true, title: 'causes', get: (r) => fmtCauses(r).join('\n')},
        {wide: true, title: 'reason', get: (r) => r.reason ?? ''},
        {wide: true, title: 'flight recorder', get: (r) => r.flight_recorder ?? ''},
      ], m.attempts, (r) => focus(r.start, r.end ?? m.t1)));
    }
    if (m.checkpoints.length) {
      box.appendChild(table('Checkpoints', [
        {title: 'step', num: true, get: (r) => fmtInt(r.step)},
        {title: 'time', get: (r) => fmtTime(r.time, true)},
        {title: 'ok', get: (r) => (r.ok === false ? 'NO' : 'yes')},
        {wide: true, title: 'verdict', get: (r) => r.verdict ?? ''},
        {wide: true, title: 'path', get: (r) => r.path ?? ''},
      ], m.checkpoints, (r) => focus(r.time - 60, r.time + 60)));
    }
  }

  // ---- start, live updates -------------------------------------------------------------

  function load(data, keepView) {
    const old = S.m && !isFull() ? {...S.view} : null;
    S.m = prepare(data);
    header();
    legend();
    tables();
    build();
    if (keepView && old) setView(old.t0, old.t1);
    else setView(S.m.t0, S.m.t1);
  }

  function status(text, bad) {
    const s = $('ek-status');
    s.textContent = text;
    s.classList.toggle('ek-bad', !!bad);
  }

  function live() {
    const poll = () => Math.max(0.2, Number(S.m.data.poll_s) || 5) * 1000;
    const tick = async () => {
      const started = performance.now();
      try {
        const r = await fetch('data.json' + location.search, {cache: 'no-store'});  // ?token= kept
        if (!r.ok) throw new Error('HTTP ' + r.status);
        load(await r.json(), true);
        status(`live · updated ${fmtTime(Date.now() / 1000, false)} UTC · every ${poll() / 1000} s`);
      } catch (e) {
        status(`live · update failed at ${fmtTime(Date.now() / 1000, false)} UTC: ${e.message}; retrying`, true);
      }
      if (S.m.data.live) setTimeout(tick, Math.max(0, poll() - (performance.now() - started)));
      else status('live · the run has ended; this is the final report');
    };
    status(`live · every ${poll() / 1000} s`);
    setTimeout(tick, poll());
  }

  function start() {
    try {
      const node = $('ek-data');
      if (!node) throw new Error('no data model in the page (script#ek-data)');
      const data = JSON.parse(node.textContent);
      if (data.format_version !== 1) {
        throw new Error(`data model format_version ${data.format_version}; this page reads 1`);
      }
      load(data, false);
      $('ek-reset').addEventListener('click', () => setView(S.m.t0, S.m.t1));
      $('ek-zoom-in').addEventListener('click', () => keys({key: '+', preventDefault() {}}));
      $('ek-zoom-out').addEventListener('click', () => keys({key: '-', preventDefault() {}}));
      $('ek-max').addEventListener('change', (e) => { S.max = e.target.checked; render(); });
      $('ek-tall').addEventListener('change', (e) => { S.tall = e.target.checked; build(); render(); });
      document.addEventListener('keydown', keys);
      let resizing = 0;
      window.addEventListener('resize', () => {
        clearTimeout(resizing);
        resizing = setTimeout(() => { build(); render(); }, 120);
      });
      if (data.live && location.protocol === 'file:') {
        status('live data model opened from a file: not polling (open it from evenkeel watch --http)');
      } else if (data.live) {
        live();
      }
    } catch (e) {
      status('The report could not be drawn: ' + e.message, true);
      console.error(e);
      rejectReady(e);
    }
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
  else start();
})();
