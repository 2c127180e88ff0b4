// kvlens dashboard: feeds the live charts (charts.js) from the websocket's
// JSON frames, and draws the baseline overlay.
// HTML frames (the tiles) are swapped in by htmx's ws extension.
(function () {
  "use strict";
  const body = document.body;
  const { colours, fmt, chartHeight, legend } = window.kvlens;
  const charts = window.kvlens.timeCharts();

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
      width: Math.max(baseEl.clientWidth, 260), height: baseHeight(), legend,
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
  // The side column holds the baseline chart, its sentence and notes, and
  // the workers panel, beside two rows of time charts: the chart gets what
  // the notes and panel leave of that height (the notes take about 130 px,
  // the panel its own height), and at least 100 px.
  function baseHeight() {
    if (window.innerWidth < 1200) return chartHeight();
    const panel = document.querySelector(".workers-panel");
    return Math.round(Math.max(100, Math.min(chartHeight(), 2 * chartHeight() + 160 - 130 - (panel ? panel.offsetHeight : 150) - 90)));
  }
  fieldSel.addEventListener("change", () => { if (basePlot) { basePlot.destroy(); basePlot = null; } drawBaseline(); });
  window.addEventListener("resize", () => basePlot && basePlot.setSize({ width: Math.max(baseEl.clientWidth, 260), height: baseHeight() }));
  drawBaseline();

  body.addEventListener("htmx:wsBeforeMessage", (e) => {
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
    if (f.type === "history") charts.setMarks(f.marks);
    else charts.addMarks(f.marks);
    charts.addPoints(f.points || [], f.type === "history");
    if (f.live) { live = f.live; drawBaseline(); }
  });

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

// Fragments pushed to every browser are rendered as for a viewer; on an
// operator's page their operator-only buttons are enabled again. The server
// refuses them to anyone else whatever the page shows.
(function () {
  "use strict";
  const body = document.body;
  const enable = () => {
    if (body.dataset.operator !== "true") return;
    for (const b of document.querySelectorAll('[data-operator-only="true"]')) b.disabled = false;
  };
  body.addEventListener("htmx:wsAfterMessage", enable);
  body.addEventListener("htmx:afterSwap", enable);
})();
