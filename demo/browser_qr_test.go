//go:build browser

package demo

import (
	"bytes"
	"image/png"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/kvlens/kvlens/internal/qrread"
)

// TestBrowserQRCodeReadsAsDrawn reads the header's QR code from the pixels
// Chromium draws at 1920×1080 (72 CSS pixels, the page's size for it), with
// ZXing's decoder: what a phone pointed at the booth's screen decodes.
func TestBrowserQRCodeReadsAsDrawn(t *testing.T) {
	t.Parallel() // see TestBrowserReconnects
	const public = "http://192.0.2.7:8080/"
	d := startDemo(t, func(cfg *Config) { cfg.Dashboard.PublicURL = public })
	ctx := newBrowser(t, 1920, 1080)
	if err := chromedp.Do(ctx,
		chromedp.EmulateViewport(1920, 1080),
		chromedp.Navigate(d.URL),
		chromedp.WaitVisible(`[data-testid=qr] img`),
	); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, `(i => i.complete && i.naturalWidth > 0)(document.querySelector('[data-testid=qr] img'))`, 10*time.Second, "the QR code image never loaded")
	shot, err := chromedp.Run(ctx, chromedp.Screenshot(`[data-testid=qr] img`))
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatal(err)
	}
	got, err := qrread.Decode(img)
	t.Logf("the QR code as drawn, %d×%d pixels, reads %q", img.Bounds().Dx(), img.Bounds().Dy(), got)
	if err != nil || got != public {
		t.Fatalf("the QR code as drawn reads %q (%v), want %q", got, err, public)
	}
}
