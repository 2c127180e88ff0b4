//go:build browser

package demo

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/kvlens/kvlens/tour"
)

// tourSpeed compresses the built-in tour for TestBrowserTour: its 60 to
// 75 s steps last about 3 s, the loop about 19 s.
const tourSpeed = 25

// tourBar is what a visitor reads in the tour's bar at one moment.
type tourBar struct {
	Step     string `json:"step"`
	Paused   string `json:"paused"`
	Caption  string `json:"caption"`
	Position string `json:"position"`
	// Buttons counts the bar's Pause and Resume buttons a visitor can see.
	Buttons int `json:"buttons"`
	// Lines is how many lines the caption takes.
	Lines int `json:"lines"`
}

const readTour = `(() => {
	const t = document.getElementById('tour');
	if (!t) return null;
	const q = (s) => { const e = t.querySelector(s); return e ? e.innerText.trim() : ''; };
	return JSON.stringify({ step: t.dataset.step, paused: t.dataset.paused, caption: q('[data-testid=tour-caption]'),
		position: q('[data-testid=tour-position]'),
		buttons: [...t.querySelectorAll('button')].filter((b) => b.offsetParent !== null).length,
		lines: (() => { const c = t.querySelector('[data-testid=tour-caption]'); return Math.round(c.getBoundingClientRect().height / parseFloat(getComputedStyle(c).lineHeight)); })() });
})()`

func readBar(t *testing.T, ctx context.Context) tourBar {
	t.Helper()
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[*string](readTour))
	if err != nil || raw == nil {
		t.Fatalf("read the tour's bar: %v (no bar: %v)", err, raw == nil)
	}
	var b tourBar
	if err := json.Unmarshal([]byte(*raw), &b); err != nil {
		t.Fatalf("read the tour's bar: %v in %s", err, *raw)
	}
	return b
}

