// kvlens dashboard: feeds the live charts and the baseline overlay
// (charts.js) from the websocket's JSON frames.
// HTML frames (the tiles) are swapped in by htmx's ws extension.
(function () {
  "use strict";
  const body = document.body;
  const { rowsOf } = window.kvlens;
  const charts = window.kvlens.timeCharts();

  // The baseline overlay (charts.js): the stored curves embedded in the
  // page, and a point per lane where the running system sits now.
  const baseline = window.kvlens.baselineChart(document.getElementById("baseline-chart"), document.getElementById("baseline-field"));
  baseline.setBase(JSON.parse(document.getElementById("baseline-data").textContent || "{}"));

  // syncMode keeps this page's single-view switch in step with another
  // operator's choice. Its menu is left alone while the operator is in it
  // (an open menu set under them jumps to another policy), and set at a
  // later frame.
  function syncMode(mode) {
    const sw = document.getElementById("mode-switch");
    if (!sw) return;
    if (sw.dataset.active !== mode) {
      sw.dataset.active = mode;
      sw.querySelectorAll("button[data-testid^=mode-]").forEach((b) => {
        const on = b.dataset.testid === "mode-" + mode;
        b.classList.toggle("active", on);
        b.setAttribute("aria-pressed", String(on));
      });
    }
    const more = sw.querySelector("select");
    if (!more || more === document.activeElement) return;
    const want = [...more.options].some((o) => o.value === mode) ? mode : "";
    if (more.value !== want) more.value = want;
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

  // syncFault shows the fault in force in this page's select, leaving alone
  // the select while the operator is using it here.
  const faultSelect = document.querySelector("[data-testid=fault]");
  function syncFault(fault) {
    if (!faultSelect || !fault || faultSelect === document.activeElement || faultSelect.value === fault) return;
    if ([...faultSelect.options].some((o) => o.value === fault)) faultSelect.value = fault;
  }

  // syncTarget keeps the slider and the target beside it in step with a
  // change made elsewhere (the tour, another browser), leaving alone a
  // slider moved here in the last 3 s: its own request may not have landed.
  const slider = document.querySelector("[data-testid=concurrency-slider]");
  let moved = 0;
  if (slider) slider.addEventListener("input", () => { moved = Date.now(); });
  function syncTarget(points) {
    const last = points && points[points.length - 1];
    if (!slider || !last || !(last.target > 0) || Date.now() - moved < 3000) return;
    const n = String(last.target);
    if (slider.value !== n) slider.value = n;
    const out = document.getElementById("concurrency-target");
    if (out && out.textContent !== n) out.textContent = n;
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
    syncTarget(f.points);
    syncFault(f.fault);
    charts.setLanes(1 + more.length);
    if (f.type === "history") charts.setMarks(f.marks);
    else charts.addMarks(f.marks);
    charts.hold(f.warming);
    charts.addPoints(rowsOf(f), f.type === "history");
    if (f.live) baseline.setLive(window.kvlens.liveOf(f));
  });

  // Controls answer a refused value with a one-line reason.
  const notice = document.getElementById("notice");
  body.addEventListener("htmx:responseError", (e) => {
    notice.textContent = e.detail.xhr.responseText.trim();
  });
  body.addEventListener("htmx:afterRequest", (e) => {
    // A change that succeeds clears an old refusal, unless its answer is the
    // notice itself. The page's own reads (the conversation list, fetched
    // every 5 s while open; a conversation opened) leave it: they would wipe
    // a control's answer moments after it came.
    const verb = e.detail.requestConfig && e.detail.requestConfig.verb;
    if (e.detail.successful && verb !== "get" && e.detail.target !== notice) notice.textContent = "";
  });
  // A control's success ("Caches reset on 6 workers; …") goes after 10 s:
  // the charts' marks keep the change, and a line left under the controls
  // for minutes reads as news. A refusal stays until the next change.
  let cleared = 0;
  body.addEventListener("htmx:afterSwap", (e) => {
    if (e.detail.target !== notice || !e.detail.successful) return;
    const text = notice.textContent;
    clearTimeout(cleared);
    cleared = setTimeout(() => { if (notice.textContent === text) notice.textContent = ""; }, 10000);
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

// Keyboard focus survives a redraw. Every frame replaces the tiles (their
// labels are buttons), the Start/Stop control, the tour's bar and the
// simulate button, and a control's answer replaces the mode switch or the
// pair's selects: the focused control went with the element replaced, the
// focus fell to the page's body, and a keyboard or screen reader user lost
// their place once a second. Before a swap the focused control is noted by
// what names it (id, test id, popover); after it, its namesake takes the
// focus back, or else the first control of its kind in the same redrawn
// element (Stop became Start). This comes after the operator's buttons are
// enabled again: a disabled button takes no focus.
(function () {
  "use strict";
  const body = document.body;
  let kept = null;
  function note() {
    const el = document.activeElement;
    if (!el || el === body || !el.tagName) { kept = null; return; }
    const box = el.parentElement && el.parentElement.closest("[id]");
    kept = {
      el, tag: el.tagName, id: el.id, testid: el.dataset.testid || "", pop: el.getAttribute("popovertarget") || "",
      box: box ? box.id : "", ring: el.matches(":focus-visible"),
    };
  }
  function restore() {
    const k = kept;
    kept = null;
    // Focus moved on by itself, or went elsewhere on purpose: leave it.
    if (!k || k.el.isConnected || (document.activeElement && document.activeElement !== body)) return;
    let to = k.id ? document.getElementById(k.id) : null;
    if (!to && k.testid) to = document.querySelector(`${k.tag}[data-testid="${CSS.escape(k.testid)}"]`);
    if (!to && k.pop) to = document.querySelector(`${k.tag}[popovertarget="${CSS.escape(k.pop)}"]`);
    if (!to && k.box) {
      const box = document.getElementById(k.box);
      to = box && box.querySelector(k.tag);
    }
    if (to && !to.disabled) to.focus({ preventScroll: true, focusVisible: k.ring });
  }
  // A frame's fragments are swapped between these two events.
  body.addEventListener("htmx:wsBeforeMessage", note);
  body.addEventListener("htmx:wsAfterMessage", restore);
  // A control's answer is swapped between these two, in the same task
  // (htmx swaps without delay unless told). afterOnLoad, unlike afterSwap,
  // reaches the document when the swap took the control out of the page.
  // Before, the focus came back in a later task, and a frame that ran
  // first found it on the body and forgot the control.
  document.addEventListener("htmx:beforeSwap", note);
  document.addEventListener("htmx:afterOnLoad", restore);
})();

// A click that a redraw falls within is not lost. The tiles and other
// fragments are replaced every second; a mouse pressed on a button that is
// replaced before it is released gives no click (the press and the release
// met different elements), so a click on a tile's label held for 100 ms did
// nothing about one time in ten. The release then clicks the control that took the pressed
// one's place, when it is the same control (same tag and id, test id or
// popover). A touch's tap finds its element when it ends, so only the
// mouse needs this.
(function () {
  "use strict";
  const control = (el) => (el && el.closest ? el.closest("button, summary, a[href]") : null);
  const key = (el) => {
    const who = el && [el.id, el.dataset.testid || "", el.getAttribute("popovertarget") || ""].join("|");
    return who && who !== "||" ? el.tagName + "|" + who : "";
  };
  let pressed = null;
  let clicked = "";
  document.addEventListener("pointerdown", (e) => {
    pressed = e.pointerType === "mouse" && e.button === 0 ? control(e.target) : null;
    clicked = "";
  }, true);
  document.addEventListener("click", (e) => {
    clicked = key(control(e.target));
  }, true);
  document.addEventListener("pointerup", (e) => {
    const was = pressed;
    pressed = null;
    if (!was || was.isConnected || !key(was)) return;
    // The browser's click, if any, comes after this event.
    setTimeout(() => {
      if (clicked === key(was)) return;
      const now = control(document.elementFromPoint(e.clientX, e.clientY));
      if (now && !now.disabled && key(now) === key(was)) now.click();
    }, 0);
  }, true);
})();
