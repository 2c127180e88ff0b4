//go:build browser

package demo

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/kvlens/kvlens/web"
)

// screenshots is where the browser tests save what they saw; README links
// the copies committed under docs/.
var screenshots = flag.String("screenshots", "../build/screenshots", "directory for browser test screenshots")

// chromium finds Debian's Chromium, or skips when the machine has none and
// the test was not asked to insist (make test installs it and insists).
func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("KVLENS_REQUIRE_BROWSER") != "" {
		t.Fatal("no Chromium on PATH; install Debian's chromium package")
	}
	t.Skip("no Chromium on PATH")
	return ""
}

func newBrowser(t *testing.T, width, height int) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium(t)),
		chromedp.Headless,
		chromedp.NoSandbox, // root in CI containers
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.WindowSize(width, height),
		// No UserDataDir: chromedp makes the profile's directory and removes
		// it, trying for 5 s while Chromium's crashpad handler still writes
		// in it. t.TempDir's removal tries once, and its "directory not
		// empty" failed TestBrowserAB 3 times in about 40 runs after every
		// check had passed, with no line of ours to say why.
		// The machine has no network: stop Chromium calling home.
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-dev-shm-usage", true),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	// TestBrowserAB, the longest, takes about 140 s on a quiet machine:
	// its cold start settles about a minute after start.
	ctx, cancelTimeout := context.WithTimeout(ctx, 240*time.Second)
	t.Cleanup(func() { cancelTimeout(); cancel(); cancelAlloc() })
	return ctx
}

// operatorToken is the browser test's operator token. The demo treats
// localhost as a viewer (Access.LoopbackViewer), so the test's browser is a
// remote visitor until it enters the token.
const operatorToken = "booth-token"

// operatorReady holds once the page the operator's token reloads (its
// answer is HX-Refresh) has finished loading and every control, the tour's
// Pause included, is enabled. The controls are in the DOM, enabled, before
// htmx has bound them, and a change made then goes nowhere; the buttons in
// the fragments pushed every second (Stop, Pause) are enabled again by the
// page at each frame.
const operatorReady = `document.readyState === 'complete' && document.body.dataset.operator === 'true' &&
	[...document.querySelectorAll('.controls input, .controls select, .controls button, #tour .tour-action button')].every((e) => !e.disabled)`

// enterToken enters the operator token on the page the browser shows, as
// the booth's operator does, and waits for the page it reloads to be ready
// for them (operatorReady).
func enterToken(t *testing.T, ctx context.Context) {
	t.Helper()
	if err := chromedp.Do(ctx,
		chromedp.WaitVisible(`.login input[name=token]`),
		chromedp.SendKeys(`.login input[name=token]`, operatorToken),
		chromedp.Click(`.login button`),
	); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, operatorReady, 10*time.Second, "the operator's controls stayed disabled after entering the token")
}

// loginAsOperator opens the demo's page at 1920x1080 and enters the
// operator token.
func loginAsOperator(t *testing.T, ctx context.Context, d *Demo) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1920, 1080), chromedp.Navigate(d.URL)); err != nil {
		t.Fatal(err)
	}
	enterToken(t, ctx)
}

// startDemo starts the demo as the browser tests use it: on a free port,
// with an operator token, changed by each of edits.
func startDemo(t *testing.T, edits ...func(*Config)) *Demo {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.Dashboard.Access = web.Access{Token: operatorToken, LoopbackViewer: true}
	for _, e := range edits {
		e(&cfg)
	}
	d, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := d.Close(ctx); err != nil {
			t.Logf("closing the demo: %v", err)
		}
	})
	return d
}

// switchIdle holds when no request is in flight and htmx has finished
// swapping in the mode switch: only then do its new controls respond.
const switchIdle = `!document.querySelector('.htmx-request, #mode-switch.htmx-added, #mode-switch.htmx-settling, #mode-switch .htmx-added')`

