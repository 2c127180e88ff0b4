//go:build browser

package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/kvlens/kvlens/tour"
)

// countFrames makes the page count the websocket's HTML frames (one a
// tick) in window.framesSeen.
const countFrames = `(() => { if (window.framesSeen === undefined) { window.framesSeen = 0;
	document.body.addEventListener('htmx:wsAfterMessage', () => window.framesSeen++); } return true; })()`

// waitFrames waits until the page has swapped in n more frames.
func waitFrames(t *testing.T, ctx context.Context, n int) {
	t.Helper()
	seen, err := chromedp.Run(ctx, chromedp.Evaluate[int](`window.framesSeen`))
	if err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, `window.framesSeen >= `+strconv.Itoa(seen+n), time.Duration(n)*time.Second+10*time.Second, "the page got no frames")
}

// focused names the focused element as a selector would find it: its test
// id, or its popover's for a tile's label; "body" when nothing has focus.
const focused = `(() => { const e = document.activeElement;
	if (!e || e === document.body) return 'body';
	return (e.dataset.testid || e.getAttribute('popovertarget') || e.tagName) + (e.isConnected ? '' : ' (detached)'); })()`

// journal makes the page note in window.journal each key, click, request
// and frame, with the element it met: the record a failure prints.
const journal = `(() => { window.journal = [];
	const who = (e) => e && e.dataset ? (e.dataset.testid || e.tagName) + (e.disabled ? ' disabled' : '') + (e.isConnected ? '' : ' detached') : String(e);
	for (const type of ['keydown', 'keypress', 'keyup', 'click', 'focusin', 'focusout'])
		document.addEventListener(type, (e) => window.journal.push(type + ' ' + who(e.target) + ' (focus ' + who(document.activeElement) + ')'), true);
	for (const type of ['htmx:beforeRequest', 'htmx:afterRequest', 'htmx:wsAfterMessage', 'htmx:responseError', 'htmx:sendError'])
		document.body.addEventListener(type, (e) => window.journal.push(type + ' ' + who(e.target) + (e.detail && e.detail.xhr ? ' ' + e.detail.xhr.status : '')));
	return true; })()`

