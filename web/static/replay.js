// kvlens replay: plays a recording's 1 Hz frames on the live dashboard's
// charts (charts.js): a timeline to scrub, play and pause at 1×, 4× or 16×.
// The charts show the 10 minutes up to the playhead, with the marks; the
// headline and tiles are those the live page showed at the playhead's
// second, and the baseline chart the curves it compared with then, with the
// point where the system sat.
(function () {
  "use strict";
  const { slo, windowSecs, liveOf } = window.kvlens;
  const charts = window.kvlens.timeCharts();
  const baseline = window.kvlens.baselineChart(document.getElementById("baseline-chart"), document.getElementById("baseline-field"));
  const baseName = document.getElementById("baseline-name");
  const timeline = document.getElementById("timeline");
  const playBtn = document.getElementById("play");
  const playhead = document.getElementById("playhead");
  const modeName = document.getElementById("mode-name");
  const notice = document.getElementById("notice");

  let frames = []; // {t, row, modes, lanes, seq, base, live}, by time
  let marks = []; // every mark of the recording, by time
  const bases = []; // the recording's baseline frames' bodies, in order
  let shownBase = null; // the index in bases drawn, -1 for none
  let panelsWanted = null; // the seq of the frame whose panels the playhead wants
  let panelsShown = null; // the seq of the frame whose panels are shown
  let panelsBusy = false; // a fetch of panels is in flight
  let at = 0; // the playhead, an index into frames
  let speed = 1;
  let timer = null;
  let paceFrom = 0; // the frame play began at, and when (performance.now())
  let paceStart = 0;

  const clock = (t) => new Date(t * 1000).toISOString().slice(11, 19);
  const elapsed = (s) => `${Math.floor(s / 60)}:${String(s % 60).padStart(2, "0")}`;

  // first returns the index of the first frame at or after t.
  function first(t) {
    let lo = 0, hi = frames.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (frames[mid].t < t) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  function show(i) {
    if (!frames.length) return;
    at = Math.max(0, Math.min(frames.length - 1, i));
    const f = frames[at];
    charts.setMarks(marks.filter((m) => m.t <= f.t));
    charts.setLanes(f.lanes);
    charts.addPoints(frames.slice(first(f.t - windowSecs + 1), at + 1).map((x) => x.row), true);
    showModes(f.modes);
    timeline.value = String(at);
    playhead.textContent = `${clock(f.t)} UTC · +${elapsed(f.t - frames[0].t)} of ${elapsed(frames[frames.length - 1].t - frames[0].t)}`;
    playhead.dataset.t = String(f.t);
    playhead.dataset.seq = String(f.seq);
    if (f.base !== shownBase) {
      shownBase = f.base;
      const b = bases[f.base];
      // A recording made before kvlens kept the baseline has none: the
      // chart shows the points alone.
      baseline.setBase(b || { slo_ttft_ms: slo.ttft, slo_tpot_ms: slo.tpot });
      baseName.textContent = !b ? "This recording kept no baseline (made by an older kvlens)."
        : b.name ? "Compared with: " + b.name : "No stored baseline was compared with.";
    }
    baseline.setLive(f.live);
    fetchPanels(f.seq);
  }

  // showModes names the policies in the header: one as "Routing: KV-aware";
  // an A/B recording's pair as the live page's header does, lane A first,
  // each in its lane's colour. Before, one badge read "KV-aware vs
  // Round-robin", B first, as if lane A ran KV-aware.
  const modeBox = document.querySelector(".mode[data-testid=mode]");
  let modesShown = "";
  function showModes(modes) {
    const key = modes.join("\n");
    if (key === modesShown) return;
    modesShown = key;
    if (modes.length < 2) {
      modeName.textContent = modes[0];
      if (!modeName.isConnected) modeBox.replaceChildren("Routing: ", modeName);
      return;
    }
    const parts = [];
    modes.forEach((m, i) => {
      if (i > 0) {
        const vs = document.createElement("span");
        vs.className = "vs";
        vs.textContent = "vs";
        parts.push(vs);
      }
      const name = document.createElement("strong");
      name.className = "lane-" + String.fromCharCode(97 + i);
      name.textContent = m;
      parts.push(name);
    });
    modeBox.replaceChildren(...parts);
  }

  // fetchPanels asks for the headline and tiles recorded with frame seq,
  // drawn by the server with the live page's components. One fetch is in
  // flight at a time, and none is cancelled: while it is, the playhead
  // moves on, and when it returns the next fetch is of wherever the
  // playhead is then. At 16x the playhead moves every 62.5 ms; a fetch that
  // a newer one cancelled (as before) never returned, and the headline
  // stood still until the player stopped.
  function fetchPanels(seq) {
    panelsWanted = seq;
    if (!panelsBusy && seq !== panelsShown) pullPanels();
  }

  function pullPanels() {
    const seq = panelsWanted;
    panelsBusy = true;
    // A fetch that hangs would hold up every later one: give up on it.
    fetch(`${document.body.dataset.frames}/${seq}/panels`, { signal: AbortSignal.timeout(10000) })
      .then((r) => (r.ok ? r.text() : r.text().then((t) => Promise.reject(new Error(t.trim())))))
      .then((html) => {
        const tpl = document.createElement("template");
        tpl.innerHTML = html;
        for (const el of [...tpl.content.children]) {
          const old = el.id && document.getElementById(el.id);
          if (old) old.replaceWith(el);
        }
        panelsShown = seq;
        document.body.dataset.panelsSeq = String(seq);
        if (notice.textContent.startsWith("Cannot load the tiles")) notice.textContent = "";
      })
      .catch((e) => {
        notice.textContent = "Cannot load the tiles: " + (e.name === "TimeoutError" ? "no answer in 10 s" : e.message);
      })
      .finally(() => {
        panelsBusy = false;
        if (panelsWanted !== panelsShown && panelsWanted !== seq) pullPanels();
      });
  }

  function pause() {
    clearInterval(timer);
    timer = null;
    playBtn.textContent = "Play";
    playBtn.dataset.playing = "false";
  }

  // play advances one recorded second per 1/speed s of wall time, by the
  // clock: a tick that comes late, on a busy machine, moves the playhead
  // as far as the time played, so that 16x plays in 1/16 of the length.
  function play() {
    if (at >= frames.length - 1) show(0);
    paceFrom = at;
    paceStart = performance.now();
    clearInterval(timer);
    timer = setInterval(() => {
      if (at >= frames.length - 1) return pause();
      const due = paceFrom + Math.round(((performance.now() - paceStart) * speed) / 1000);
      if (due > at) show(Math.min(due, frames.length - 1));
    }, 1000 / speed);
    playBtn.textContent = "Pause";
    playBtn.dataset.playing = "true";
  }

  playBtn.addEventListener("click", () => (timer ? pause() : play()));
  timeline.addEventListener("input", () => {
    show(Number(timeline.value));
    // Playing, it plays on from the new place.
    paceFrom = at;
    paceStart = performance.now();
  });
  document.querySelectorAll("button[data-speed]").forEach((b) =>
    b.addEventListener("click", () => {
      speed = Number(b.dataset.speed);
      document.querySelectorAll("button[data-speed]").forEach((o) => {
        o.classList.toggle("active", o === b);
        o.setAttribute("aria-pressed", String(o === b));
      });
      document.body.dataset.speed = String(speed);
      if (timer) play();
    }),
  );

  fetch(document.body.dataset.frames)
    .then((r) => (r.ok ? r.json() : r.text().then((t) => Promise.reject(new Error(t.trim())))))
    .then((rec) => {
      let base = -1; // the baseline compared with from here on
      for (const fr of rec.frames || []) {
        if (fr.kind === "baseline" && fr.body) {
          bases.push(fr.body);
          base = bases.length - 1;
        }
        if (fr.kind !== "snapshot" || !fr.body) continue;
        const b = fr.body;
        // An A/B recording's frames carry lane B's points beside lane A's.
        // The header names lane A first, as the live page's does: "B vs A"
        // (the headline's order) read as lane A's policy in lane B.
        const more = b.lanes || [];
        const modes = [b.mode_text, ...more.map((l) => l.mode_text)];
        const live = b.live ? liveOf(b) : [];
        for (const row of window.kvlens.rowsOf(b)) frames.push({ t: row.t, row, modes, lanes: 1 + more.length, seq: fr.seq, base, live });
        if (b.marks) marks = marks.concat(b.marks);
      }
      frames.sort((a, b) => a.t - b.t);
      marks.sort((a, b) => a.t - b.t);
      if (!frames.length) {
        // Frames, but not one second of the charts: the tiles' line says
        // the same as the playhead, not that they are loading.
        const why = "nothing to play: this recording kept no second of the charts";
        playhead.textContent = why;
        document.querySelector("#tiles .compare-text").textContent = why;
        return;
      }
      timeline.max = String(frames.length - 1);
      timeline.disabled = playBtn.disabled = false;
      document.body.dataset.frameCount = String(frames.length);
      show(frames.length - 1);
    })
    .catch((e) => (notice.textContent = "Cannot load the recording: " + e.message));
})();
