// kvlens dashboard: draws the live charts from the websocket's JSON frames.
// HTML frames (the tiles) are swapped in by htmx's ws extension.
(function () {
  "use strict";
  const body = document.body;
  const slo = { ttft: Number(body.dataset.sloTtft) || 600, tpot: Number(body.dataset.sloTpot) || 60 };
  const windowSecs = 600;
  let lastFrame = 0;
  let marks = []; // {t, kind, label}: concurrency changes, mode switches

  const colours = { p50: "#4fc3f7", p95: "#ffb74d", slo: "#ef5350", tops: "#81c784", rps: "#ce93d8", err: "#ef5350" };
  const fmt = (unit, digits) => (u, v) => (v == null ? "—" : v.toFixed(digits) + unit);

  // marksPlugin draws every mark as a labelled vertical line, so a recording
  // shows cause (a slider move, a mode switch) next to effect.
  const marksPlugin = {
    hooks: {
      draw: (u) => {
        const ctx = u.ctx;
        const [x0, x1] = [u.scales.x.min, u.scales.x.max];
        ctx.save();
        ctx.font = `${12 * devicePixelRatio}px system-ui, sans-serif`;
        let lastX = -1e9, row = 0;
        for (const m of marks) {
          if (m.t < x0 || m.t > x1) continue;
          const x = Math.round(u.valToPos(m.t, "x", true));
          // Labels of marks close together go on successive lines.
          row = x - lastX < 90 * devicePixelRatio ? (row + 1) % 4 : 0;
          lastX = x;
          ctx.strokeStyle = m.kind === "mode" ? "#4fc3f7" : m.kind === "reset" ? "#ffb74d" : "#bbbbbb";
          ctx.setLineDash([4 * devicePixelRatio, 4 * devicePixelRatio]);
          ctx.beginPath();
          ctx.moveTo(x, u.bbox.top);
          ctx.lineTo(x, u.bbox.top + u.bbox.height);
          ctx.stroke();
          ctx.fillStyle = ctx.strokeStyle;
          ctx.fillText(m.label, x + 4 * devicePixelRatio, u.bbox.top + (14 + 14 * row) * devicePixelRatio);
        }
        ctx.restore();
      },
    },
  };

  // Charts share the height left on a 1080p projector; phones get a fixed one.
  const chartHeight = () => (window.innerWidth < 900 ? 180 : Math.max(140, Math.min(230, (window.innerHeight - 520) / 2)));
  const axis = (label) => [{ stroke: "#ccc", grid: { stroke: "#333" } }, { stroke: "#ccc", grid: { stroke: "#333" }, label }];

  // Each chart: element id, unit, series (label, colour, point field), and an
  // SLO to draw as a dashed line.
  const specs = [
    { id: "ttft-chart", unit: "ms", slo: slo.ttft, series: [["p50", colours.p50, "ttft_p50"], ["p95", colours.p95, "ttft_p95"]] },
    { id: "tpot-chart", unit: "ms", slo: slo.tpot, series: [["p50", colours.p50, "tpot_p50"], ["p95", colours.p95, "tpot_p95"]] },
    { id: "tops-chart", unit: "tok/s", series: [["output tok/s", colours.tops, "tops"]] },
    { id: "errors-chart", unit: "", series: [["error %", colours.err, "error_pct"], ["shed /s", colours.rps, "shed_per_sec"]] },
  ];
  const charts = specs.map((sp) => {
    const el = document.getElementById(sp.id);
    const series = [{}].concat(sp.series.map(([label, stroke]) => ({ label, stroke, width: 2, value: fmt(sp.unit ? " " + sp.unit : "", sp.unit ? 0 : 1) })));
    if (sp.slo) series.push({ label: "SLO " + sp.slo + " " + sp.unit, stroke: colours.slo, width: 2, dash: [8, 6], points: { show: false } });
    const data = series.map(() => []);
    const size = () => ({ width: Math.max(el.clientWidth, 260), height: chartHeight() });
    const yRange = sp.slo ? (u, min, max) => [0, Math.max(max || 0, sp.slo) * 1.15] : (u, min, max) => [0, Math.max(max || 0, 1) * 1.15];
    const plot = new uPlot({ ...size(), plugins: [marksPlugin], scales: { x: { time: true }, y: { range: yRange } }, axes: axis(sp.unit), series }, data, el);
    window.addEventListener("resize", () => plot.setSize(size()));
    return { sp, plot, data };
  });

  function addPoints(points, replace) {
    for (const { sp, plot, data } of charts) {
      if (replace) data.forEach((a) => (a.length = 0));
      for (const p of points) {
        data[0].push(p.t);
        sp.series.forEach(([, , field], i) => data[i + 1].push(p[field]));
        if (sp.slo) data[data.length - 1].push(sp.slo);
      }
      const cut = data[0].length - windowSecs;
      if (cut > 0) data.forEach((a) => a.splice(0, cut));
      plot.setData(data);
    }
  }

  // The baseline overlay: stored round-robin and KV curves by concurrency,
  // the SLO, and the live point where the running system sits now.
  const base = JSON.parse(document.getElementById("baseline-data").textContent || "{}");
  const baseEl = document.getElementById("baseline-chart");
  const fieldSel = document.getElementById("baseline-field");
  let live = null; // {c, compare, values}
  let basePlot = null;
  function drawBaseline() {
    const field = fieldSel.value;
    const curves = base.curves || {};
    const xs = new Set();
    for (const m of ["round_robin", "kv"]) for (const l of curves[m] || []) xs.add(l.c);
    const lv = live && live.values[field] != null ? live : null;
    if (lv) xs.add(lv.c);
    const x = [...xs].sort((a, b) => a - b);
    const at = (m) => x.map((c) => { const l = (curves[m] || []).find((l) => l.c === c); return l && l[field] != null ? l[field] : null; });
    const slo = field.startsWith("ttft") ? base.slo_ttft_ms : field.startsWith("tpot") ? base.slo_tpot_ms : null;
    const unit = field === "tops" ? "tok/s" : "ms";
    const data = [x, at("round_robin"), at("kv"), x.map((c) => (lv && c === lv.c ? lv.values[field] : null))];
    const series = [
      {},
      { label: "round-robin (stored)", stroke: "#ffb74d", width: 3, spanGaps: true, value: fmt(" " + unit, 0) },
      { label: "KV-aware (stored)", stroke: "#4fc3f7", width: 3, spanGaps: true, value: fmt(" " + unit, 0) },
      { label: "live", stroke: "#ffffff", width: 0, paths: () => null, points: { show: true, size: 16, fill: "#ffffff", stroke: "#000" }, value: fmt(" " + unit, 0) },
    ];
    if (slo) {
      data.push(x.map(() => slo));
      series.push({ label: "SLO", stroke: colours.slo, width: 2, dash: [8, 6], points: { show: false } });
    }
    baseEl.dataset.curves = ["round_robin", "kv"].filter((m) => (curves[m] || []).some((l) => l[field] != null)).join(",");
    baseEl.dataset.liveX = lv ? String(lv.c) : "";
    baseEl.dataset.liveY = lv ? String(lv.values[field]) : "";
    const opts = {
      width: Math.max(baseEl.clientWidth, 260), height: chartHeight(),
      scales: { x: { time: false }, y: { range: (u, min, max) => [0, Math.max(max || 0, slo || 0, 1) * 1.15] } },
      axes: [{ stroke: "#ccc", grid: { stroke: "#333" }, label: "conversations" }, { stroke: "#ccc", grid: { stroke: "#333" }, label: unit }],
      series,
    };
    if (basePlot && basePlot.series.length === series.length) basePlot.setData(data);
    else {
      if (basePlot) basePlot.destroy();
      basePlot = new uPlot(opts, data, baseEl);
    }
  }
  fieldSel.addEventListener("change", () => { if (basePlot) { basePlot.destroy(); basePlot = null; } drawBaseline(); });
  window.addEventListener("resize", () => basePlot && basePlot.setSize({ width: Math.max(baseEl.clientWidth, 260), height: chartHeight() }));
  drawBaseline();

  body.addEventListener("htmx:wsBeforeMessage", (e) => {
    lastFrame = Date.now();
    const msg = e.detail.message;
    if (typeof msg !== "string" || msg[0] !== "{") return; // HTML: htmx swaps it
    e.preventDefault();
    const f = JSON.parse(msg);
    document.getElementById("mode-name").textContent = f.mode_text;
    // Another operator may have switched: keep this page's switch in step.
    const sw = document.getElementById("mode-switch");
    if (sw && sw.dataset.active !== f.mode) {
      sw.dataset.active = f.mode;
      sw.querySelectorAll("button[data-testid^=mode-]").forEach((b) => {
        const on = b.dataset.testid === "mode-" + f.mode;
        b.classList.toggle("active", on);
        b.setAttribute("aria-pressed", String(on));
      });
      const more = sw.querySelector("select");
      if (more) more.value = [...more.options].some((o) => o.value === f.mode) ? f.mode : "";
    }
    document.title = "kvlens · " + f.mode_text;
    if (f.type === "history") marks = f.marks || [];
    else if (f.marks) marks = marks.concat(f.marks);
    addPoints(f.points || [], f.type === "history");
    if (f.live) { live = f.live; drawBaseline(); }
  });

  // A banner says so when no frame has come for 3 s; htmx reconnects with backoff.
  const stale = document.getElementById("stale");
  setInterval(() => {
    stale.hidden = lastFrame !== 0 && Date.now() - lastFrame < 3000;
  }, 1000);

  // Controls answer a refused value with a one-line reason.
  const notice = document.getElementById("notice");
  body.addEventListener("htmx:responseError", (e) => {
    notice.textContent = e.detail.xhr.responseText.trim();
  });
  body.addEventListener("htmx:afterRequest", (e) => {
    // A success clears an old refusal, unless its answer is the notice itself.
    if (e.detail.successful && e.detail.target !== notice) notice.textContent = "";
  });
})();
