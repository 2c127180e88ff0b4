// kvlens reconnect: the live page survives a restart of kvlens, however the
// socket was closed and however long kvlens is away.
//
// The websocket extension reconnects by itself only after closes 1006, 1011,
// 1012 and 1013, with a delay of up to a minute. Here the delay is capped at
// 5 s; after any other close (1000, 1001 from a proxy, ...) the page polls
// /api/state and reloads once kvlens answers; and a page that was cut off
// for longer than staleReloadMs reloads on reconnecting, so that every
// control and panel shows the state kvlens has now, not what it had then.
(function () {
  "use strict";
  const retryCodes = [1006, 1011, 1012, 1013];
  const staleAfterMs = 3000;
  // A test may shorten it (window.kvlensStaleReloadMs, set before the page
  // loads) rather than wait through a 30 s outage.
  const staleReloadMs = window.kvlensStaleReloadMs || 30000;
  const pollMs = 2000;

  if (window.htmx) htmx.config.wsReconnectDelay = (retry) => Math.min(1000 * 2 ** retry, 5000) * (0.5 + Math.random() / 2);

  const body = document.body;
  const banner = document.getElementById("stale");
  let lastFrame = 0; // ms; 0 until the first frame
  let attempts = 0;
  let polling = false;

  body.addEventListener("htmx:wsBeforeMessage", () => { lastFrame = Date.now(); });
  body.addEventListener("htmx:wsOpen", () => {
    if (lastFrame !== 0 && Date.now() - lastFrame > staleReloadMs) location.reload();
    attempts = 0;
  });
  body.addEventListener("htmx:wsClose", (e) => {
    attempts++;
    const code = e.detail && e.detail.event ? e.detail.event.code : 1006;
    if (!retryCodes.includes(code)) pollThenReload();
  });

  // pollThenReload waits for kvlens to answer, then loads the page afresh.
  function pollThenReload() {
    if (polling) return;
    polling = true;
    const tick = () => {
      fetch("/api/state", { cache: "no-store" })
        .then((r) => { if (r.ok) location.reload(); else setTimeout(tick, pollMs); })
        .catch(() => setTimeout(tick, pollMs));
    };
    setTimeout(tick, pollMs);
  }

  // The banner says for how long the numbers have been frozen.
  setInterval(() => {
    const age = lastFrame === 0 ? 0 : Date.now() - lastFrame;
    banner.hidden = lastFrame !== 0 && age < staleAfterMs;
    if (banner.hidden) return;
    const secs = Math.round(age / 1000);
    banner.textContent = lastFrame === 0
      ? "Connecting to kvlens…"
      : `Live data stopped ${secs} s ago: kvlens is unreachable, reconnecting${attempts > 1 ? ` (try ${attempts})` : ""}…`;
    banner.dataset.ageSecs = String(secs);
  }, 1000);
})();
