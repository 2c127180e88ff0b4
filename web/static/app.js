// kvlens dashboard: draws the live TTFT chart from the websocket's JSON
// frames. HTML frames (the tiles) are swapped in by htmx's ws extension.
(function () {
  "use strict";
  const body = document.body;
  const sloTTFT = Number(body.dataset.sloTtft) || 600;
  const windowSecs = 300;
  const data = [[], [], [], []]; // time, p50, p95, SLO
  let lastFrame = 0;

  const chartEl = document.getElementById("ttft-chart");
  const size = () => ({ width: Math.max(chartEl.clientWidth, 300), height: 280 });
  const chart = new uPlot({
    ...size(),
    scales: { x: { time: true }, y: { range: (u, min, max) => [0, Math.max(max || 0, sloTTFT) * 1.15] } },
    axes: [{ stroke: "#ccc", grid: { stroke: "#333" } }, { stroke: "#ccc", grid: { stroke: "#333" }, label: "ms" }],
    series: [
      {},
      { label: "TTFT p50", stroke: "#4fc3f7", width: 2, value: (u, v) => (v == null ? "—" : v.toFixed(0) + " ms") },
      { label: "TTFT p95", stroke: "#ffb74d", width: 2, value: (u, v) => (v == null ? "—" : v.toFixed(0) + " ms") },
      { label: "SLO " + sloTTFT + " ms", stroke: "#ef5350", width: 2, dash: [8, 6], points: { show: false } },
    ],
  }, data, chartEl);
  window.addEventListener("resize", () => chart.setSize(size()));

  function addPoints(points, replace) {
    if (replace) data.forEach((a) => (a.length = 0));
    for (const p of points) {
      data[0].push(p.t);
      data[1].push(p.ttft_p50);
      data[2].push(p.ttft_p95);
      data[3].push(sloTTFT);
    }
    const cut = data[0].length - windowSecs;
    if (cut > 0) data.forEach((a) => a.splice(0, cut));
    chart.setData(data);
  }

  body.addEventListener("htmx:wsBeforeMessage", (e) => {
    lastFrame = Date.now();
    const msg = e.detail.message;
    if (typeof msg !== "string" || msg[0] !== "{") return; // HTML: htmx swaps it
    e.preventDefault();
    const f = JSON.parse(msg);
    document.getElementById("mode-name").textContent = f.mode_text;
    document.title = "kvlens · " + f.mode_text;
    addPoints(f.points || [], f.type === "history");
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
    if (e.detail.successful) notice.textContent = "";
  });
})();
