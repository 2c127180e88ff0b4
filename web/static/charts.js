// kvlens charts: the four time charts and the baseline overlay of the live
// dashboard, shared with the recordings' replay page so that both draw the
// same figures the same way.
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
  // board fits the screen; phones get a fixed height. Each chart's caption,
  // axis and legend take about 80 px beside the plot; chartReserve more
  // keeps the side column's notes on screen. The charts shrink to fit down
  // to 120 px: a 1920x960 window with the tour's caption and every banner
  // holds them so, though the reserve leaves fit at about 98 (the side
  // column, whose baseline chart does not squeeze as far, then runs below
  // the fold). A window shorter still (a 1366x768 laptop, fit below 0)
  // cannot hold the board, so the charts keep a readable 160 px and the
  // page scrolls, rather than squeezing the plots flat.
  const chartReserve = 130;
  const chartHeight = () => {
    if (window.innerWidth < 900) return 180;
    const board = document.querySelector(".board");
    const top = board ? board.getBoundingClientRect().top + window.scrollY : 400;
    const fit = (window.innerHeight - top - chartReserve) / 2 - 80;
    return Math.round(fit < 60 ? 160 : Math.max(120, Math.min(280, fit)));
  };
  // Legends name the series only: a live legend shows the value under the
  // cursor, and without a cursor it is a row of dashes.
  const legend = { live: false };
  // The time axis says the time of day on one row: uPlot's own adds a date
  // row whose labels overlap when the minute turns. Ticks on whole minutes
  // drop the seconds, and then may stand closer, 2 min apart too (uPlot's
  // steps go from 1 min to 5): a laptop's chart, a plot of about 290 px
  // holding ten minutes, showed two labels 5 min apart, or one
  // ("04:05:00") for five minutes at 1366 px, and now shows one every 2 min.
  const clock = (t) => new Date(t * 1000).toLocaleTimeString("en-GB", { hour12: false });
  const minutes = (t) => clock(t).slice(0, 5);
  const timeAxis = {
    stroke: "#ccc", grid: { stroke: "#333" },
    incrs: [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400],
    // The closer spacing only where it yields minute ticks, whose labels
    // are the shorter: seconds' labels (8 characters) need 70 px.
    space: (u, i, min, max, dim) => ((max - min) * 48 / Math.max(dim, 1) >= 60 ? 48 : 70),
    values: (u, ts, i, space, incr) => {
      const out = ts.map(incr % 60 === 0 ? minutes : clock);
      // For the browser tests: the labels drawn.
      u.root.dataset.xTicks = out.join(" ");
      return out;
    },
  };
  const axis = (label) => [timeAxis, { stroke: "#ccc", grid: { stroke: "#333" }, label }];

  // lanesOf is a row's points, one per lane.
  const lanesOf = (row) => row.lanes || [row];

  // timeCharts draws the TTFT, TPOT, throughput and errors charts into the
  // elements with those ids, and returns how to feed them.
  function timeCharts() {
    let marks = []; // {t, kind, label, lane}: concurrency changes, mode switches
    let rows = []; // what the charts show, oldest first
    let lanes = 0; // lanes the charts are built for
    let charts = [];
    let held = false; // the rows are kept but not drawn (hold)

    // markColour is a mark's colour: a lane's mark is drawn in the lane's
    // colour, so that "A: KV-aware" never reads as lane B's, and a reset in
    // pink, which no lane has.
    function markColour(m) {
      if (m.lane) return laneColours[m.lane.charCodeAt(0) - 97] || "#bbbbbb";
      if (m.kind === "mode") return "#4fc3f7";
      if (m.kind === "reset") return "#f06292";
      return "#bbbbbb";
    }

    // warmEnd is the time of the latest warm-up's end mark (s), 0 when none.
    const warmEnd = () => marks.reduce((t, m) => (m.kind === "warm" && m.t > t ? m.t : t), 0);

    // topSince is the highest value of u's first n series at or after time
    // from (s); null when none has a point there.
    function topSince(u, n, from) {
      let top = null;
      const ts = u.data[0];
      for (let i = 1; i <= n; i++) {
        const ys = u.data[i] || [];
        for (let j = ts.length - 1; j >= 0 && ts[j] >= from; j--) {
          if (ys[j] != null && (top == null || ys[j] > top)) top = ys[j];
        }
      }
      return top;
    }

    // marksPlugin draws every mark as a labelled vertical line, so a recording
    // shows cause (a slider move, a mode switch) next to effect, and shades
    // the warm-up the fleets played ahead of the clock.
    const marksPlugin = {
      hooks: {
        draw: (u) => {
          const ctx = u.ctx;
          const [x0, x1] = [u.scales.x.min, u.scales.x.max];
          ctx.save();
          const warm = warmEnd();
          if (warm > x0) {
            const right = Math.round(u.valToPos(Math.min(warm, x1), "x", true));
            ctx.fillStyle = "rgba(255, 255, 255, 0.05)";
            ctx.fillRect(u.bbox.left, u.bbox.top, right - u.bbox.left, u.bbox.height);
          }
          ctx.font = `${12 * devicePixelRatio}px system-ui, sans-serif`;
          ctx.textAlign = "left"; // uPlot leaves the y axis's alignment set
          ctx.textBaseline = "alphabetic";
          // Labels are placed newest first, each on the highest of four
          // rows where it overlaps no label already placed; one that finds
          // no room is left out (its line stays), never drawn over another.
          const r = devicePixelRatio;
          const rows = [[], [], [], []], gap = 4 * r, drawn = [], labels = [];
          for (const m of [...marks].reverse()) {
            if (m.t < x0 || m.t > x1) continue;
            const x = Math.round(u.valToPos(m.t, "x", true));
            ctx.strokeStyle = markColour(m);
            ctx.setLineDash([4 * r, 4 * r]);
            ctx.beginPath();
            ctx.moveTo(x, u.bbox.top);
            ctx.lineTo(x, u.bbox.top + u.bbox.height);
            ctx.stroke();
            // A label that would run past the plot's right edge goes on the
            // line's left instead.
            const w = ctx.measureText(m.label).width;
            const lx = x + gap + w > u.bbox.left + u.bbox.width ? Math.max(u.bbox.left + gap, x - gap - w) : x + gap;
            const row = rows.findIndex((spans) => spans.every(([a, b]) => lx + w + gap <= a || lx >= b + gap));
            if (row < 0) continue;
            rows[row].push([lx, lx + w]);
            const y = u.bbox.top + (14 + 14 * row) * r;
            drawn.push([row, Math.round(lx / r), Math.round((lx + w) / r), Math.round(y / r) - 11, Math.round(y / r) + 3]);
            labels.push({ text: m.label, colour: ctx.strokeStyle, lx, w, y });
          }
          // The labels go after every line, each on a plate of the panel's
          // colour: drawn straight on the plot, the data's lines, the SLO
          // and the other marks' lines ran through their letters, and at
          // 1280 px "→ 120" was cut by both lanes' p95. The plate lets the
          // lines under it show, dimmed.
          for (const l of labels) {
            ctx.fillStyle = "rgba(27, 33, 40, 0.8)";
            ctx.fillRect(l.lx - 2 * r, l.y - 11 * r, l.w + 4 * r, 14 * r);
            ctx.fillStyle = l.colour;
            ctx.fillText(l.text, l.lx, l.y);
          }
          // For the browser tests: each label's row, span and plate's top
          // and bottom, in CSS px, and the seconds the time axis spans.
          u.root.dataset.labels = JSON.stringify(drawn);
          u.root.dataset.xSpan = String(Math.round(x1 - x0));
          ctx.restore();
        },
      },
    };

    // settlingPlugin shades the seconds in which a lane's rate was not yet
    // comparable (web.Point's rates_settling: the server sends no rate
    // then) and writes "settling" in the band, as the tile does: the line's
    // break after a change's mark then reads as a window settling, not as
    // a fleet that stopped or a feed that dropped. u.settling holds one
    // flag per row drawn.
    const settlingPlugin = {
      hooks: {
        draw: (u) => {
          const flags = u.settling || [], ts = u.data[0] || [];
          const ctx = u.ctx, r = devicePixelRatio;
          const left = u.bbox.left, right = u.bbox.left + u.bbox.width;
          ctx.save();
          ctx.font = `italic ${12 * r}px system-ui, sans-serif`;
          ctx.textAlign = "left"; // uPlot leaves the y axis's alignment set
          ctx.textBaseline = "alphabetic";
          const bands = [];
          for (let i = 0; i < flags.length; i++) {
            if (!flags[i]) continue;
            let j = i;
            while (j + 1 < flags.length && flags[j + 1]) j++;
            // From the last second drawn before it, where the line breaks.
            const x0 = Math.max(left, Math.round(u.valToPos(ts[Math.max(i - 1, 0)], "x", true)));
            const x1 = Math.min(right, Math.round(u.valToPos(ts[j], "x", true)));
            if (x1 > x0) {
              ctx.fillStyle = "rgba(255, 255, 255, 0.05)";
              ctx.fillRect(x0, u.bbox.top, x1 - x0, u.bbox.height);
              // The word goes in the band; in the newest band, still too
              // narrow for it in the first seconds after a change, it ends
              // at the plot's right edge instead, over the line before.
              const w = ctx.measureText("settling").width;
              const fits = x1 - x0 >= w + 8 * r;
              if (fits || j === flags.length - 1) {
                ctx.fillStyle = "#a9b4bf";
                ctx.fillText("settling", fits ? x0 + 4 * r : right - w - 4 * r, u.bbox.top + u.bbox.height - 6 * r);
              }
              bands.push(Math.round(x0 / r) + ".." + Math.round(x1 / r));
            }
            i = j;
          }
          // For the browser tests: each band's left..right, in CSS px.
          u.root.dataset.settlingBands = bands.join(" ");
          ctx.restore();
        },
      },
    };

    // The errors chart draws two figures on one axis, each in its own unit:
    // the axis names both (it had no unit, and 0.4 read as nothing).
    const errorsAxis = "error % · shed /s";

    // specs are each chart's element id, unit, axis label when not the
    // unit, SLO (a dashed line) and
    // series: label, colour, point field and dash. One lane draws p50 and
    // p95 in two colours; several draw each lane in its colour, p95 solid
    // and p50 dashed, and the page's lane legend names them.
    function specs(n) {
      if (n <= 1) {
        return [
          { id: "ttft-chart", unit: "ms", slo: slo.ttft, series: [["p50", colours.p50, "ttft_p50"], ["p95", colours.p95, "ttft_p95"]] },
          { id: "tpot-chart", unit: "ms", slo: slo.tpot, series: [["p50", colours.p50, "tpot_p50"], ["p95", colours.p95, "tpot_p95"]] },
          { id: "tops-chart", unit: "tok/s", settling: "rates_settling", series: [["output tok/s", colours.tops, "tops"]] },
          { id: "errors-chart", unit: "", axis: errorsAxis, series: [["error %", colours.err, "error_pct"], ["shed /s", colours.rps, "shed_per_sec"]] },
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
        { id: "tops-chart", unit: "tok/s", settling: "rates_settling", series: per([["output tok/s", "tops"]]) },
        { id: "errors-chart", unit: "", axis: errorsAxis, series: per([["error %", "error_pct"], ["shed /s", "shed_per_sec", [2, 4]]]) },
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
        // The y axis is scaled on the points after the warm-up's end. The
        // warm-up's first minute is the cold start it exists to hide (every
        // conversation's first turn at once on empty caches, a TTFT p95 of
        // 1-1.5 s); scaled on it, the steady lines sat in the chart's bottom
        // fifth for the ten minutes the chart keeps. Its points are still
        // drawn, cut at the top, in the shaded band.
        const yRange = (u, min, max) => {
          const warm = warmEnd();
          const top = warm ? topSince(u, sp.series.length, warm) : null;
          return [0, Math.max((top != null ? top : max) || 0, sp.slo || 1) * 1.15];
        };
        // The x axis spans at least a minute, so the first seconds are not
        // spread across the chart with sub-second ticks; with no data yet it
        // is the last minute, not 1970's first. It is read from the points,
        // not from min and max: for a single point uPlot widens the range
        // to 1,000 days, whose ticks at midnight all read 00:00:00.
        const xRange = (u) => {
          const xs = u.data[0] || [];
          if (!xs.length) { const now = Date.now() / 1000; return [now - 60, now]; }
          const last = xs[xs.length - 1];
          return [Math.min(xs[0], last - 60), last];
        };
        const plot = new uPlot({ ...size(), legend: n > 1 ? { show: false } : legend, plugins: sp.settling ? [marksPlugin, settlingPlugin] : [marksPlugin], scales: { x: { time: true, range: xRange }, y: { range: yRange } }, axes: axis(sp.axis || sp.unit), series }, series.map(() => []), el);
        lastMinute(plot);
        el.dataset.lanes = String(n);
        return { sp, el, plot, size };
      });
    }

    // lastMinute shows the last minute on a chart without points: uPlot
    // does not range an axis without data, whose ticks then read 00:00:00
    // (a new chart, or one drawn again before its first point).
    function lastMinute(plot) {
      const now = Date.now() / 1000;
      plot.setScale("x", { min: now - 60, max: now });
    }

    function draw() {
      const shown = held ? [] : rows;
      for (const { sp, el, plot } of charts) {
        const data = [shown.map((r) => r.t)];
        for (const [, , field, , lane] of sp.series) data.push(shown.map((r) => { const p = lanesOf(r)[lane || 0]; return p ? p[field] : null; }));
        if (sp.slo) data.push(shown.map(() => sp.slo));
        // A second is settling when any lane's figure was (settlingPlugin).
        if (sp.settling) plot.settling = shown.map((r) => lanesOf(r).some((p) => p && p[sp.settling]));
        plot.setData(data);
        if (!shown.length) lastMinute(plot);
        el.classList.toggle("held", held);
        // Tests and people read what is drawn: the points and the last time.
        el.dataset.points = String(shown.length);
        el.dataset.lastT = shown.length ? String(shown[shown.length - 1].t) : "";
        // The last second's figure of each series, "" where none is drawn.
        el.dataset.last = data.slice(1, 1 + sp.series.length).map((ys) => (ys.length && ys[ys.length - 1] != null ? String(Math.round(ys[ys.length - 1])) : "")).join(",");
        el.dataset.yTop = String(Math.round(plot.scales.y.max || 0));
        el.dataset.peak = String(Math.round(Math.max(0, ...data.slice(1, 1 + sp.series.length).flat().filter((v) => v != null))));
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
      // hold keeps the rows from being drawn while on (a warm-up playing:
      // its points are the cold start it hides), and draws them all when
      // it goes off.
      hold(on) {
        if (!!on !== held) { held = !!on; draw(); }
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

  // baselineChart draws the baseline overlay into el: the stored
  // round-robin and KV curves by concurrency, each lane's policy's stored
  // simulated curve when the page has them, the SLO, and a point per lane
  // where the system sits, for the figure fieldSel picks. The live page and
  // the replay both draw it, so that both show the same chart.
  function baselineChart(baseEl, fieldSel) {
    let base = {}; // the stored set: web.baselineJSON
    let live = []; // per lane: {c, compare, values, name, mode}
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
            // Near the right edge the label goes on the arrow's left, not
            // under it.
            const right = x + 9 * r + w > u.bbox.left + u.bbox.width;
            ctx.fillText(text, right ? x - 9 * r - w : x + 9 * r, y + 10 * r);
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
      const lv = live.map((l) => (l && l.values && l.values[field] != null ? l : null));
      // Each lane's policy's stored simulated curve ("sim:" + its mode), in
      // the lane's colour, dashed: where its live point should sit.
      const sims = [];
      live.forEach((l, i) => {
        const key = l && l.mode ? "sim:" + l.mode : "";
        if (!curves[key] || sims.some((s) => s.key === key)) return;
        sims.push({ key, colour: live.length > 1 ? laneColours[i % laneColours.length] : "#e0e0e0" });
        for (const p of curves[key]) xs.add(p.c);
      });
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
      for (const sc of sims) {
        data.push(at(sc.key, sc.colour));
        series.push({ label: names[sc.key] || sc.key, stroke: sc.colour, width: 2, dash: [5, 5], spanGaps: true,
          points: { show: false }, value: fmt(" " + unit, 0) });
      }
      lv.forEach((l, i) => {
        const many = lv.length > 1;
        const colour = many ? laneColours[i % laneColours.length] : "#ffffff";
        data.push(x.map((c) => (l && c === l.c ? clip(l.values[field], c, colour) : null)));
        const name = live[i] && live[i].name ? live[i].name : "";
        // Lanes are named, in their colours, above the tiles. A lane whose
        // figure is not yet settled has no point (web.LivePoint): its
        // legend says so, as the tiles do, so that the missing point reads
        // as a window settling. Without the count ("12 s of 30"), which
        // would rebuild the chart every second.
        const waiting = !l && live[i] && live[i].settling && live[i].settling[field] ? " · settling" : "";
        const label = (many ? `${String.fromCharCode(65 + i)} live` : name ? `live: ${name}` : "live") + waiting;
        series.push({ label, stroke: colour, fill: colour, width: 0, paths: () => null,
          points: { show: true, size: 16, fill: colour, stroke: "#000" }, value: fmt(" " + unit, 0) });
      });
      if (slo) {
        data.push(x.map(() => slo));
        series.push({ label: "SLO", stroke: colours.slo, width: 2, dash: [8, 6], points: { show: false } });
      }
      baseEl.dataset.curves = ["round_robin", "kv"].filter((m) => (curves[m] || []).some((l) => l[field] != null)).join(",");
      baseEl.dataset.names = ["round_robin", "kv"].map((m) => names[m] || "").join("|");
      baseEl.dataset.simCurves = sims.map((sc) => names[sc.key] || sc.key).join("|");
      const first = lv.find((l) => l) || null;
      baseEl.dataset.liveX = first ? String(first.c) : "";
      baseEl.dataset.liveY = first ? String(first.values[field]) : "";
      baseEl.dataset.livePoints = String(lv.filter((l) => l).length);
      baseEl.dataset.liveSettling = String(live.filter((l, i) => !lv[i] && l && l.settling && l.settling[field]).length);
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
    // height below the column's top, up to 280 px, less the closed panels
    // under the board (Conversations, How it works), so that the whole page
    // fits a 1080p screen with no scrollbar. Before, it kept them out of
    // the sum, and the tour's bar or a fault's line pushed the page 27-29 px
    // past 1080. Its x axis, its label and the outlier's mark take about
    // 100 px of it, so when the page cannot fit with 150 (every banner at
    // once) the panels go below the fold and the board fits; on a window
    // too short for that too (a wide one of 820 px left a plot 25 px high,
    // its axis reading only "0") the chart keeps 220 and the column runs
    // below the fold, as the charts beside it do on a laptop. The rest
    // (notes, legend, workers) is measured as drawn, once the browser has
    // laid it out, so each frame corrects the last.
    function baseHeight() {
      if (window.innerWidth < 1200) return chartHeight();
      const side = document.querySelector(".side");
      const canvas = baseEl.querySelector("canvas");
      if (!side || !side.lastElementChild || !canvas) return chartHeight();
      // The column stretches to the charts' height: measure its content.
      // Its top is taken in the page, not the viewport, so that scrolling a
      // page too tall for the window does not resize the chart.
      const box = side.getBoundingClientRect();
      const rest = side.lastElementChild.getBoundingClientRect().bottom - box.top - canvas.getBoundingClientRect().height;
      const room = window.innerHeight - (box.top + window.scrollY) - rest;
      const page = room - below(side.closest(".board"));
      const board = room - 10;
      return Math.round(page >= 150 ? Math.min(280, page) : board >= 150 ? board : 220);
    }
    // below is the height the page takes under the board: the panels after
    // it and the page's bottom padding. An open panel counts as closed: its
    // reader scrolls to it, and the charts do not shrink for it.
    function below(board) {
      let h = parseFloat(getComputedStyle(document.body).paddingBottom) || 0;
      for (let e = board && board.nextElementSibling; e; e = e.nextElementSibling) {
        const cs = getComputedStyle(e);
        if (cs.display === "none" || cs.position === "absolute" || cs.position === "fixed") continue;
        let height = e.getBoundingClientRect().height;
        const summary = e.open && e.querySelector(":scope > summary");
        if (summary) {
          const px = (v) => parseFloat(v) || 0;
          height = summary.getBoundingClientRect().height + px(cs.paddingTop) + px(cs.paddingBottom) + px(cs.borderTopWidth) + px(cs.borderBottomWidth);
        }
        h += height + (parseFloat(cs.marginTop) || 0) + (parseFloat(cs.marginBottom) || 0);
      }
      return h;
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

    return {
      // setBase replaces the stored curves (web.baselineJSON; {} for none).
      setBase(b) { base = b || {}; drawBaseline(); },
      // setLive places each lane's point: [{c, compare, values, name, mode}].
      setLive(l) { live = l || []; drawBaseline(); },
    };
  }

  // liveOf is a chart frame's (web.Frame's) baseline points, one per lane.
  function liveOf(f) {
    const more = f.lanes || [];
    return [{ ...f.live, name: f.name, mode: f.mode }].concat(more.map((l) => ({ ...l.live, name: l.name, mode: l.mode })));
  }

  window.kvlens = { slo, colours, laneColours, fmt, chartHeight, legend, windowSecs, timeCharts, rowsOf, baselineChart, liveOf };
})();