// clickRedrawn clicks the element sel names in a panel the page redraws
// every second: a redraw between finding the node and clicking it detaches
// the node ("Could not find node with given id"), so it tries again, up to
// five times.
func clickRedrawn(t *testing.T, ctx context.Context, sel string) {
	t.Helper()
	var err error
	for range 5 {
		if err = chromedp.Do(ctx, chromedp.Click(sel)); err == nil {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("clicking %s: %v", sel, err)
}

// pressMode clicks the mode button with data-testid button, within the
// element scope names ("" for the page), and waits until the router's
// policy is want. The page logs each click and each request htmx sends,
// so a press that does not take says why. A click that reached some other
// element (the header moved between finding the button and clicking it)
// is tried once more; a click that reached the button and sent nothing,
// or a request that did not switch the router, fails.
func pressMode(t *testing.T, ctx context.Context, scope, button, want string, policy func() string) {
	t.Helper()
	sel := strings.TrimSpace(scope + " [data-testid=" + button + "]")
	const logPresses = `(() => { if (window.pressLog) { window.pressLog.length = 0; return true; }
		window.pressLog = [];
		document.addEventListener('click', (e) => window.pressLog.push('click on ' + (e.target.dataset.testid || e.target.tagName)), true);
		document.body.addEventListener('htmx:beforeRequest', (e) => window.pressLog.push('request ' + e.detail.requestConfig.verb + ' ' + e.detail.requestConfig.path + ' ' + JSON.stringify(e.detail.requestConfig.parameters)));
		document.body.addEventListener('htmx:responseError', (e) => window.pressLog.push('response ' + e.detail.xhr.status));
		return true; })()`
	for try := 1; ; try++ {
		if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](logPresses)); err != nil {
			t.Fatal(err)
		}
		clickRedrawn(t, ctx, sel)
		deadline := time.Now().Add(5 * time.Second)
		for policy() != want && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if policy() == want {
			return
		}
		log, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`window.pressLog.join('; ')`))
		if try == 1 && !strings.Contains(log, "click on "+button) {
			t.Logf("pressing %s reached no button (%s); pressing again", sel, log)
			continue
		}
		html, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById('mode-switch').outerHTML + ' notice=' + document.getElementById('notice').textContent`))
		t.Fatalf("router policy = %s after pressing %s (page log: %s); switch: %s", policy(), sel, log, html)
	}
}

// tapAcrossRedraw presses the mouse on the element sel matches, runs the
// script redraw, and releases it at the same point.
func tapAcrossRedraw(t *testing.T, ctx context.Context, sel, redraw string) {
	t.Helper()
	js := `(() => { const r = document.querySelector(` + strconv.Quote(sel) + `).getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()`
	at, err := chromedp.Run(ctx, chromedp.Evaluate[[]float64](js))
	if err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx,
		chromedp.MouseEvent(chromedp.MousePressed, at[0], at[1], chromedp.ButtonLeft, chromedp.ClickCount(1)),
		chromedp.Evaluate[chromedp.Void](redraw),
		chromedp.MouseEvent(chromedp.MouseReleased, at[0], at[1], chromedp.ButtonLeft, chromedp.ClickCount(1)),
	); err != nil {
		t.Fatal(err)
	}
}

// waitJS polls a JavaScript condition until it holds, failing with what
// describe says after timeout.
func waitJS(t *testing.T, ctx context.Context, cond string, timeout time.Duration, describe string) {
	t.Helper()
	if ok, err := pollJS(ctx, cond, timeout); !ok {
		t.Fatalf("after %s: %s (last error %v)", timeout, describe, err)
	}
}

// pollJS says whether cond held within timeout, checking every 200 ms and
// once more at the deadline, and gives the last check's error.
func pollJS(ctx context.Context, cond string, timeout time.Duration) (bool, error) {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](cond))
		if err == nil && ok {
			return true, nil
		}
		if time.Now().After(deadline) {
			return false, err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// text reads the visible text of the first element sel matches, waiting
// up to 5 s for one. It reads in one script rather than by node id, since
// htmx swaps the page's fragments every second and a node found may be
// gone by the time it is read.
func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	js := `(() => { const e = document.querySelector(` + strconv.Quote(sel) + `); return e ? e.innerText : null; })()`
	deadline := time.Now().Add(5 * time.Second)
	for {
		s, err := chromedp.Run(ctx, chromedp.Evaluate[*string](js))
		if err == nil && s != nil {
			return *s
		}
		if time.Now().After(deadline) {
			t.Fatalf("read %s: no such element (%v)", sel, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func screenshot(t *testing.T, ctx context.Context, name string, full bool) {
	t.Helper()
	act := chromedp.CaptureScreenshot()
	if full {
		act = chromedp.FullScreenshot(100) // 100 means PNG
	}
	shot, err := chromedp.Run(ctx, act)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(*screenshots, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(*screenshots, name)
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}

// TestBrowserDashboard walks the single view (--ab off) as a visitor, then
// as the operator: every step of issue 5's browser checklist, in one
// Chromium, in order.
func TestBrowserDashboard(t *testing.T) {
	// One fleet, mostly waiting for its windows to settle (twice, about
	// 30 s each): it runs beside the other one-fleet tests, see
	// TestBrowserReconnects.
	t.Parallel()
	d := startDemo(t, func(cfg *Config) {
		cfg.AB = nil
		// The default timing with short answers (80 tokens, about 2 s a
		// turn), so that TPOT and throughput fill in within seconds.
		cfg.Load.MaxTokens = 80
		cfg.Load.StartRate = 0
		// The session is recorded, so the test can replay it afterwards.
		cfg.DB, cfg.Record = filepath.Join(t.TempDir(), "kvlens.db"), true
	})
	ctx := newBrowser(t, 1920, 1080)
	if err := chromedp.Do(ctx,
		chromedp.EmulateViewport(1920, 1080),
		chromedp.Navigate(d.URL),
		chromedp.WaitVisible(`[data-testid=ttft-p50]`),
	); err != nil {
		t.Fatal(err)
	}

	// 1. The page loads with the live policy in plain words.
	if mode := text(t, ctx, `[data-testid=mode]`); !strings.Contains(mode, "Round-robin") {
		t.Fatalf("mode = %q, want the live policy in plain words", mode)
	}
	checkSelectsFit(t, ctx) // the mode switch's "more…" and the faults
	checkCompressed(t, ctx)

	// 2. A viewer without the token sees every control disabled, and the
	// server refuses a change with 403 even when the page is bypassed.
	for _, sel := range []string{"concurrency-slider", "stop", "mode-kv", "mode-round_robin", "mode-more", "reset"} {
		waitJS(t, ctx, `document.querySelector('[data-testid=`+sel+`]').disabled`, time.Second, sel+" is enabled for a viewer")
	}
	status, err := chromedp.Run(ctx, chromedp.Evaluate[int](`fetch('/api/mode', {method: 'POST', body: new URLSearchParams({mode: 'kv'})}).then(r => r.status)`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	if status != 403 || d.Proxy.PolicyName() != "round_robin" {
		t.Fatalf("a viewer's mode switch got %d and the policy is %s; want 403 and round_robin", status, d.Proxy.PolicyName())
	}
	status, _ = chromedp.Run(ctx, chromedp.Evaluate[int](`fetch('/api/concurrency', {method: 'POST', body: new URLSearchParams({concurrency: '120'})}).then(r => r.status)`, chromedp.EvalAwaitPromise))
	if status != 403 || d.Gen.Snapshot().Target == 120 {
		t.Fatalf("a viewer's slider move got %d, target %d", status, d.Gen.Snapshot().Target)
	}
	// A viewer's page, with its token row, fits as the operator's does.
	checkBoardFits(t, ctx)

	// The operator enters the token once; the page reloads with controls on.
	enterToken(t, ctx)

	// 3. The tiles update from the websocket.
	waitJS(t, ctx, `document.querySelector('[data-testid=ttft-p50]').textContent.endsWith(' ms') && document.querySelector('[data-testid=tops]').textContent !== '—'`, 20*time.Second, "the TTFT and throughput tiles never filled in")
	// The replay at the end shows a second at 60 conversations with every
	// figure drawn: the charts draw a window's rates only once they settle
	// (web.Point), some 30 s after start.
	waitJS(t, ctx, `document.querySelector('[data-tile=tops]').dataset.settling === 'false'`, 90*time.Second, "the throughput tile never settled at 60 conversations")
	// That tile may be the one the page got on connecting, computed then
	// and not recorded: wait for the next tick's point too, whose window
	// holds at least what the tiles showed.
	framesFlow(t, ctx, 10*time.Second, "no tick came after the tiles filled in")

	// 4. Moving the slider changes the load generator's target.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => {
		const s = document.querySelector('[data-testid=concurrency-slider]');
		s.value = "120";
		s.dispatchEvent(new Event('input', { bubbles: true }));
		return true;
	})()`)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for d.Gen.Snapshot().Target != 120 {
		if time.Now().After(deadline) {
			t.Fatalf("server target = %d after moving the slider to 120", d.Gen.Snapshot().Target)
		}
		time.Sleep(50 * time.Millisecond)
	}
	waitJS(t, ctx, `document.querySelector('[data-testid=concurrency-target]').textContent === '120'`, 5*time.Second, "the page does not show target 120")

	// 5. Switching the mode changes the router's policy and the header.
	waitJS(t, ctx, switchIdle, 5*time.Second, "the mode switch never settled")
	pressMode(t, ctx, "", "mode-kv", "kv", d.Proxy.PolicyName)
	waitJS(t, ctx, `document.getElementById('mode-name').textContent === 'KV-aware'`, 5*time.Second, "the header does not say KV-aware")
	// The switch re-renders after each change; use the new one.
	waitJS(t, ctx, `!!document.querySelector('#mode-switch[data-active=kv] [data-testid=mode-more]') `+" && "+switchIdle, 5*time.Second, "the mode switch did not re-render after KV-aware")
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => {
		const s = document.querySelector('#mode-switch[data-active=kv] [data-testid=mode-more]');
		s.value = "least_loaded";
		s.dispatchEvent(new Event('change', { bubbles: true }));
		return true;
	})()`)); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, `document.getElementById('mode-name').textContent === 'Least-loaded'`, 5*time.Second, "the more menu did not switch to least-loaded")
	if d.Proxy.PolicyName() != "least_loaded" {
		t.Fatalf("router policy = %s after choosing least-loaded", d.Proxy.PolicyName())
	}
	// The switch re-renders after each change; press KV-aware on the new one.
	waitJS(t, ctx, `!!document.querySelector('#mode-switch[data-active=least_loaded] [data-testid=mode-kv]') `+" && "+switchIdle, 5*time.Second, "the mode switch did not re-render")
	pressMode(t, ctx, "#mode-switch[data-active=least_loaded]", "mode-kv", "kv", d.Proxy.PolicyName)
	waitJS(t, ctx, `document.getElementById('mode-name').textContent === 'KV-aware'`, 5*time.Second, "the header does not say KV-aware again")

	// 6. The baseline chart has both stored curves and, once the switch's
	// window has settled, the live point: until then it places none, and
	// says so, as the tiles do.
	waitJS(t, ctx, `(() => { const e = document.getElementById('baseline-chart');
		return e.dataset.curves === 'round_robin,kv' && !!e.querySelector('canvas') && e.dataset.liveSettling === '1'; })()`,
		10*time.Second, "the baseline chart lacks its curves, or does not say the live point is settling")
	checkLivePointSettling(t, ctx, "the switch to KV-aware", 1)
	waitJS(t, ctx, `(() => { const e = document.getElementById('baseline-chart');
		return e.dataset.liveX !== '' && Number(e.dataset.liveY) > 0 && e.dataset.liveSettling === '0'; })()`,
		60*time.Second, "the baseline chart never placed the live point")
	if env := text(t, ctx, `[data-testid=envelope]`); !strings.Contains(env, "Dynamo 0.9 KV router") || !strings.Contains(env, "round-robin") || !strings.Contains(env, "3×H200 · measured") {
		t.Fatalf("envelope sentence = %q, want it to name the routers and the hardware the curves were measured on", env)
	}
	// Dynamo's 3,143 ms at 180 would squash every other curve: it is drawn
	// as an arrow at the top of a y axis that stops at twice the SLO.
	if clipped, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById('baseline-chart').dataset.clipped`)); !strings.Contains(clipped, "180:3143") {
		t.Fatalf("clipped points %q, want Dynamo's 3143 ms at 180", clipped)
	}
	waitJS(t, ctx, `document.querySelectorAll('[data-testid=worker-row]').length === 3`, 5*time.Second, "the workers panel does not list 3 workers")

	// Let the charts draw a few seconds with the marks, then keep a picture.
	time.Sleep(4 * time.Second)
	screenshot(t, ctx, "single-1920x1080.png", false)
	checkBoardFits(t, ctx)
	checkLaptopWidths(t, ctx)

	// A tile's label opens its definition with a tap, and it stays open
	// while the tiles are redrawn under it; a tap elsewhere closes it.
	clickRedrawn(t, ctx, `[data-tile=ttft-p95] h3 .term`)
	const defOpen = `document.getElementById('def-ttft-p95').matches(':popover-open') && /Time to first token/.test(document.getElementById('def-ttft-p95').innerText)`
	waitJS(t, ctx, defOpen, 2*time.Second, "tapping the First token p95 label does not show its definition")
	time.Sleep(2500 * time.Millisecond) // two redraws of the tiles
	waitJS(t, ctx, defOpen, time.Second, "the definition closed when the tiles were redrawn")
	screenshot(t, ctx, "definition-1920x1080.png", false)
	if err := chromedp.Do(ctx, chromedp.MouseClickXY(5, 1070)); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, `!document.getElementById('def-ttft-p95').matches(':popover-open')`, 2*time.Second, "a tap elsewhere does not close the definition")
	// A tap the tiles' redraw falls within: pressed on one label, released
	// on the label that replaced it. The redraw is done here by hand, as
	// htmx's swap does it (the section replaced by a new one), so the
	// press and the redraw cannot miss each other.
	tapAcrossRedraw(t, ctx, `[data-tile=ttft-p95] h3 .term`, `const old = document.getElementById('tiles'); old.replaceWith(old.cloneNode(true));`)
	waitJS(t, ctx, defOpen, 2*time.Second, "a tap on the First token p95 label during a redraw of the tiles does not show its definition")
	if err := chromedp.Do(ctx, chromedp.MouseClickXY(5, 1070)); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, `!document.getElementById('def-ttft-p95').matches(':popover-open')`, 2*time.Second, "a tap elsewhere does not close the definition")

	// 7. Opening a conversation shows its turns with worker and timings.
	if err := chromedp.Do(ctx, chromedp.Click(`[data-testid=conversations] summary`)); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, `document.querySelectorAll('[data-testid=conversation-link]').length > 0`, 10*time.Second, "the conversation list stayed empty")
	// The log lists a turn once it has ended, and the newest conversations
	// may have none yet ("answering turn 1/5"): open one that has.
	// The list is redrawn live: click only a link htmx has processed (it
	// keeps its internal data on the element), or the click can land on a
	// freshly swapped link and follow its plain href away from the page.
	waitJS(t, ctx, `(() => { const li = [...document.querySelectorAll('.conv-list li')].find(l => /turn [1-9]/.test(l.textContent) && !/answering turn 1\//.test(l.textContent));
		const a = li && li.querySelector('[data-testid=conversation-link]');
		if (!a || !a['htmx-internal-data']) return false;
		a.click();
		return true; })()`, 10*time.Second, "no conversation in the list has an ended turn")
	// A first turn's TTFT of 10 s or more, on a loaded machine, reads "10.2 s".
	const turnShown = `(() => { const t = document.querySelector('[data-testid=conversation-detail] [data-testid=turn]');
		return !!t && /worker sim-\d/.test(t.textContent) && /TTFT (\d+ ms|\d+\.\d s)/.test(t.textContent); })()`
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if ok, _ := chromedp.Run(ctx, chromedp.Evaluate[bool](turnShown)); ok {
			break
		}
		if time.Now().After(deadline) {
			shown, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`location.pathname + ': ' + (document.getElementById('conversation') || document.body).innerText.slice(0, 400)`))
			t.Fatalf("after 10 s the conversation shows no turn with its worker and TTFT; it shows %q", shown)
		}
	}

	// The replay shows a second at 120 conversations with every figure
	// drawn, as at 60: the window the fault begins must not be the first
	// to settle since the last mode switch.
	waitJS(t, ctx, `document.querySelector('[data-tile=tops]').dataset.settling === 'false'`, 90*time.Second, "the throughput tile never settled at 120 conversations")

	// A fault set from the page survives a reload: the selector shows it
	// and the workers panel names it. (After the conversation, which a
	// fault's failed turns would otherwise lead the list with.)
	setFault := func(v string) {
		t.Helper()
		js := `(() => { const s = document.querySelector('[data-testid=fault]'); s.value = '` + v + `'; s.dispatchEvent(new Event('change', {bubbles: true})); return true; })()`
		if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](js)); err != nil {
			t.Fatal(err)
		}
	}
	setFault("503:10")
	waitJS(t, ctx, `/503/.test(document.getElementById('notice').textContent)`, 5*time.Second, "injecting a fault says nothing")
	// The answer stays while the open conversation list is fetched again
	// (every 5 s): a read is not a change, and it once wiped the notice.
	time.Sleep(6 * time.Second)
	if n := text(t, ctx, "#notice"); !strings.Contains(n, "503") {
		t.Fatalf("6 s after injecting a fault the notice reads %q; the conversation list's refresh wiped the operator's answer", n)
	}
	if err := chromedp.Do(ctx, chromedp.Reload(), chromedp.WaitVisible(`[data-testid=fault]`)); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, `document.querySelector('[data-testid=fault]').value === '503:10' && !!document.querySelector('[data-testid=fault-on]') && document.querySelector('[data-testid=fault-on]').offsetHeight > 0 && /10% HTTP 503/.test(document.querySelector('[data-testid=fault-on]').textContent)`,
		5*time.Second, "after a reload the fault in force is not shown in the selector and the workers panel")
	setFault("none")
	waitJS(t, ctx, `!document.querySelector('[data-testid=fault-on]')`, 5*time.Second, "the fault notice stays after faults are turned off")

	// A phone: the same page, one column.
	if err := chromedp.Do(ctx,
		chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile),
		chromedp.Navigate(d.URL),
		chromedp.WaitVisible(`[data-testid=ttft-p50]`),
		chromedp.Sleep(3*time.Second),
	); err != nil {
		t.Fatal(err)
	}
	// No panel is clipped: with the stale banner shown, every panel's box
	// lies within the phone's width (the page scrolls down, never across).
	const clipped = `(() => { document.querySelector('header').insertAdjacentHTML('beforeend', '<div class="stale test-banner">Live data is stale: reconnecting…</div>');
		const out = [];
		for (const e of document.querySelectorAll('header, .controls, .tiles, .tile, .chart, .side > *, .workers-panel, details')) {
			const r = e.getBoundingClientRect();
			if (r.width > 0 && (r.left < -1 || r.right > window.innerWidth + 1)) out.push((e.className || e.tagName) + ' ' + Math.round(r.left) + '..' + Math.round(r.right));
		}
		return out.join(', '); })()`
	if out, _ := chromedp.Run(ctx, chromedp.Evaluate[string](clipped)); out != "" {
		t.Errorf("on a 390 px phone these panels are clipped: %s", out)
	}
	wide, _ := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > 391`))
	if wide {
		t.Errorf("the page is wider than a 390 px phone")
	}
	// The controls take no more rows than they did before the row was
	// made to fit 1920 px: four.
	if rows, err := chromedp.Run(ctx, chromedp.Evaluate[int](controlsRows)); err != nil || rows > 4 {
		t.Errorf("on a 390 px phone the controls take %d rows (%v); want at most 4", rows, err)
	}
	screenshot(t, ctx, "single-390x844.png", true)

	// Reset caches reaches every simulated worker and says so.
	clickRedrawn(t, ctx, `[data-testid=reset]`)
	waitJS(t, ctx, `document.getElementById('notice').textContent.startsWith('Caches reset on 3 workers')`, 10*time.Second, "the reset did not report 3 workers")
	// and the line goes by itself, the chart's mark keeping the reset.
	waitJS(t, ctx, `document.getElementById('notice').textContent === ''`, 15*time.Second, "the reset's notice stayed past 15 s")

	replaySession(t, ctx, d)
}

// replaySession opens this session's recording from the Recordings page and
// plays it on the charts: issue 6's "a recorded session replays".
func replaySession(t *testing.T, ctx context.Context, d *Demo) {
	t.Helper()
	flushCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := d.FlushRecording(flushCtx); err != nil {
		t.Fatal(err)
	}
	row := fmt.Sprintf(`[data-testid=recording-row][data-id="%d"]`, d.Recording)
	if err := chromedp.Do(ctx,
		chromedp.EmulateViewport(1920, 1080),
		chromedp.Navigate(d.URL),
		chromedp.WaitVisible(`[data-testid=recordings-link]`),
		chromedp.Click(`[data-testid=recordings-link]`),
		chromedp.WaitVisible(row),
	); err != nil {
		t.Fatal(err)
	}
	if n, _ := strconv.Atoi(text(t, ctx, row+` [data-testid=recording-frames]`)); n < 10 {
		t.Fatalf("the session is listed with %d frames; it has run for more than 10 s", n)
	}
	if err := chromedp.Do(ctx, chromedp.Click(row+` [data-testid=recording-open]`)); err != nil {
		t.Fatal(err)
	}

	// The charts draw the recorded points up to the playhead, at the end.
	waitJS(t, ctx, `Number(document.body.dataset.frameCount) >= 10 && Number(document.getElementById('ttft-chart').dataset.points) >= 10 && !!document.querySelector('#ttft-chart canvas')`,
		10*time.Second, "the replay drew no recorded points")
	end := playheadT(t, ctx)
	if mode := text(t, ctx, `#mode-name`); mode != "KV-aware" {
		t.Fatalf("the mode at the end of the recording is %q, want KV-aware", mode)
	}

	// Issue 19: the tiles and the baseline chart are the live page's at the
	// playhead's second, and follow it to another concurrency: the last
	// second with TTFT figures before the slider went to 120, then the last
	// at 120 (the cache reset at the end begins a window with none).
	before, at120 := replayIndex(t, ctx, "p.target !== 120"), replayIndex(t, ctx, "p.target === 120")
	seen := map[string]replayView{}
	for _, at := range []struct {
		name  string
		index int
	}{{"before the slider moved", before}, {"at 120 conversations", at120}} {
		scrub(t, ctx, at.index)
		v := replayed(t, ctx)
		if !ttftText.MatchString(v.TTFT) || !strings.HasPrefix(v.TTFTBase, "base ") || v.Tops == "—" || v.Tops == "" {
			t.Errorf("%s the tiles show TTFT p95 %q (%q), throughput %q; want figures and the stored curve's", at.name, v.TTFT, v.TTFTBase, v.Tops)
		}
		if v.Curves != "round_robin,kv" || v.LiveX == "" || v.LiveY == "" || v.LiveY == "undefined" || !strings.HasPrefix(v.BaseName, "Compared with: ") {
			t.Errorf("%s the baseline chart has curves %q, point (%s, %s), caption %q; want both stored curves, the point and the set's name", at.name, v.Curves, v.LiveX, v.LiveY, v.BaseName)
		}
		seen[at.name] = v
	}
	a, b := seen["before the slider moved"], seen["at 120 conversations"]
	if a.LiveX == b.LiveX || a.Compare == b.Compare || a.TTFTBase == b.TTFTBase || !strings.Contains(b.Compare, "at 120 conversations") {
		t.Errorf("the replay shows the same at two concurrencies: point x %s and %s, tiles %q (%s) and %q (%s)", a.LiveX, b.LiveX, a.Compare, a.TTFTBase, b.Compare, b.TTFTBase)
	}

	// Scrubbing to the start moves the playhead and the mode back.
	scrub(t, ctx, 0)
	start := playheadT(t, ctx)
	if start > end-9 {
		t.Fatalf("the playhead went from %d to %d after scrubbing to the start", end, start)
	}
	if mode := text(t, ctx, `#mode-name`); mode != "Round-robin" {
		t.Fatalf("the mode at the start of the recording is %q, want Round-robin", mode)
	}
	waitJS(t, ctx, `document.getElementById('ttft-chart').dataset.points === '1'`, time.Second, "at the first frame the charts show more than one point")

	// At 16x the recording plays in 1/16 of its length (at 4x it would
	// take four times as long), and stops at its end.
	if err := chromedp.Do(ctx, chromedp.Click(`[data-testid=speed-16]`), chromedp.Click(`[data-testid=play]`)); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	want := time.Duration(end-start) * time.Second / 16
	waitJS(t, ctx, `document.querySelector('[data-testid=play]').dataset.playing === 'false'`, 10*time.Second, "the player did not stop at the end")
	if took := time.Since(began); took < want*8/10 || took > want+time.Second {
		t.Fatalf("%d recorded seconds played in %s at 16x; want about %s", end-start, took, want)
	}
	if got := playheadT(t, ctx); got != end {
		t.Fatalf("the player stopped at %d, want the end %d", got, end)
	}
	// The replay fits a 1080p screen as the live page does; the picture is
	// of the second at 120 conversations, which has every tile.
	scrub(t, ctx, at120)
	replayed(t, ctx)
	checkBoardFits(t, ctx)
	time.Sleep(500 * time.Millisecond)
	screenshot(t, ctx, "replay-1920x1080.png", false)
}

