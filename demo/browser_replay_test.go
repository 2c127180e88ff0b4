//go:build browser

package demo

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// panelsDelay is how long the test's proxy holds each request for a
// second's tiles: a replay watched from a laptop across the hall, or from a
// booth machine busy with its fleets. At 16x the player moves every 62.5
// ms, well within it.
const panelsDelay = 150 * time.Millisecond

// slowPanels is a proxy to the demo at target that answers every request
// for a second's tiles (/recordings/{id}/frames/{seq}/panels) panelsDelay
// late.
func slowPanels(t *testing.T, target string) string {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	proxy.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) {
		if r.Context().Err() == nil { // not a fetch the page gave up on
			t.Logf("proxy: %s: %v", r.URL.Path, err)
		}
		w.WriteHeader(http.StatusBadGateway)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/panels") {
			select {
			case <-time.After(panelsDelay):
			case <-r.Context().Done():
				return
			}
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// checkReplay opens the recording of TestBrowserWarmStart's demo (the
// warm-up `kvlens` runs, then about 10 s of steady traffic) as a visitor
// would:
//   - the Recordings page fits a 390 px phone without scrolling sideways,
//     as it fits a laptop and a 1080p screen;
//   - the warm-up's seconds replay as the live page showed them, warming
//     up, not as seconds an older kvlens recorded without tiles;
//   - at 16x, with each second's tiles coming 150 ms after they are asked
//     for, the headline keeps changing as the playhead moves (the player
//     cancelled each fetch when the next second's began, so at 16x none
//     came until the end and the headline stood still).
//
// It was a test of its own, whose demo spent 20 s warming up again.
func checkReplay(t *testing.T, ctx context.Context, d *Demo) {
	flushCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := d.FlushRecording(flushCtx); err != nil {
		t.Fatal(err)
	}
	site := slowPanels(t, d.URL)

	// The Recordings page fits each screen: nothing wider than the window.
	row := fmt.Sprintf(`[data-testid=recording-row][data-id="%d"]`, d.Recording)
	for _, size := range []struct{ w, h int64 }{{390, 844}, {1366, 768}, {1920, 1080}} {
		if err := chromedp.Do(ctx,
			chromedp.EmulateViewport(size.w, size.h),
			chromedp.Navigate(site+"/recordings"),
			chromedp.WaitVisible(row),
		); err != nil {
			t.Fatal(err)
		}
		wide, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(() => {
			const w = document.scrollingElement.scrollWidth;
			return w <= window.innerWidth ? '' : w + ' px wide in a window of ' + window.innerWidth; })()`))
		if err != nil {
			t.Fatal(err)
		}
		if wide != "" {
			t.Errorf("at %dx%d the Recordings page scrolls sideways: %s", size.w, size.h, wide)
		}
		screenshot(t, ctx, fmt.Sprintf("recordings-%dx%d.png", size.w, size.h), false)
	}

	// The first second is the warm-up's: its headline and tiles are the
	// live page's then.
	if err := chromedp.Do(ctx,
		chromedp.Navigate(fmt.Sprintf("%s/recordings/%d", site, d.Recording)),
		chromedp.WaitVisible(`[data-testid=timeline]`),
	); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, `Number(document.body.dataset.frameCount) >= 15`, 10*time.Second, "the replay loaded fewer than 15 frames")
	frames, err := chromedp.Run(ctx, chromedp.Evaluate[int](`Number(document.body.dataset.frameCount)`))
	if err != nil {
		t.Fatal(err)
	}
	scrub(t, ctx, 0)
	v := replayed(t, ctx)
	headline := text(t, ctx, `[data-testid=headline]`)
	if !strings.Contains(headline, "Warming up") || strings.Contains(v.Compare+v.BaseName, "older kvlens") || v.TTFT != "—" {
		t.Errorf("the warm-up's first second replays with the headline %q, tiles %q (TTFT p95 %q), baseline %q; want it warming up, with no figure", headline, v.Compare, v.TTFT, v.BaseName)
	}
	screenshot(t, ctx, "replay-warm-up-1920x1080.png", false)

	// At 16x the headline follows the playhead: the page notes each text
	// it shows while playing.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => {
		window.headlines = [];
		const play = document.querySelector('[data-testid=play]');
		window.headlineWatch = setInterval(() => {
			const h = document.getElementById('headline'), txt = h ? h.innerText : '';
			if (play.dataset.playing === 'true' && window.headlines[window.headlines.length - 1] !== txt) window.headlines.push(txt);
		}, 20);
		return true; })()`)); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Click(`[data-testid=speed-16]`), chromedp.Click(`[data-testid=play]`)); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	waitJS(t, ctx, `document.querySelector('[data-testid=play]').dataset.playing === 'false'`, time.Duration(frames)*time.Second/16+10*time.Second, "the player did not stop at the end")
	played := time.Since(began)
	seen, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`(() => { clearInterval(window.headlineWatch); return window.headlines; })()`))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d frames played at 16x in %s; the headline read, in turn:\n%s", frames, played.Round(10*time.Millisecond), strings.Join(seen, "\n"))
	// A second's tiles come at most about every 150 ms, 6 a second; a
	// busy machine answers slower (here 9 texts in 5.5 s). One every 2 s
	// is slow but moving; the old player showed the first second's until
	// the end.
	if want := max(3, int(played/(2*time.Second))); len(seen) < want {
		t.Errorf("in %s of play at 16x the headline showed %d texts; want at least %d", played.Round(10*time.Millisecond), len(seen), want)
	}
	// Stopped at the end, the tiles are the last second's.
	replayed(t, ctx)
	screenshot(t, ctx, "replay-16x-end-1920x1080.png", false)
}
