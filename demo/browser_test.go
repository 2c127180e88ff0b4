//go:build browser

package demo

import (
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
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
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(width, height),
		// The machine has no network: stop Chromium calling home.
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-dev-shm-usage", true),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(func() { cancelTimeout(); cancel(); cancelAlloc() })
	return ctx
}

func startDemo(t *testing.T) *Demo {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	// The default timing with short answers (80 tokens, about 2 s a turn),
	// so that TPOT and throughput fill in within seconds.
	cfg.Load.MaxTokens = 80
	cfg.Load.StartRate = 0
	d, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		d.Close(ctx)
	})
	return d
}

func TestBrowserDashboardUpdatesAndSliderDrivesLoad(t *testing.T) {
	d := startDemo(t)
	ctx := newBrowser(t, 1600, 1000)

	// 1. The page loads and the websocket fills the TTFT tile.
	if err := chromedp.Do(ctx,
		chromedp.Navigate(d.URL),
		chromedp.WaitVisible(`[data-testid=ttft-p50]`),
	); err != nil {
		t.Fatal(err)
	}
	mode, err := chromedp.Run(ctx, chromedp.Text(`[data-testid=mode]`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(mode, "Round-robin") {
		t.Fatalf("mode = %q, want the live policy in plain words", mode)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		ttft, err := chromedp.Run(ctx, chromedp.Text(`[data-testid=ttft-p50]`))
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(ttft, " ms") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("TTFT tile still %q after 15 s", ttft)
		}
		time.Sleep(250 * time.Millisecond)
	}

	// 2. Moving the slider changes the server's concurrency target.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => {
		const s = document.querySelector('[data-testid=concurrency-slider]');
		s.value = "120";
		s.dispatchEvent(new Event('input', { bubbles: true }));
		return true;
	})()`)); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(10 * time.Second)
	for d.Gen.Snapshot().Target != 120 {
		if time.Now().After(deadline) {
			t.Fatalf("server target = %d after moving the slider to 120", d.Gen.Snapshot().Target)
		}
		time.Sleep(50 * time.Millisecond)
	}
	shown, err := chromedp.Run(ctx, chromedp.Text(`[data-testid=concurrency-target]`))
	if err != nil {
		t.Fatal(err)
	}
	if shown != "120" {
		t.Fatalf("the page shows target %q, want 120", shown)
	}

	// 3. Let the chart draw a few seconds, then keep a picture of it.
	if err := chromedp.Do(ctx, chromedp.Sleep(6*time.Second)); err != nil {
		t.Fatal(err)
	}
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // 100 means PNG
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(*screenshots, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(*screenshots, "dashboard.png")
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}