// ttftText is a TTFT tile's figure: "372 ms", or "10.2 s" on a loaded machine.
var ttftText = regexp.MustCompile(`^(\d+ ms|\d+\.\d s)$`)

// scrub moves the replay's playhead to frame i, as dragging the timeline does.
func scrub(t *testing.T, ctx context.Context, i int) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => {
		const s = document.querySelector('[data-testid=timeline]');
		s.value = "`+strconv.Itoa(i)+`";
		s.dispatchEvent(new Event('input', { bubbles: true }));
		return true;
	})()`)); err != nil {
		t.Fatal(err)
	}
}

// replayIndex is the timeline position of the last recorded second whose
// point p matches cond and has a TTFT p95.
func replayIndex(t *testing.T, ctx context.Context, cond string) int {
	t.Helper()
	i, err := chromedp.Run(ctx, chromedp.Evaluate[int](`fetch(document.body.dataset.frames).then((r) => r.json()).then((rec) => {
		const points = rec.frames.filter((f) => f.kind === 'snapshot' && f.body && f.body.points && f.body.points.length).map((f) => f.body.points[0]).sort((a, b) => a.t - b.t);
		let at = -1;
		points.forEach((p, i) => { if (`+cond+` && p.ttft_p95 != null && (p.tops || 0) > 0) at = i; });
		return at;
	})`, chromedp.EvalAwaitPromise))
	if err != nil || i < 0 {
		t.Fatalf("no recorded second where %s has a TTFT p95 and a throughput (%v)", cond, err)
	}
	return i
}

// replayView is what the replay shows at the playhead.
type replayView struct {
	TTFT, TTFTBase, Tops, Compare  string
	Curves, LiveX, LiveY, BaseName string
}

// replayed waits for the tiles of the playhead's second and reads them and
// the baseline chart.
func replayed(t *testing.T, ctx context.Context) replayView {
	t.Helper()
	waitJS(t, ctx, `document.body.dataset.panelsSeq === document.querySelector('[data-testid=playhead]').dataset.seq`, 5*time.Second, "the tiles of the playhead's second never came")
	js, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(() => {
		const txt = (id) => { const e = document.querySelector('[data-testid=' + id + ']'); return e ? e.innerText : ''; };
		const b = document.getElementById('baseline-chart').dataset;
		return JSON.stringify({ TTFT: txt('ttft-p95'), TTFTBase: txt('ttft-p95-baseline'), Tops: txt('tops'), Compare: txt('compare'),
			Curves: b.curves || '', LiveX: b.liveX || '', LiveY: b.liveY || '', BaseName: txt('baseline-name') });
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	var v replayView
	if err := json.Unmarshal([]byte(js), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func playheadT(t *testing.T, ctx context.Context) int64 {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('[data-testid=playhead]').dataset.t || ''`))
	if err != nil {
		t.Fatal(err)
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("playhead time %q: %v", s, err)
	}
	return v
}