// TestBrowserTour plays the built-in tour at 25 times its speed, as a booth
// visitor sees it: every step's caption appears in order with "step N of 7
// · N s left", each caption on one line, and the loop starts again; the
// board still fits 1080p and 960p; a visitor sees no Pause or Resume. Then the operator moves the
// slider: the bar says the tour is paused, Resume shows, and pressing it
// plays on.
func TestBrowserTour(t *testing.T) {
	t.Parallel() // see TestBrowserReconnects
	script := tour.Builtin()
	d := startDemo(t, func(cfg *Config) {
		cfg.Dashboard.Tour, cfg.Dashboard.TourSpeed = script, tourSpeed
	})
	ctx := newBrowser(t, 1920, 1080)
	if err := chromedp.Do(ctx,
		chromedp.EmulateViewport(1920, 1080),
		chromedp.Navigate(d.URL),
		chromedp.WaitVisible(`[data-testid=tour-caption]`),
	); err != nil {
		t.Fatal(err)
	}

	// Watch a full loop: each step's caption, in order, then step 1 again.
	want := len(script.Steps)
	seen := map[int]string{}
	var order []int
	position := regexp.MustCompile(`^step ([1-9]) of ` + fmt.Sprint(want) + ` · \d+ s left$`)
	limit := time.Now().Add(2*script.Length()/tourSpeed + 20*time.Second)
	var (
		behind time.Time // since when the slider has not shown the tour's concurrency
		was    string    // that concurrency
		unlike time.Time // since when the fault select has not named the fault in force
	)
	for {
		// The slider and its target follow the tour's changes within the
		// next ticks, as they follow another browser's.
		shown, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('[data-testid=concurrency-slider]').value + "/" + document.querySelector('[data-testid=concurrency-target]').textContent`))
		if err != nil {
			t.Fatal(err)
		}
		n := d.Gen.Snapshot().Target
		if target := fmt.Sprintf("%d/%d", n, n); shown == target {
			behind = time.Time{}
		} else if behind.IsZero() || target != was {
			behind, was = time.Now(), target
		} else if time.Since(behind) > 3*time.Second {
			screenshot(t, ctx, "tour-slider-behind.png", false)
			t.Fatalf("the slider and target read %s for %s while the tour runs %s", shown, time.Since(behind).Round(time.Second), target)
		}
		// So do the fault select and the workers panel's notice of the
		// fault in force: the select names the notice's fault, or "no
		// faults" without one.
		faults, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(() => {
			const s = document.querySelector('[data-testid=fault]'), on = document.querySelector('[data-testid=fault-on]');
			return (on ? on.textContent.trim() : '') + '|' + s.options[s.selectedIndex].text; })()`))
		if err != nil {
			t.Fatal(err)
		}
		notice, chosen, _ := strings.Cut(faults, "|")
		if (notice == "") == (chosen == "no faults") && (notice == "" || strings.Contains(notice, chosen)) {
			unlike = time.Time{}
		} else if unlike.IsZero() {
			unlike = time.Now()
		} else if time.Since(unlike) > 3*time.Second {
			screenshot(t, ctx, "tour-fault-select-behind.png", false)
			t.Fatalf("the fault select reads %q for %s while the workers panel says %q", chosen, time.Since(unlike).Round(time.Second), notice)
		}
		b := readBar(t, ctx)
		if b.Paused != "false" {
			t.Fatalf("the tour paused by itself: %+v", b)
		}
		if b.Buttons != 0 {
			t.Fatalf("a visitor sees %d of the tour's buttons", b.Buttons)
		}
		// One line at 1920 px: the board below is measured to fit with it.
		if b.Lines != 1 {
			screenshot(t, ctx, "tour-caption-lines.png", false)
			t.Fatalf("step %s's caption takes %d lines at 1920 px: %q", b.Step, b.Lines, b.Caption)
		}
		m := position.FindStringSubmatch(b.Position)
		if m == nil || m[1] != b.Step {
			t.Fatalf("the bar says %q in step %s; want \"step %s of %d · N s left\"", b.Position, b.Step, b.Step, want)
		}
		var step int
		fmt.Sscan(b.Step, &step)
		if len(order) == 0 || order[len(order)-1] != step {
			order = append(order, step)
			seen[step] = b.Caption
			t.Logf("step %d: %s", step, b.Caption)
		}
		// A full loop: every step seen, and the first after the last,
		// wherever the page joined (the order is checked below).
		if n := len(order); len(seen) == want && n >= want && slices.Contains(order[1:], 1) {
			break
		}
		if time.Now().After(limit) {
			t.Fatalf("after %s the page showed steps %v; want a full loop of %d", 2*script.Length()/tourSpeed+20*time.Second, order, want)
		}
		time.Sleep(150 * time.Millisecond)
	}
	for i, st := range script.Steps {
		if seen[i+1] != st.Caption {
			t.Errorf("step %d showed %q, want %q", i+1, seen[i+1], st.Caption)
		}
	}
	// Steps are seen in order: each the one after the last, around the loop
	// (a step seen first is wherever the page joined the tour).
	for i := 1; i < len(order); i++ {
		if order[i] != order[i-1]%want+1 {
			t.Fatalf("the steps came in the order %v", order)
		}
	}
	var st struct {
		Tour struct {
			Loops int `json:"loops"`
		} `json:"tour"`
	}
	if js, err := chromedp.Run(ctx, chromedp.Evaluate[string](`fetch('/api/state').then(r => r.text())`, chromedp.EvalAwaitPromise)); err != nil || json.Unmarshal([]byte(js), &st) != nil || st.Tour.Loops < 1 {
		t.Fatalf("/api/state's tour: %+v (%v); want a loop completed", st, err)
	}
	checkBoardFits(t, ctx)
	checkMarkLabels(t, ctx)

	// The operator takes over: moving the slider pauses the tour.
	enterToken(t, ctx)
	waitJS(t, ctx, `(() => { const b = document.querySelector('[data-testid=tour-pause]'); return !!b && !b.disabled && b.offsetParent !== null; })()`, 10*time.Second, "the operator's page shows no Pause")
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { const s = document.querySelector('[data-testid=concurrency-slider]'); s.value = "100"; s.dispatchEvent(new Event('input', { bubbles: true })); return true; })()`)); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, `document.getElementById('tour').dataset.paused === 'true'`, 10*time.Second, "the tour did not pause when the operator moved the slider")
	if c := strings.Join(strings.Fields(text(t, ctx, `[data-testid=tour-caption]`)), " "); c != "Tour paused — operator in control · Resume" {
		t.Fatalf("the paused bar says %q", c)
	}
	// It stays paused, at the operator's concurrency, past a step's length.
	time.Sleep(3 * time.Second)
	if b := readBar(t, ctx); b.Paused != "true" || d.Gen.Snapshot().Target != 100 {
		t.Fatalf("3 s after the operator's change: %+v, target %d; want paused at 100", b, d.Gen.Snapshot().Target)
	}
	screenshot(t, ctx, "tour-paused-1920x1080.png", false)

	// Resume plays on.
	waitJS(t, ctx, `(() => { const b = document.querySelector('[data-testid=tour-resume]'); return !!b && !b.disabled; })()`, 5*time.Second, "Resume is not enabled for the operator")
	// Clicked in one step: the bar is redrawn every second, and a node
	// found then clicked may be gone between the two under load.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { document.querySelector('[data-testid=tour-resume]').click(); return true; })()`)); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, `document.getElementById('tour').dataset.paused === 'false'`, 5*time.Second, "Resume did not resume the tour")

	// A visitor's phone: the caption takes the bar's width, nothing is
	// wider than the screen, and the first screen still holds the headline
	// and the key tiles, the caption after them.
	if err := chromedp.Do(ctx,
		chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile),
		chromedp.Navigate(d.URL),
		chromedp.WaitVisible(`[data-testid=tour-caption]`),
		chromedp.Sleep(2*time.Second),
	); err != nil {
		t.Fatal(err)
	}
	if wide, _ := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > 391`)); wide {
		t.Errorf("the page with the tour is wider than a 390 px phone")
	}
	if w, _ := chromedp.Run(ctx, chromedp.Evaluate[float64](`document.querySelector('[data-testid=tour-caption]').getBoundingClientRect().width`)); w < 300 {
		t.Errorf("the caption is %.0f px wide on a 390 px phone; want the bar's width", w)
	}
	for _, sel := range []string{"[data-testid=headline]", "[data-tile=ttft-p95]", "[data-tile=kv-hit]", "[data-tile=ttft-p50]", "[data-tile=tpot-p95]"} {
		bottom, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`document.querySelector('`+sel+`').getBoundingClientRect().bottom`))
		if err != nil || bottom > 844 {
			t.Errorf("%s ends at %.0f px (%v), below a 390x844 phone's first screen", sel, bottom, err)
		}
	}
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { document.getElementById('tour').scrollIntoView(); return true; })()`)); err != nil {
		t.Fatal(err)
	}
	screenshot(t, ctx, "tour-390x844.png", false)
}

