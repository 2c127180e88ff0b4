// kvlens charts: the four time charts of the live dashboard, shared with the
// recordings' replay page so that both draw the same figures the same way.
// Each page feeds them rows (one per second: {t, lanes: [web.Point, …]}, or
// a single web.Point for one lane) and marks (web.Mark).
(function () {
  "use strict";
  const body = document.body;
  const slo = { ttft: Number(body.dataset.sloTtft) || 600, tpot: Number(body.dataset.sloTpot) || 60 };
  const windowSecs = 600;

  const colours = { p50: "#4fc3f7", p95: "#ffb74d", slo: "#ef5350", tops: "#81c784", rps: "#ce93d8", err: "#ef5350" };
  // Each lane of the A/B view has one colour everywhere: charts, tiles,
  // headline. A is amber, B cyan.
  const laneColours = ["#ffb74d", "#4fc3f7", "#81c784", "#ce93d8"];
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
  // The time axis says the time of day on one row: uPlot's own adds a date
  // row whose labels overlap when the minute turns.
  const clock = (t) => new Date(t * 1000).toLocaleTimeString("en-GB", { hour12: false });
  const axis = (label) => [
    { stroke: "#ccc", grid: { stroke: "#333" }, space: 70, values: (u, ts) => ts.map(clock) },
    { stroke: "#ccc", grid: { stroke: "#333" }, label },
  ];

  // lanesOf is a row's points, one per lane.
  const lanesOf = (row) => row.lanes || [row];

  // timeCharts draws the TTFT, TPOT, throughput and errors charts into the
  // elements with those ids, and returns how to feed them.
  function timeCharts() {
    let marks = []; // {t, kind, label}: concurrency changes, mode switches
    let rows = []; // what the charts show, oldest first
    let lanes = 0; // lanes the charts are built for
    let charts = [];

    // marksPlugin draws every mark as a labelled vertical line, so a recording
    // shows cause (a slider move, a mode switch) next to effect.
    const marksPlugin = {
      hooks: {
        draw: (u) => {
          const ctx = u.ctx;
          const [x0, x1] = [u.scales.x.min, u.scales.x.max];
          ctx.save();
          ctx.font = `${12 * devicePixelRatio}px system-ui, sans-serif`;
          ctx.textAlign = "left"; // uPlot leaves the y axis's alignment set
          ctx.textBaseline = "alphabetic";
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

    // specs are each chart's element id, unit, SLO (a dashed line) and
    // series: label, colour, point field and dash. One lane draws p50 and
    // p95 in two colours; several draw each lane in its colour, p95 solid
    // and p50 dashed, and the page's lane legend names them.
    function specs(n) {
      if (n <= 1) {
        return [
          { id: "ttft-chart", unit: "ms", slo: slo.ttft, series: [["p50", colours.p50, "ttft_p50"], ["p95", colours.p95, "ttft_p95"]] },
          { id: "tpot-chart", unit: "ms", slo: slo.tpot, series: [["p50", colours.p50, "tpot_p50"], ["p95", colours.p95, "tpot_p95"]] },
          { id: "tops-chart", unit: "tok/s", series: [["output tok/s", colours.tops, "tops"]] },
          { id: "errors-chart", unit: "", series: [["error %", colours.err, "error_pct"], ["shed /s", colours.rps, "shed_per_sec"]] },
        ];
      }
      const per = (fields) => {
        const out = [];
        for (let i = 0; i < n; i++) {
          const id = String.fromCharCode(65 + i);
          for (const [label, field, dash] of fields) out.push([`${id} ${label}`, laneColours[i % laneColours.length], field, dash, i]);
        }
        return out;
      };
      return [
        { id: "ttft-chart", unit: "ms", slo: slo.ttft, series: per([["p95", "ttft_p95"], ["p50", "ttft_p50", [6, 4]]]) },
        { id: "tpot-chart", unit: "ms", slo: slo.tpot, series: per([["p95", "tpot_p95"], ["p50", "tpot_p50", [6, 4]]]) },
        { id: "tops-chart", unit: "tok/s", series: per([["output tok/s", "tops"]]) },
        { id: "errors-chart", unit: "", series: per([["error %", "error_pct"], ["shed /s", "shed_per_sec", [2, 4]]]) },
      ];
    }

    function build(n) {
      for (const c of charts) c.plot.destroy();
      lanes = n;
      charts = specs(n).map((sp) => {
        const el = document.getElementById(sp.id);
        const series = [{}].concat(sp.series.map(([label, stroke, , dash]) => ({ label, stroke, width: dash ? 1.5 : 2, dash, points: n > 1 ? { show: false } : undefined, value: fmt(sp.unit ? " " + sp.unit : "", sp.unit ? 0 : 1) })));
        if (sp.slo) series.push({ label: "SLO " + sp.slo + " " + sp.unit, stroke: colours.slo, width: 2, dash: [8, 6], points: { show: false } });
        // Several lanes' charts have no legend row (the lanes are named
        // above the tiles): they take its height.
        const size = () => ({ width: Math.max(el.clientWidth, 260), height: chartHeight() + (n > 1 && window.innerWidth >= 900 ? 22 : 0) });
        const yRange = sp.slo ? (u, min, max) => [0, Math.max(max || 0, sp.slo) * 1.15] : (u, min, max) => [0, Math.max(max || 0, 1) * 1.15];
        // The x axis spans at least a minute, so the first seconds are not
        // spread across the chart with sub-second ticks; with no data yet it
        // is the last minute, not 1970's first.
        const xRange = (u, min, max) => {
          if (max == null) { const now = Date.now() / 1000; return [now - 60, now]; }
          return [Math.min(min, max - 60), max];
        };
        const plot = new uPlot({ ...size(), legend: n > 1 ? { show: false } : legend, plugins: [marksPlugin], scales: { x: { time: true, range: xRange }, y: { range: yRange } }, axes: axis(sp.unit), series }, series.map(() => []), el);
        el.dataset.lanes = String(n);
        return { sp, el, plot, size };
      });
    }

    function draw() {
      for (const { sp, el, plot } of charts) {
        const data = [rows.map((r) => r.t)];
        for (const [, , field, , lane] of sp.series) data.push(rows.map((r) => { const p = lanesOf(r)[lane || 0]; return p ? p[field] : null; }));
        if (sp.slo) data.push(rows.map(() => sp.slo));
        plot.setData(data);
        // Tests and people read what is drawn: the points and the last time.
        el.dataset.points = String(rows.length);
        el.dataset.lastT = rows.length ? String(rows[rows.length - 1].t) : "";
      }
    }

    const resize = () => charts.forEach((c) => c.plot.setSize(c.size()));
    window.addEventListener("resize", resize);
    // A banner appearing in the header moves the board down: fit again.
    const header = document.querySelector("header");
    if (header && window.ResizeObserver) new ResizeObserver(resize).observe(header);
    build(1);

    return {
      // setLanes rebuilds the charts for n lanes when that changes.
      setLanes(n) {
        if (n !== lanes) { build(n); draw(); }
      },
      // addPoints appends rows (or replaces the charts' rows with them),
      // keeping the last 10 minutes.
      addPoints(more, replace) {
        rows = replace ? [] : rows;
        for (const r of more) {
          // Two ticks in one second (a late one, then one on time): the
          // later replaces the earlier, so the x axis never repeats.
          if (rows.length && rows[rows.length - 1].t >= r.t) rows[rows.length - 1] = r;
          else rows.push(r);
        }
        if (rows.length > windowSecs) rows = rows.slice(rows.length - windowSecs);
        draw();
      },
      // setMarks replaces the marks; addMarks appends to them.
      setMarks(ms) { marks = ms || []; },
      addMarks(ms) { if (ms) marks = marks.concat(ms); },
    };
  }

  // rowsOf turns a chart frame (web.Frame) into rows, one per second, each
  // with every lane's point of that second.
  function rowsOf(f) {
    const more = f.lanes || [];
    if (!more.length) return f.points || [];
    const byT = new Map();
    (f.points || []).forEach((p) => byT.set(p.t, { t: p.t, lanes: [p] }));
    more.forEach((l, i) => (l.points || []).forEach((p) => {
      const r = byT.get(p.t);
      if (r) r.lanes[i + 1] = p;
    }));
    return [...byT.values()];
  }

  window.kvlens = { slo, colours, laneColours, fmt, chartHeight, legend, windowSecs, timeCharts, rowsOf };
})();