// TestBrowserKeyboardFocus is a keyboard user at the booth: a control with
// the focus keeps it while the frames redraw the page every second, and
// after its own change redraws it. Before, a control in a redrawn fragment
// (Start/Stop, a tile's label, the tour's Pause) lost the focus to the
// page's body at the next frame, and a policy chosen with the arrow keys
// lost it when the switch came back. A focused select is not set under
// its user by another operator's change, and follows it once left.
func TestBrowserKeyboardFocus(t *testing.T) {
	t.Parallel() // see TestBrowserReconnects
	d := startDemo(t, func(cfg *Config) {
		// The tour's bar and its Pause are on the page; at its own pace
		// no step changes the demo within the test.
		cfg.Dashboard.Tour = tour.Builtin()
	})
	ctx := newBrowser(t, 1920, 1080)
	loginAsOperator(t, ctx, d)
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](countFrames)); err != nil {
		t.Fatal(err)
	}

	// Each control, focused, keeps the focus for 3 frames.
	for _, c := range []struct{ name, sel, want string }{
		{"the concurrency slider", `[data-testid=concurrency-slider]`, "concurrency-slider"},
		{"lane A's policy", `[data-testid=pair-a]`, "pair-a"},
		{"lane B's policy", `[data-testid=pair-b]`, "pair-b"},
		{"Reset caches", `[data-testid=reset]`, "reset"},
		{"the fault select", `[data-testid=fault]`, "fault"},
		{"Stop", `[data-testid=stop]`, "stop"},
		{"a tile's label", `[data-tile=ttft-p95] h3 .term`, "def-ttft-p95"},
		{"the tour's Pause", `[data-testid=tour-pause]`, "tour-pause"},
	} {
		got, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(() => { document.querySelector('`+c.sel+`').focus(); return `+focused+`; })()`))
		if err != nil || got != c.want {
			t.Fatalf("focusing %s focused %q (%v)", c.name, got, err)
		}
		waitFrames(t, ctx, 3)
		if got, _ := chromedp.Run(ctx, chromedp.Evaluate[string](focused)); got != c.want {
			t.Errorf("3 frames after focusing %s the focus is on %s", c.name, got)
		}
	}

	// A focused select is not set under its user: another operator's change
	// of lane A (a request of its own, as another browser's) waits until
	// the select is left.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector('[data-testid=pair-a]').focus() || true`)); err != nil {
		t.Fatal(err)
	}
	status, err := chromedp.Run(ctx, chromedp.Evaluate[int](`fetch('/api/mode', {method: 'POST', body: new URLSearchParams({mode: 'least_loaded', lane: 'a'})}).then(r => r.status)`, chromedp.EvalAwaitPromise))
	if err != nil || status != 200 || d.lanes[0].proxy.PolicyName() != "least_loaded" {
		t.Fatalf("another operator's change of lane A: %d (%v), policy %s", status, err, d.lanes[0].proxy.PolicyName())
	}
	waitFrames(t, ctx, 3)
	if got, _ := chromedp.Run(ctx, chromedp.Evaluate[string](focused+` + ' ' + document.querySelector('[data-testid=pair-a]').value`)); got != "pair-a round_robin" {
		t.Errorf("3 frames after another operator's change, lane A's focused select reads %q; want it focused and as its user left it (pair-a round_robin)", got)
	}
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.activeElement.blur() || true`)); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, `document.querySelector('[data-testid=pair-a]').value === 'least_loaded'`, 5*time.Second, "lane A's select does not follow the change once left")

	// Changes made from the keyboard keep the focus on their control when
	// its answer redraws it: a policy chosen with the arrow keys, and Stop
	// pressed with Enter, whose place Start takes (Enter again starts).
	// The focus is given in the page, by one script: chromedp.Focus looks
	// the node up and then focuses it by its id, and a frame that redraws
	// the controls in between failed the test with "Could not find node
	// with given id" (once, beside the unit tests on a 2-core machine).
	press := func(sel, keys string) {
		t.Helper()
		js := fmt.Sprintf(`(() => { const e = document.querySelector(%q); e.focus(); return document.activeElement === e; })()`, sel)
		if focused, err := chromedp.Run(ctx, chromedp.Evaluate[bool](js)); err != nil || !focused {
			t.Fatalf("focus %s: %v (focused: %v)", sel, err, focused)
		}
		if err := chromedp.Do(ctx, chromedp.KeyEvent(keys)); err != nil {
			t.Fatal(err)
		}
	}
	press(`[data-testid=pair-b]`, kb.ArrowDown)
	deadline := time.Now().Add(5 * time.Second)
	for d.lanes[1].proxy.PolicyName() == "kv" && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if p := d.lanes[1].proxy.PolicyName(); p == "kv" {
		t.Fatalf("the arrow key on lane B's select left its policy %s", p)
	}
	waitFrames(t, ctx, 3)
	if got, _ := chromedp.Run(ctx, chromedp.Evaluate[string](focused)); got != "pair-b" {
		t.Errorf("3 frames after choosing lane B's policy with the arrow key the focus is on %s", got)
	}
	// From here the page notes each key, click, request and frame, for a
	// failure's message.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](journal)); err != nil {
		t.Fatal(err)
	}
	running := func(want bool, what string) {
		t.Helper()
		if ok, _ := pollJS(ctx, `document.getElementById('run-state').dataset.running === '`+strconv.FormatBool(want)+`'`, 10*time.Second); !ok {
			seen, err := chromedp.Run(ctx, chromedp.Evaluate[string](`window.journal.join(' | ')`))
			t.Fatalf("after 10s: %s; the page saw: %s (%v)", what, seen, err)
		}
	}
	press(`[data-testid=stop]`, "\r")
	running(false, "Enter on Stop did not stop the load")
	waitFrames(t, ctx, 3)
	if got, _ := chromedp.Run(ctx, chromedp.Evaluate[string](focused)); got != "start" {
		// Fatal: Enter would go to what has the focus instead.
		t.Fatalf("3 frames after Enter on Stop the focus is on %s; want Start, which took its place", got)
	}
	if err := chromedp.Do(ctx, chromedp.KeyEvent("\r")); err != nil {
		t.Fatal(err)
	}
	running(true, "Enter on Start, which had the focus, did not start the load")
	waitFrames(t, ctx, 3)
	if got, _ := chromedp.Run(ctx, chromedp.Evaluate[string](focused)); got != "stop" {
		t.Fatalf("3 frames after Enter on Start the focus is on %s; want Stop, which took its place", got)
	}

	// A frame that comes between a control's answer and the focus's return
	// to it does not lose the focus. The page is kept busy for 1.5 s after
	// Enter on Stop, so that the answer and a frame wait together. Before,
	// the focus came back in a task after the answer's, a frame that ran
	// between found it on the page's body and forgot the control, and Start
	// never got it (Enter then did nothing, once in CI); this step failed
	// 2 runs in 3 then.
	if err := chromedp.Do(ctx, chromedp.KeyEvent("\r")); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { const end = Date.now() + 1500; while (Date.now() < end); return true; })()`)); err != nil {
		t.Fatal(err)
	}
	running(false, "Enter on Stop, with the page busy, did not stop the load")
	waitFrames(t, ctx, 3)
	if got, _ := chromedp.Run(ctx, chromedp.Evaluate[string](focused)); got != "start" {
		seen, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`window.journal.slice(-12).join(' | ')`))
		t.Errorf("3 frames after Enter on Stop with a frame before the focus's return, the focus is on %s; want Start; the page saw: %s", got, seen)
	}
}

