// kvlens dashboard: feeds the live charts (charts.js) from the websocket's
// JSON frames, and draws the baseline overlay.
// HTML frames (the tiles) are swapped in by htmx's ws extension.
(function () {
  "use strict";
  const body = document.body;
  const { colours, laneColours, fmt, chartHeight, legend, rowsOf } = window.kvlens;
  const charts = window.kvlens.timeCharts();

  // The baseline overlay: stored round-robin and KV curves by concurrency,
  // the SLO, and a point per lane where the running system sits now.
  const base = JSON.parse(document.getElementById("baseline-data").textContent || "{}");
  const baseEl = document.getElementById("baseline-chart");
  const fieldSel = document.getElementById("baseline-field");
  let live = []; // per lane: {c, compare, values, name}
  let basePlot = null;
  let clipped = []; // points above the y axis's cap: {x, y, colour}

  // clipPlugin draws each point the y axis cuts off as an arrow at the top
  // with its value, so that one outlier does not squash every other curve.
  const clipPlugin = {
    hooks: {
      draw: (u) => {
        const ctx = u.ctx, r = devicePixelRatio;
        ctx.save();
        ctx.font = `${12 * r}px system-ui, sans-serif`;
        ctx.textAlign = "left"; // uPlot leaves the y axis's alignment set
        ctx.textBaseline = "alphabetic";
        const placed = []; // x of the labels drawn: a near one goes below
        for (const c of [...clipped].sort((a, b) => a.x - b.x)) {
          const x = u.valToPos(c.x, "x", true);
          const row = placed.filter((px) => Math.abs(px - x) < 90 * r).length;
          placed.push(x);
          const y = u.bbox.top + 2 * r + 14 * r * row;
          ctx.fillStyle = c.colour;
          ctx.beginPath();
          ctx.moveTo(x, y);
          ctx.lineTo(x - 6 * r, y + 9 * r);
          ctx.lineTo(x + 6 * r, y + 9 * r);
          ctx.closePath();
          ctx.fill();
          const text = Math.round(c.y).toLocaleString("en-US") + " " + c.unit;
          const w = ctx.measureText(text).width;
          ctx.fillText(text, Math.min(x + 9 * r, u.bbox.left + u.bbox.width - w), y + 10 * r);
        }
        ctx.restore();
      },
    },
  };

  function drawBaseline() {
    const field = fieldSel.value;
    const curves = base.curves || {};
    const names = base.names || {};
    const xs = new Set();
    for (const m of ["round_robin", "kv"]) for (const l of curves[m] || []) xs.add(l.c);
    const lv = live.map((l) => (l && l.values[field] != null ? l : null));
    for (const l of lv) if (l) xs.add(l.c);
    const x = [...xs].sort((a, b) => a - b);
    const slo = field.startsWith("ttft") ? base.slo_ttft_ms : field.startsWith("tpot") ? base.slo_tpot_ms : null;
    const unit = field === "tops" ? "tok/s" : "ms";
    // The y axis stops at twice the SLO: a point beyond is drawn as an arrow.
    const cap = slo ? 2 * slo : Infinity;
    clipped = [];
    const clip = (v, c, colour) => {
      if (v == null || v <= cap) return v;
      clipped.push({ x: c, y: v, unit, colour });
      return cap;
    };
    const at = (m, colour) => x.map((c) => { const l = (curves[m] || []).find((l) => l.c === c); return l && l[field] != null ? clip(l[field], c, colour) : null; });
    const data = [x, at("round_robin", "#ffb74d"), at("kv", "#4fc3f7")];
    const series = [
      {},
      { label: names.round_robin || "round-robin (stored)", stroke: "#ffb74d", width: 3, spanGaps: true, value: fmt(" " + unit, 0) },
      { label: names.kv || "KV-aware (stored)", stroke: "#4fc3f7", width: 3, spanGaps: true, value: fmt(" " + unit, 0) },
    ];
    lv.forEach((l, i) => {
      const many = lv.length > 1;
      const colour = many ? laneColours[i % laneColours.length] : "#ffffff";
      data.push(x.map((c) => (l && c === l.c ? clip(l.values[field], c, colour) : null)));
      const name = live[i] && live[i].name ? live[i].name : "";
      // Lanes are named, in their colours, above the tiles.
      const label = many ? `${String.fromCharCode(65 + i)} live` : name ? `live: ${name}` : "live";
      series.push({ label, stroke: colour, fill: colour, width: 0, paths: () => null,
        points: { show: true, size: 16, fill: colour, stroke: "#000" }, value: fmt(" " + unit, 0) });
    });
    if (slo) {
      data.push(x.map(() => slo));
      series.push({ label: "SLO", stroke: colours.slo, width: 2, dash: [8, 6], points: { show: false } });
    }
    baseEl.dataset.curves = ["round_robin", "kv"].filter((m) => (curves[m] || []).some((l) => l[field] != null)).join(",");
    baseEl.dataset.names = ["round_robin", "kv"].map((m) => names[m] || "").join("|");
    const first = lv.find((l) => l) || null;
    baseEl.dataset.liveX = first ? String(first.c) : "";
    baseEl.dataset.liveY = first ? String(first.values[field]) : "";
    baseEl.dataset.livePoints = String(lv.filter((l) => l).length);
    baseEl.dataset.clipped = clipped.map((c) => `${c.x}:${Math.round(c.y)}`).join(",");
    const top = (u, min, max) => [0, Math.max(Math.min(max || 0, cap), slo || 0, 1) * 1.15];
    const opts = {
      width: Math.max(baseEl.clientWidth, 260), height: baseHeight(), legend, plugins: [clipPlugin],
      scales: { x: { time: false }, y: { range: top } },
      axes: [{ stroke: "#ccc", grid: { stroke: "#333" }, label: "conversations" }, { stroke: "#ccc", grid: { stroke: "#333" }, label: unit }],
      series,
    };
    if (basePlot && basePlot.series.length === series.length && basePlot.series.every((s, i) => s.label === series[i].label)) basePlot.setData(data);
    else {
      if (basePlot) basePlot.destroy();
      basePlot = new uPlot(opts, data, baseEl);
    }
    fitBaseline();
  }
  // The side column holds the baseline chart, its sentence and notes, and
  // the workers panel: the chart gets what the rest leaves of the window's
  // height below the column's top, from 100 to 280 px. The rest (notes,
  // legend, workers) is measured as drawn, once the browser has laid it
  // out, so each frame corrects the last.
  function baseHeight() {
    if (window.innerWidth < 1200) return chartHeight();
    const side = document.querySelector(".side");
    const canvas = baseEl.querySelector("canvas");
    if (!side || !side.lastElementChild || !canvas) return chartHeight();
    // The column stretches to the charts' height: measure its content.
    const top = side.getBoundingClientRect().top;
    const rest = side.lastElementChild.getBoundingClientRect().bottom - top - canvas.getBoundingClientRect().height;
    return Math.round(Math.max(100, Math.min(280, window.innerHeight - 10 - top - rest)));
  }
  function fitBaseline() {
    requestAnimationFrame(() => {
      if (!basePlot) return;
      const w = Math.max(baseEl.clientWidth, 260), h = baseHeight();
      if (Math.abs(h - basePlot.height) > 2 || Math.abs(w - basePlot.width) > 2) basePlot.setSize({ width: w, height: h });
      baseEl.dataset.height = String(h);
    });
  }
  fieldSel.addEventListener("change", () => { if (basePlot) { basePlot.destroy(); basePlot = null; } drawBaseline(); });
  window.addEventListener("resize", fitBaseline);
  drawBaseline();

  // syncMode keeps this page's single-view switch in step with another
  // operator's choice.
  function syncMode(mode) {
    const sw = document.getElementById("mode-switch");
    if (!sw || sw.dataset.active === mode) return;
    sw.dataset.active = mode;
    sw.querySelectorAll("button[data-testid^=mode-]").forEach((b) => {
      const on = b.dataset.testid === "mode-" + mode;
      b.classList.toggle("active", on);
      b.setAttribute("aria-pressed", String(on));
    });
    const more = sw.querySelector("select");
    if (more) more.value = [...more.options].some((o) => o.value === mode) ? mode : "";
  }
  // syncPair does the same for the A/B view's selects, leaving alone one
  // the operator is using.
  function syncPair(pair) {
    pair.forEach((p, i) => {
      const sel = document.querySelector(`[data-testid=pair-${String.fromCharCode(97 + i)}]`);
      if (!sel || sel === document.activeElement || sel.value === p) return;
      sel.value = p;
      sel.dataset.active = p;
    });
  }

  body.addEventListener("htmx:wsBeforeMessage", (e) => {
    const msg = e.detail.message;
    if (typeof msg !== "string" || msg[0] !== "{") return; // HTML: htmx swaps it
    e.preventDefault();
    const f = JSON.parse(msg);
    const more = f.lanes || [];
    if (f.pair) {
      syncPair(f.pair);
      document.title = "kvlens · " + [...document.querySelectorAll("#pair-names strong")].map((s) => s.textContent).reverse().join(" vs ");
    } else {
      document.getElementById("mode-name").textContent = f.mode_text;
      syncMode(f.mode);
      document.title = "kvlens · " + f.mode_text;
    }
    charts.setLanes(1 + more.length);
    if (f.type === "history") charts.setMarks(f.marks);
    else charts.addMarks(f.marks);
    charts.addPoints(rowsOf(f), f.type === "history");
    if (f.live) {
      live = [{ ...f.live, name: f.name }].concat(more.map((l) => ({ ...l.live, name: l.name })));
      drawBaseline();
    }
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