// checkBoardFits checks that the charts and panels fit a 1080p projector in
// fullscreen (1920x1080), also with the stale and blindness banners shown,
// and a browser window (1920x960); that on the projector the whole page fits
// with no scrollbar, the Conversations and How it works bars included, also
// with a fault's line above the workers (before, the tour's bar or that
// line took it 27-29 px past 1080); that with a banner in that window the
// page may scroll below the workers panel but the baseline chart stays
// readable (before, it squeezed to fit: 134 px with both banners, a plot 34
// px high, and under the tour's caption as little with the stale one); and
// leaves the page at 1920x1080 with the banners as they were.
func checkBoardFits(t *testing.T, ctx context.Context) {
	t.Helper()
	// The page's own banners are redrawn by every frame, so the test adds
	// copies styled the same: none, the stale one, or both; with both, a
	// control's notice (a cache reset's, the longest a success writes) and
	// a fault's line above the workers too, which fault adds alone.
	const banners = `(n, fault) => { document.querySelectorAll('.test-banner').forEach((e) => e.remove());
		const html = ['<div class="stale test-banner">Live data is stale: reconnecting…</div>',
			'<div class="blind test-banner">KV routing is blind: predicted 0 cached tokens in 30 s while the workers reported 120000; the router tokenizes differently from the engine</div>'];
		document.querySelector('header').insertAdjacentHTML('beforeend', html.slice(0, n).join(''));
		const notice = document.getElementById('notice');
		if (notice) notice.textContent = n >= 2 ? 'Caches reset on 6 workers; index and window cleared.' : '';
		const workers = document.getElementById('workers-panel');
		if ((n >= 2 || fault) && workers && !document.querySelector('[data-testid=fault-on]')) workers.insertAdjacentHTML('beforebegin', '<p class="fault-on test-banner">Injected 10% HTTP 503 on every worker</p>');
		window.dispatchEvent(new Event('resize')); return true; }`
	// layout names the bottom of each block, for a failure to say what grew.
	const layout = `(() => { const b = (s) => { const e = document.querySelector(s); return e ? Math.round(e.getBoundingClientRect().bottom) : -1; };
		return 'header ' + b('header') + ', controls ' + b('.controls') + ', tiles ' + b('.tiles') + ', charts ' + b('.charts') +
			', side ' + b('.side') + ', workers ' + b('.workers-panel') + ', board ' + b('.board') + ', page ' + document.scrollingElement.scrollHeight + ', window ' + window.innerHeight +
			', baseline chart ' + document.getElementById('baseline-chart').dataset.height + ' px'; })()`
	for _, size := range []struct {
		name    string
		h       int64
		banners int
		fault   bool
		fits    bool
		// page: the whole page fits, with no scrollbar.
		page bool
	}{
		{"fullscreen 1920x1080", 1080, 0, false, true, true},
		{"fullscreen 1920x1080 with a fault's line", 1080, 0, true, true, true},
		{"fullscreen 1920x1080 with every banner", 1080, 2, true, true, false},
		{"browser window 1920x960", 960, 0, false, true, false},
		{"browser window 1920x960, reconnecting", 960, 1, false, false, false},
		{"browser window 1920x960 with every banner", 960, 2, true, false, false},
	} {
		if err := chromedp.Do(ctx, chromedp.EmulateViewport(1920, size.h)); err != nil {
			t.Fatal(err)
		}
		if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(`+banners+`)(`+strconv.Itoa(size.banners)+`, `+strconv.FormatBool(size.fault)+`)`)); err != nil {
			t.Fatal(err)
		}
		// The page fits its charts again at a resize, and at each frame
		// (charts.js, fitBaseline), which brings a real banner: the
		// resize stands in for that frame.
		// On a busy host the resize's fit may land a frame late (CI once
		// read the page 2 px too tall with the chart still at its height
		// before the fault's line): look from 700 ms on, for up to 3 s
		// more, three frames.
		time.Sleep(700 * time.Millisecond)
		var fits, page bool
		var base int
		for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(250 * time.Millisecond) {
			fits, _ = chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector('.board').getBoundingClientRect().bottom <= window.innerHeight`))
			page, _ = chromedp.Run(ctx, chromedp.Evaluate[bool](`document.scrollingElement.scrollHeight <= window.innerHeight`))
			// 150 px leave the baseline's plot about 50 px: its curves apart.
			base, _ = chromedp.Run(ctx, chromedp.Evaluate[int](`Number(document.getElementById('baseline-chart').dataset.height)`))
			if ((!size.fits || fits) && (!size.page || page) && base >= 150) || time.Now().After(deadline) {
				break
			}
		}
		if (size.fits && !fits) || (size.page && !page) || base < 150 {
			where, _ := chromedp.Run(ctx, chromedp.Evaluate[string](layout))
			t.Errorf("%s: the charts and panels (or, on the projector, the whole page) do not fit without scrolling, or the baseline chart is under 150 px (%s)", size.name, where)
			screenshot(t, ctx, "overflow-"+strings.ReplaceAll(size.name, " ", "-")+".png", false)
		}
	}
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1920, 1080)); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(`+banners+`)(0, false)`)); err != nil {
		t.Fatal(err)
	}
}

// controlsRows is the number of rows the controls take: Start/Stop, the
// slider, the policies, Reset caches and the fault select, leaving out the
// notice and a viewer's token form, which have rows of their own.
const controlsRows = `(() => { const rows = [];
	for (const e of document.querySelectorAll('.controls > *')) {
		if (e.id === 'notice' || e.classList.contains('viewer')) continue;
		const r = e.getBoundingClientRect();
		if (!r.width) continue;
		const row = rows.find((x) => r.top < x.bottom && r.bottom > x.top);
		if (row) { row.top = Math.min(row.top, r.top); row.bottom = Math.max(row.bottom, r.bottom); } else rows.push({ top: r.top, bottom: r.bottom });
	}
	return rows.length; })()`

// widestRows is controlsRows with the select sel names showing each of its
// options in turn, as wide as the policy or fault it shows: the most rows
// any of them takes. The value is set and put back within one evaluation,
// with no event, so the demo does not change.
func widestRows(sel string) string {
	return `(() => { const s = document.querySelector('` + sel + `'); if (!s) return 0;
		const was = s.value; let most = 0;
		for (const o of s.options) { s.value = o.value; most = Math.max(most, ` + controlsRows + `); }
		s.value = was; return most; })()`
}

// checkLaptopWidths checks that the page never scrolls sideways and the
// workers table, its figures filled in, stays within its panel: in a
// 1280x720 window, the same less a classic scrollbar (1265 px), 1366x768,
// 1440x900 and 1920x1080. Before, the single view's table, which adds each
// worker's KV event stream, was 622 px wide in a panel of 392 px at 1280
// (the page 1,482 px wide), 421 at 1366 and 605 at 1920; the A/B view's
// 505 px in 474 at 1280, the page 3 px too wide. The controls take one row
// at 1920, whichever policy or fault is chosen, and two on a laptop: in the
// single view at 1920 the fault select went alone to a second row, which
// pushed everything under it down a row's height. It leaves the window at
// 1920x1080.
func checkLaptopWidths(t *testing.T, ctx context.Context) {
	t.Helper()
	waitJS(t, ctx, `[...document.querySelectorAll('[data-testid=worker-row]')].every((r) => (r.textContent.match(/%/g) || []).length >= 3)`,
		30*time.Second, "the workers panel's hit rates and shares never filled in")
	const across = `(() => {
		const out = [], w = document.documentElement.clientWidth;
		if (document.scrollingElement.scrollWidth > w) out.push('the page is ' + document.scrollingElement.scrollWidth + ' px wide');
		const p = document.getElementById('workers-panel'), cs = getComputedStyle(p);
		const inner = p.getBoundingClientRect().right - parseFloat(cs.paddingRight) - parseFloat(cs.borderRightWidth);
		const right = p.querySelector('table').getBoundingClientRect().right;
		if (right > inner + 0.5) out.push('the workers table ends at ' + Math.round(right) + ' px, its panel at ' + Math.round(inner));
		return out.join(', '); })()`
	for _, size := range [][2]int64{{1280, 720}, {1265, 720}, {1366, 768}, {1440, 900}, {1920, 1080}} {
		if err := chromedp.Do(ctx, chromedp.EmulateViewport(size[0], size[1])); err != nil {
			t.Fatal(err)
		}
		time.Sleep(1200 * time.Millisecond) // a frame redraws the panel
		name := fmt.Sprintf("%dx%d", size[0], size[1])
		if out, err := chromedp.Run(ctx, chromedp.Evaluate[string](across)); err != nil || out != "" {
			screenshot(t, ctx, "sideways-"+name+".png", false)
			t.Errorf("at %s %s (%v)", name, out, err)
		}
		want := 2
		if size[0] == 1920 {
			want = 1
		}
		rows, err := chromedp.Run(ctx, chromedp.Evaluate[int](controlsRows))
		policies, _ := chromedp.Run(ctx, chromedp.Evaluate[int](widestRows(`[data-testid=mode-more]`)))
		faults, _ := chromedp.Run(ctx, chromedp.Evaluate[int](widestRows(`[data-testid=fault]`)))
		if err != nil || rows > want || policies > want || faults > want {
			screenshot(t, ctx, "controls-rows-"+name+".png", false)
			t.Errorf("at %s the controls take %d rows, %d with the widest policy in the menu, %d with the widest fault (%v); want at most %d", name, rows, policies, faults, err, want)
		}
	}
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1920, 1080)); err != nil {
		t.Fatal(err)
	}
}

// checkShortWindow checks a laptop's window, 1366x768, where the board
// cannot fit: the page scrolls instead of squeezing the plots flat, so
// every time chart keeps a plot of at least 160 px and the baseline chart
// at least 220 (before, the baseline's plot was a line 20 px high and its
// axis read only "0"); and a wide window just too short, 1920x820.
func checkShortWindow(t *testing.T, ctx context.Context) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1366, 768)); err != nil {
		t.Fatal(err)
	}
	const heights = `(() => JSON.stringify({
		base: Number(document.getElementById('baseline-chart').dataset.height),
		charts: [...document.querySelectorAll('.charts canvas')].map((c) => Math.round(c.getBoundingClientRect().height)),
	}))()`
	var got struct {
		Base   int   `json:"base"`
		Charts []int `json:"charts"`
	}
	waitJS(t, ctx, `Number(document.getElementById('baseline-chart').dataset.height) >= 220`, 5*time.Second, "at 1366x768 the baseline chart is under 220 px")
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[string](heights))
	if err == nil {
		err = json.Unmarshal([]byte(raw), &got)
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Charts) == 0 {
		t.Fatal("at 1366x768 the page draws no time chart")
	}
	for i, h := range got.Charts {
		if h < 160 {
			t.Errorf("at 1366x768 time chart %d is %d px high; want at least 160", i, h)
		}
	}
	screenshot(t, ctx, "ab-1366x768.png", false)
	// Scrolling down the page, as a laptop's user must, leaves the chart
	// as it is: its height is measured from the page's top, not the
	// window's.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { window.scrollTo(0, 500); return true; })()`)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2500 * time.Millisecond) // two frames redraw the chart
	if h, _ := chromedp.Run(ctx, chromedp.Evaluate[int](`Number(document.getElementById('baseline-chart').dataset.height)`)); h != got.Base {
		t.Errorf("at 1366x768, scrolled 500 px down, the baseline chart is %d px high; it was %d at the top", h, got.Base)
	}
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { window.scrollTo(0, 0); return true; })()`)); err != nil {
		t.Fatal(err)
	}
	// A wide window too short for the side column (1920x820: a 1080p
	// screen less a taskbar, the browser's bars and a sharing toolbar)
	// keeps the baseline chart readable too, below the fold if it must:
	// before, it squeezed the chart to 100-124 px, a plot of 25 px or less
	// whose axis read only "0". From 1920x1080 (where the whole page fits,
	// the chart 250-280 px as the rows above it allow) the height must
	// change.
	const baseHeight = `Number(document.getElementById('baseline-chart').dataset.height)`
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1920, 1080)); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, baseHeight+` >= 150 && document.scrollingElement.scrollHeight <= window.innerHeight`, 5*time.Second, "at 1920x1080 the page does not fit, or the baseline chart is under 150 px")
	full, err := chromedp.Run(ctx, chromedp.Evaluate[int](baseHeight))
	if err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1920, 820)); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, baseHeight+` !== `+strconv.Itoa(full), 5*time.Second, fmt.Sprintf("at 1920x820 the baseline chart kept its height of 1920x1080, %d px", full))
	if h, _ := chromedp.Run(ctx, chromedp.Evaluate[int](baseHeight)); h < 220 {
		screenshot(t, ctx, "ab-1920x820.png", false)
		t.Errorf("at 1920x820 the baseline chart is %d px high; want at least 220", h)
	}
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1920, 1080)); err != nil {
		t.Fatal(err)
	}
}

// TestBrowserTimeAxisOfOnePoint feeds the dashboard a frame with a single
// point, as the first frame of a warm-up can be: the time charts span the
// minute before it. uPlot widens a single point's range to 1,000 days,
// whose ticks at midnight read 00:00:00 on every label. Then ten minutes
// of points on a laptop's window (checkTenMinutesOnALaptop).
func TestBrowserTimeAxisOfOnePoint(t *testing.T) {
	t.Parallel() // see TestBrowserReconnects
	d := startDemo(t, func(cfg *Config) { cfg.AB, cfg.NoStart = nil, true })
	ctx := newBrowser(t, 1920, 1080)
	if err := chromedp.Do(ctx, chromedp.Navigate(d.URL), chromedp.WaitVisible(`#ttft-chart .uplot`)); err != nil {
		t.Fatal(err)
	}
	// The frame goes through the page's own handler, as the websocket's do:
	// a history frame of one point, in the single view, at a second no
	// real frame has (each chart's last time says it was drawn).
	const feed = `(async () => {
		const t = Math.floor(Date.now() / 1000) + 3600;
		const frame = { type: "history", mode: "kv", mode_text: "KV-aware", marks: [],
			points: [{ t, ttft_p50: 300, ttft_p95: 500, tpot_p50: 25, tpot_p95: 30, tops: 2000, error_pct: 0, shed_per_sec: 0 }] };
		document.body.dispatchEvent(new CustomEvent("htmx:wsBeforeMessage", { detail: { message: JSON.stringify(frame) }, cancelable: true }));
		// uPlot draws in a microtask; a websocket frame is a task, so none
		// can land between the feed and the read.
		for (let i = 0; i < 5; i++) await null;
		return ["ttft-chart", "tpot-chart", "tops-chart", "errors-chart"].map((id) => {
			const e = document.getElementById(id);
			return id + " " + e.dataset.points + " " + (e.dataset.lastT === String(t) ? "fed" : "not fed") + " " + e.querySelector(".uplot").dataset.xSpan;
		}).join(", ");
	})()`
	got, err := chromedp.Run(ctx, chromedp.Evaluate[string](feed, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	if want := "ttft-chart 1 fed 60, tpot-chart 1 fed 60, tops-chart 1 fed 60, errors-chart 1 fed 60"; got != want {
		t.Fatalf("charts after one point (id, points, whether the fed point is the last, seconds spanned): %s; want %s", got, want)
	}
	checkTenMinutesOnALaptop(t, ctx)
}

// checkTenMinutesOnALaptop feeds the charts ten minutes of points and three
// marks in a 1280x720 window, where each time chart's plot is about 290 px
// wide and 110 high, with the top lines in the label rows: every chart's
// time axis shows at least four times (it showed two, 5 min apart, or one
// label for a recording's five minutes at 1366), and no data line, SLO
// line or other mark's line runs through a mark's label (at 1280 px "→
// 120" was cut by both lanes' p95).
func checkTenMinutesOnALaptop(t *testing.T, ctx context.Context) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 720)); err != nil {
		t.Fatal(err)
	}
	defer chromedp.Do(ctx, chromedp.EmulateViewport(1920, 1080))
	time.Sleep(500 * time.Millisecond) // the charts fit the new width
	// The lines' colours (charts.js): p50, p95, the SLO, throughput, errors
	// and shed. The marks' labels are grey or pink, the warm-up's shading
	// and the plate dark.
	const feed = `(async () => {
		const t0 = Math.floor(Date.now() / 1000) + 7200, points = [];
		for (let i = 0; i < 600; i++) points.push({ t: t0 + i, ttft_p50: 640, ttft_p95: 600, tpot_p50: 64, tpot_p95: 60, tops: 2000, error_pct: 4, shed_per_sec: 3.6 });
		const marks = [{ t: t0 + 200, kind: "concurrency", label: "→ 120" }, { t: t0 + 215, kind: "fault", label: "fault: 10% HTTP 503" }, { t: t0 + 420, kind: "reset", label: "reset" }];
		const frame = { type: "history", mode: "kv", mode_text: "KV-aware", marks, points };
		document.body.dispatchEvent(new CustomEvent("htmx:wsBeforeMessage", { detail: { message: JSON.stringify(frame) }, cancelable: true }));
		for (let i = 0; i < 5; i++) await null;
		const lines = [[0x4f, 0xc3, 0xf7], [0xff, 0xb7, 0x4d], [0xef, 0x53, 0x50], [0x81, 0xc7, 0x84], [0xce, 0x93, 0xd8]];
		return JSON.stringify(["ttft-chart", "tpot-chart", "tops-chart", "errors-chart"].map((id) => {
			const root = document.querySelector('#' + id + ' .uplot'), canvas = root.querySelector('canvas');
			const g = canvas.getContext('2d'), k = canvas.width / canvas.getBoundingClientRect().width;
			const labels = JSON.parse(root.dataset.labels || '[]').map(([row, l, r, top, bottom]) => {
				const img = g.getImageData(Math.round(l * k), Math.round(top * k), Math.max(1, Math.round((r - l) * k)), Math.max(1, Math.round((bottom - top) * k))).data;
				let crossed = 0;
				for (let i = 0; i < img.length; i += 4) {
					if (lines.some(([R, G, B]) => Math.abs(img[i] - R) + Math.abs(img[i + 1] - G) + Math.abs(img[i + 2] - B) < 60)) crossed++;
				}
				return { row, crossed };
			});
			return { id, ticks: root.dataset.xTicks || '', labels };
		}));
	})()`
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[string](feed, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	var charts []struct {
		ID     string
		Ticks  string
		Labels []struct{ Row, Crossed int }
	}
	if err := json.Unmarshal([]byte(raw), &charts); err != nil {
		t.Fatalf("%v in %s", err, raw)
	}
	bad := false
	for _, c := range charts {
		if n := len(strings.Fields(c.Ticks)); n < 4 {
			t.Errorf("at 1280x720 the %s's time axis over ten minutes reads %q: %d times, want at least 4", c.ID, c.Ticks, n)
			bad = true
		}
		if len(c.Labels) < 3 {
			t.Errorf("at 1280x720 the %s drew %d of its 3 marks' labels", c.ID, len(c.Labels))
			bad = true
		}
		for _, l := range c.Labels {
			if l.Crossed > 0 {
				t.Errorf("at 1280x720 a line runs through a mark's label on the %s (row %d, %d pixels of a line's colour)", c.ID, l.Row, l.Crossed)
				bad = true
			}
		}
	}
	if bad {
		screenshot(t, ctx, "ten-minutes-1280x720.png", false)
	}
}