// tourShotAfter, when set, makes TestBrowserTourShot run: the docs'
// picture of a tour step, this long into the built-in tour at its own pace.
var tourShotAfter = flag.Duration("tour-shot-after", 0, "run TestBrowserTourShot: a screenshot of the built-in tour this long after start (docs/tour-1920x1080.png), such as 3m48s for step 3's settled figures, its rates the last (after the warm-up, which takes 20-25 s here)")

// TestBrowserTourShot takes the docs' picture of the tour: the built-in
// tour at its own pace, seen from a visitor's browser at 1920x1080.
func TestBrowserTourShot(t *testing.T) {
	if *tourShotAfter <= 0 {
		t.Skip("the docs' tour picture is taken with -tour-shot-after, such as -tour-shot-after 3m48s")
	}
	// As `kvlens --tour` runs it: with the default warm-up, which the
	// tour's first step waits for.
	d := startDemo(t, func(cfg *Config) {
		cfg.Dashboard.Tour = tour.Builtin()
		cfg.Warm, cfg.WarmSpeed = DefaultWarm, DefaultWarmSpeed
	})
	time.Sleep(*tourShotAfter - 10*time.Second)
	ctx := newBrowser(t, 1920, 1080)
	if err := chromedp.Do(ctx,
		chromedp.EmulateViewport(1920, 1080),
		chromedp.Navigate(d.URL),
		chromedp.WaitVisible(`[data-testid=tour-caption]`),
		chromedp.Sleep(10*time.Second),
	); err != nil {
		t.Fatal(err)
	}
	t.Logf("tour: %+v; headline: %s", readBar(t, ctx), text(t, ctx, `[data-testid=headline]`))
	checkBoardFits(t, ctx)
	screenshot(t, ctx, "tour-1920x1080.png", false)
}

// checkMarkLabels reads where each time chart drew its marks' labels (the
// tour leaves a mark every few seconds at its compressed speed, several
// near the plot's right edge, where a label goes on its line's left) and
// fails if two on one row overlap: their text would be drawn over each
// other.
func checkMarkLabels(t *testing.T, ctx context.Context) {
	t.Helper()
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[string](`JSON.stringify([...document.querySelectorAll('.charts .uplot')].map((u) => [u.parentElement.id, JSON.parse(u.dataset.labels || 'null')]))`))
	if err != nil {
		t.Fatalf("read the charts' mark labels: %v", err)
	}
	var charts [][2]json.RawMessage
	if err := json.Unmarshal([]byte(raw), &charts); err != nil || len(charts) == 0 {
		t.Fatalf("read the charts' mark labels: %v in %s", err, raw)
	}
	for _, c := range charts {
		var id string
		var labels [][3]int // row, left, right (CSS px)
		json.Unmarshal(c[0], &id)
		if err := json.Unmarshal(c[1], &labels); err != nil || len(labels) == 0 {
			t.Fatalf("chart %s drew no mark labels after a loop of the tour (%s)", id, c[1])
		}
		for i, a := range labels {
			for _, b := range labels[:i] {
				if a[0] == b[0] && a[1] < b[2] && b[1] < a[2] {
					screenshot(t, ctx, "mark-labels-overlap.png", false)
					t.Fatalf("chart %s drew two mark labels over each other on row %d: %d–%d and %d–%d px", id, a[0], b[1], b[2], a[1], a[2])
				}
			}
		}
		t.Logf("chart %s: %d mark labels, none over another", id, len(labels))
	}
}