// TestBrowserControlsStayPut watches the controls row while the load
// grows from 60 to 180 conversations in each lane and then stops: no
// control moves. Before, the live count's figures (60 · 60, then 180 ·
// 180, then 0 · 0) pushed the pair's selects, Reset and the fault select
// 31 px right, then 58 px left, and Start was 3 px wider than Stop.
func TestBrowserControlsStayPut(t *testing.T) {
	t.Parallel() // see TestBrowserReconnects
	d := startDemo(t)
	ctx := newBrowser(t, 1920, 1080)
	loginAsOperator(t, ctx, d)
	waitJS(t, ctx, `document.getElementById('live-count').textContent === '60 · 60'`, 20*time.Second, "the load never reached 60 · 60")
	// The page samples every control's box each 100 ms, and the counts
	// shown, until told to stop.
	const watch = `(() => { window.boxes = {}; window.countsSeen = new Set();
		const sels = ['[data-testid=run-state]', '[data-testid=concurrency-slider]', '#concurrency-target', '#live-count',
			'[data-testid=pair-a]', '[data-testid=pair-b]', '[data-testid=reset]', '[data-testid=fault]'];
		window.watching = setInterval(() => {
			for (const s of sels) { const r = document.querySelector(s).getBoundingClientRect();
				(window.boxes[s] = window.boxes[s] || new Set()).add(Math.round(r.left) + '..' + Math.round(r.right)); }
			window.countsSeen.add(document.getElementById('live-count').textContent);
		}, 100); return true; })()`
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](watch)); err != nil {
		t.Fatal(err)
	}
	status, err := chromedp.Run(ctx, chromedp.Evaluate[int](`fetch('/api/concurrency', {method: 'POST', body: new URLSearchParams({concurrency: '180'})}).then(r => r.status)`, chromedp.EvalAwaitPromise))
	if err != nil || status != 200 {
		t.Fatalf("asking for 180 conversations: %d (%v)", status, err)
	}
	waitJS(t, ctx, `document.getElementById('live-count').textContent === '180 · 180'`, 40*time.Second, "the load never reached 180 · 180")
	clickRedrawn(t, ctx, `[data-testid=stop]`)
	waitJS(t, ctx, `document.getElementById('live-count').textContent === '0 · 0' && !!document.querySelector('[data-testid=start]')`, 20*time.Second, "Stop did not bring the count to 0 · 0")
	// The headline no longer gives the target as the conversations running.
	waitJS(t, ctx, `document.querySelector('[data-testid=headline-load]').textContent === ' · load stopped'`, 5*time.Second, "stopped, the headline does not say the load is stopped")
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](countFrames)); err != nil {
		t.Fatal(err)
	}
	waitFrames(t, ctx, 2)
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(() => { clearInterval(window.watching);
		return JSON.stringify({ boxes: Object.fromEntries(Object.entries(window.boxes).map(([k, v]) => [k, [...v]])), counts: [...window.countsSeen] }); })()`))
	if err != nil {
		t.Fatal(err)
	}
	var seen struct {
		Boxes  map[string][]string `json:"boxes"`
		Counts []string            `json:"counts"`
	}
	if err := json.Unmarshal([]byte(raw), &seen); err != nil {
		t.Fatal(err)
	}
	t.Logf("counts seen: %v", seen.Counts)
	if len(seen.Boxes) != 8 {
		t.Fatalf("sampled %d controls, want 8: %v", len(seen.Boxes), seen.Boxes)
	}
	for sel, spans := range seen.Boxes {
		if len(spans) != 1 {
			t.Errorf("%s moved as the count went from 60 · 60 to 180 · 180 and 0 · 0: its left..right edges were %v px", sel, spans)
		}
	}
	if t.Failed() {
		screenshot(t, ctx, "controls-moved.png", false)
	}
}