// checkCompressed checks what the page costs a phone on booth Wi-Fi: its
// scripts came compressed, and a websocket to kvlens negotiates
// permessage-deflate, as Chromium asks for it.
func checkCompressed(t *testing.T, ctx context.Context) {
	t.Helper()
	js := `(async () => {
		const scripts = performance.getEntriesByType('resource').filter(e => e.name.includes('/static/') && e.name.endsWith('.js'));
		const sizes = scripts.map(e => e.name.replace(/.*\/static\//, '') + ' ' + e.encodedBodySize + '/' + e.decodedBodySize);
		const compressed = scripts.length > 0 && scripts.every(e => e.encodedBodySize > 0 && e.encodedBodySize < 0.6 * e.decodedBodySize);
		const ext = await new Promise(ok => {
			const ws = new WebSocket(location.origin.replace(/^http/, 'ws') + '/ws');
			ws.onopen = () => { ok(ws.extensions); ws.close(); };
			ws.onerror = () => ok('no connection');
		});
		return JSON.stringify({ compressed, sizes, ext });
	})()`
	got, err := chromedp.Run(ctx, chromedp.Evaluate[string](js, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Compressed bool
		Sizes      []string
		Ext        string
	}
	if err := json.Unmarshal([]byte(got), &r); err != nil {
		t.Fatal(err)
	}
	if !r.Compressed {
		t.Errorf("the page's scripts came uncompressed (bytes on the wire / decoded): %v", r.Sizes)
	}
	if !strings.HasPrefix(r.Ext, "permessage-deflate") {
		t.Errorf("the websocket negotiated %q, want permessage-deflate", r.Ext)
	}
	t.Logf("scripts on the wire / decoded: %v; websocket: %s", r.Sizes, r.Ext)
}
