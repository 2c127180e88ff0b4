//go:build browser

package demo

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/gorilla/websocket"

	"github.com/kvlens/kvlens/web"
)

// startDemoAt starts the demo on addr ("127.0.0.1:0" for any port), so
// that a test can stop it and start another where browsers expect it.
func startDemoAt(t *testing.T, addr string) *Demo {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Addr = addr
	cfg.Load.MaxTokens = 80
	cfg.Load.StartRate = 0
	cfg.Dashboard.Access = web.Access{Token: operatorToken}
	d, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func closeDemo(t *testing.T, d *Demo) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	d.Close(ctx)
}

// framesFlow waits until the TTFT chart has a point newer than any it had.
func framesFlow(t *testing.T, ctx context.Context, within time.Duration, describe string) {
	t.Helper()
	var before string
	before, _ = chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById('ttft-chart').dataset.lastT || ''`))
	waitJS(t, ctx, `(document.getElementById('ttft-chart').dataset.lastT || '') > '`+before+`' && document.getElementById('stale').hidden`, within, describe)
}

// TestBrowserReconnects restarts kvlens under an open dashboard: after a
// short restart the page picks up where it was; after a long one it
// reloads, so that no control shows stale state; and after a close code the
// websocket extension would not retry on (1001, as a proxy sends it) the page
// waits for kvlens and reloads.
func TestBrowserReconnects(t *testing.T) {
	// This test mostly waits through its outages, and the single view's,
	// tour's, QR code's, time axis's and the focus tests' demos are a
	// fleet each: these run side by side once the others, whose A/B
	// fleets keep the 2 cores busy, are done, three at a time (make
	// browser's -parallel 3; go test's default is GOMAXPROCS).
	t.Parallel()
	d := startDemoAt(t, "127.0.0.1:0")
	addr := strings.TrimPrefix(d.URL, "http://")
	if host, port, _ := net.SplitHostPort(addr); host == "localhost" {
		addr = net.JoinHostPort("127.0.0.1", port)
	}
	ctx := newBrowser(t, 1280, 800)
	// A page reloads after an outage longer than reconnect.js's
	// staleReloadMs, 30 s; here 12 s, longer than a short restart with the
	// reconnects' backoff, so that the test waits 16 s rather than 45.
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: "window.kvlensStaleReloadMs = 12000;"}); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate("http://"+addr), chromedp.WaitVisible(`[data-testid=ttft-p50]`)); err != nil {
		t.Fatal(err)
	}
	framesFlow(t, ctx, 10*time.Second, "no frame arrived after the first load")
	mark := func() {
		if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.kvlensTestMark = true`)); err != nil {
			t.Fatal(err)
		}
	}
	reloaded := func() bool {
		v, _ := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.kvlensTestMark !== true`))
		return v
	}

	// A restart of a few seconds (SIGTERM closes sockets with 1012).
	mark()
	closeDemo(t, d)
	waitJS(t, ctx, `!document.getElementById('stale').hidden && /Live data stopped \d+ s ago/.test(document.getElementById('stale').textContent)`, 6*time.Second, "the banner does not say the data stopped")
	time.Sleep(3 * time.Second)
	d = startDemoAt(t, addr)
	framesFlow(t, ctx, 10*time.Second, "the page did not reconnect within 10 s of a short restart")
	if reloaded() {
		t.Error("the page reloaded after a short restart; it should pick up where it was")
	}

	// An outage longer than a page may show stale numbers (staleReloadMs):
	// the page keeps trying and reloads once kvlens is back.
	mark()
	closeDemo(t, d)
	time.Sleep(16 * time.Second)
	d = startDemoAt(t, addr)
	defer func() { closeDemo(t, d) }()
	deadline := time.Now().Add(20 * time.Second)
	for !reloaded() {
		if time.Now().After(deadline) {
			t.Fatal("the page did not reload after kvlens was away for 16 s, past its 12 s staleReloadMs")
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := chromedp.Do(ctx, chromedp.WaitVisible(`[data-testid=ttft-p50]`)); err != nil {
		t.Fatal(err)
	}
	framesFlow(t, ctx, 15*time.Second, "the reloaded page gets no frames")

	// A proxy in front of kvlens closes the socket with 1001 (going away).
	proxy, cut := goingAwayProxy(t, "http://"+addr)
	if err := chromedp.Do(ctx, chromedp.Navigate(proxy), chromedp.WaitVisible(`[data-testid=ttft-p50]`)); err != nil {
		t.Fatal(err)
	}
	framesFlow(t, ctx, 10*time.Second, "no frame arrived through the proxy")
	mark()
	cut()
	deadline = time.Now().Add(15 * time.Second)
	for !reloaded() {
		if time.Now().After(deadline) {
			t.Fatal("after a 1001 close the page neither reconnected nor reloaded")
		}
		time.Sleep(200 * time.Millisecond)
	}
	framesFlow(t, ctx, 15*time.Second, "the page gets no frames after a 1001 close")
}

// goingAwayProxy serves kvlens through a reverse proxy whose websockets
// cut() closes with 1001, as a load balancer does when it drains. It
// returns the proxy's URL.
func goingAwayProxy(t *testing.T, backend string) (string, func()) {
	t.Helper()
	target, _ := url.Parse(backend)
	rp := httputil.NewSingleHostReverseProxy(target)
	up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	conns := make(chan *websocket.Conn, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/ws" {
			rp.ServeHTTP(w, r)
			return
		}
		h := http.Header{"Origin": {backend}}
		back, _, err := websocket.DefaultDialer.Dial("ws://"+target.Host+"/ws", h)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		front, err := up.Upgrade(w, r, nil)
		if err != nil {
			back.Close()
			return
		}
		conns <- front
		go func() { // kvlens → browser
			defer front.Close()
			for {
				kind, msg, err := back.ReadMessage()
				if err != nil || front.WriteMessage(kind, msg) != nil {
					return
				}
			}
		}()
		go func() { // browser → kvlens
			defer back.Close()
			for {
				kind, msg, err := front.ReadMessage()
				if err != nil || back.WriteMessage(kind, msg) != nil {
					return
				}
			}
		}()
	}))
	t.Cleanup(srv.Close)
	cut := func() {
		for {
			select {
			case c := <-conns:
				c.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseGoingAway, "draining"), time.Now().Add(time.Second))
				c.Close()
			default:
				return
			}
		}
	}
	return srv.URL, cut
}
