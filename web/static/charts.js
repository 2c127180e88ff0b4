// kvlens charts: the four time charts of the live dashboard, shared with the
// recordings' replay page so that both draw the same figures the same way.
// Each page feeds them points (web.Point as JSON) and marks (web.Mark).
(function () {
  "use strict";
  const body = document.body;
  const slo = { ttft: Number(body.dataset.sloTtft) || 600, tpot: Number(body.dataset.sloTpot) || 60 };
  const windowSecs = 600;

  const colours = { p50: "#4fc3f7", p95: "#ffb74d", slo: "#ef5350", tops: "#81c784", rps: "#ce93d8", err: "#ef5350" };
  const fmt = (unit, digits) => (u, v) => (v == null ? "—" : v.toFixed(digits) + unit);

  // Two rows of charts share the height left under the tiles, so that the
  // board fits the screen whatever banners sit above it; phones get a fixed
  // height. Each chart's caption, axis and legend take about 80 px beside the
  // plot; chartReserve more keeps the side column's notes on screen.
  const chartReserve = 130;
  const chartHeight = () => {
    if (window.innerWidth < 900) return 180;
    const board = document.querySelector(".board");
    const top = board ? board.getBoundingClientRect().top + window.scrollY : 400;
    return Math.round(Math.max(120, Math.min(280, (window.innerHeight - top - chartReserve) / 2 - 80)));
  };
  // Legends name the series only: a live legend shows the value under the
  // cursor, and without a cursor it is a row of dashes.
  const legend = { live: false };
  const axis = (label) => [{ stroke: "#ccc", grid: { stroke: "#333" } }, { stroke: "#ccc", grid: { stroke: "#333" }, label }];

  // timeCharts draws the TTFT, TPOT, throughput and errors charts into the
  // elements with those ids, and returns how to feed them.
  function timeCharts() {
    let marks = []; // {t, kind, label}: concurrency changes, mode switches

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
      const plot = new uPlot({ ...size(), legend, plugins: [marksPlugin], scales: { x: { time: true }, y: { range: yRange } }, axes: axis(sp.unit), series }, data, el);
      window.addEventListener("resize", () => plot.setSize(size()));
      // A banner appearing in the header moves the board down: fit again.
      const header = document.querySelector("header");
      if (header && window.ResizeObserver) new ResizeObserver(() => plot.setSize(size())).observe(header);
      return { sp, el, plot, data };
    });

    return {
      // addPoints appends points (or replaces the charts' points with them),
      // keeping the last 10 minutes.
      addPoints(points, replace) {
        for (const { sp, el, plot, data } of charts) {
          if (replace) data.forEach((a) => (a.length = 0));
          for (const p of points) {
            data[0].push(p.t);
            sp.series.forEach(([, , field], i) => data[i + 1].push(p[field]));
            if (sp.slo) data[data.length - 1].push(sp.slo);
          }
          const cut = data[0].length - windowSecs;
          if (cut > 0) data.forEach((a) => a.splice(0, cut));
          plot.setData(data);
          // Tests and people read what is drawn: the points and the last time.
          el.dataset.points = String(data[0].length);
          el.dataset.lastT = data[0].length ? String(data[0][data[0].length - 1]) : "";
        }
      },
      // setMarks replaces the marks; addMarks appends to them.
      setMarks(ms) { marks = ms || []; },
      addMarks(ms) { if (ms) marks = marks.concat(ms); },
    };
  }

  window.kvlens = { slo, colours, fmt, chartHeight, legend, windowSecs, timeCharts };
})();
