package web

import (
	"bytes"
	"context"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/gorilla/websocket"

	"github.com/kvlens/kvlens/access"
	"github.com/kvlens/kvlens/baselines"
	"github.com/kvlens/kvlens/components"
	"github.com/kvlens/kvlens/dynamo"
	"github.com/kvlens/kvlens/internal/qrread"
	"github.com/kvlens/kvlens/loadgen"
	"github.com/kvlens/kvlens/router"
)

// fakeLoad is a Loadgen whose state the test sets and reads.
type fakeLoad struct {
	mu      sync.Mutex
	stopped bool // the zero fakeLoad runs, as a dashboard's load does
	target  int
	snap    loadgen.Snapshot
	resets  int
	convs   []loadgen.ConversationLog
}

func (f *fakeLoad) Start() { f.mu.Lock(); f.stopped = false; f.mu.Unlock() }
func (f *fakeLoad) Stop()  { f.mu.Lock(); f.stopped = true; f.mu.Unlock() }
func (f *fakeLoad) SetConcurrency(n int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.target = n
	return nil
}
func (f *fakeLoad) Snapshot() loadgen.Snapshot {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.snap
	s.Running, s.Target, s.Time = !f.stopped, f.target, time.Now()
	return s
}
func (f *fakeLoad) Target() int { f.mu.Lock(); defer f.mu.Unlock(); return f.target }

func (f *fakeLoad) BeginWindow() { f.mu.Lock(); f.resets++; f.mu.Unlock() }
func (f *fakeLoad) Conversations() []loadgen.ConversationSummary {
	var out []loadgen.ConversationSummary
	for _, c := range f.convs {
		out = append(out, loadgen.ConversationSummary{ID: c.ID, Title: c.Title, Turns: len(c.Turns), Planned: c.Planned, Done: c.Done, Asking: c.Asking != nil})
	}
	return out
}
func (f *fakeLoad) Conversation(id uint64) (loadgen.ConversationLog, bool) {
	for _, c := range f.convs {
		if c.ID == id {
			return c, true
		}
	}
	return loadgen.ConversationLog{}, false
}

// fakeRouter is a Router whose state the test sets and reads.
type fakeRouter struct {
	mu       sync.Mutex
	policy   string
	resets   int
	shed     int64
	workers  []router.WorkerState
	decision *router.Decision
}

func newFakeRouter(policy string) *fakeRouter { return &fakeRouter{policy: policy} }

func (r *fakeRouter) PolicyName() string { r.mu.Lock(); defer r.mu.Unlock(); return r.policy }
func (r *fakeRouter) SwitchPolicy(name string) error {
	if _, err := router.NewPolicy(name); err != nil {
		return err
	}
	r.mu.Lock()
	r.policy = name
	r.mu.Unlock()
	return nil
}
func (r *fakeRouter) Reset(context.Context) map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.resets++
	out := map[string]string{}
	for _, w := range r.workers {
		out[w.Name] = "ok"
	}
	return out
}
func (r *fakeRouter) WorkerStates() []router.WorkerState { return r.workers }
func (r *fakeRouter) Counts() router.Counts              { return router.Counts{Shed: r.shed} }
func (r *fakeRouter) LastDecision() (router.Decision, bool) {
	if r.decision == nil {
		return router.Decision{}, false
	}
	return *r.decision, true
}

// testOptions are the demo's defaults with the seeds' averaged baseline, so
// pages and frames are as large as the real ones.
func testOptions() Options {
	sets, err := baselines.Builtin()
	if err != nil {
		panic(err)
	}
	sets[0].Sort()
	return Options{
		Workers: "3 simulated H200 workers", SliderMin: 60, SliderMax: 180, SliderStep: 20,
		SLOTTFT: 600 * time.Millisecond, SLOTPOT: 60 * time.Millisecond,
		Describe: func(s string) string { return "Plain " + s },
		Baseline: &sets[0],
		// httptest.NewRequest's requests name example.com.
		Hosts: mustHosts("example.com"),
	}
}

func mustHosts(names ...string) *access.Hosts {
	h, err := access.NewHosts(names...)
	if err != nil {
		panic(err)
	}
	return h
}

func newTestServer(t *testing.T) (*fakeLoad, *Server, *httptest.Server) {
	t.Helper()
	load := &fakeLoad{target: 60}
	load.snap.Window.TTFT = loadgen.Quantiles{Count: 10, P50: 250, P95: 580}
	s := New(load, newFakeRouter("round_robin"), testOptions())
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return load, s, ts
}

func TestPageShowsModeControlsAndTiles(t *testing.T) {
	_, _, ts := newTestServer(t)
	resp, err := http.Get(ts.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	doc, err := goquery.NewDocumentFromReader(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct{ name, sel, want string }{
		{"the routing mode is in plain words", `[data-testid=mode]`, "Routing: Plain round_robin"},
		{"the fleet is described", `[data-testid=workers]`, "3 simulated H200 workers"},
		{"the target sits beside the slider", `[data-testid=concurrency-target]`, "60"},
		{"the TTFT p50 tile shows the window's value", `[data-testid=ttft-p50]`, "250 ms"},
		{"a TPOT tile without data shows a dash", `[data-testid=tpot-p50]`, "—"},
	}
	for _, c := range checks {
		if got := strings.TrimSpace(doc.Find(c.sel).Text()); got != c.want {
			t.Errorf("%s: %s = %q, want %q", c.name, c.sel, got, c.want)
		}
	}
	slider := doc.Find(`[data-testid=concurrency-slider]`)
	for attr, want := range map[string]string{"min": "60", "max": "180", "step": "20", "value": "60", "hx-post": "/api/concurrency"} {
		if got, _ := slider.Attr(attr); got != want {
			t.Errorf("slider %s = %q, want %q", attr, got, want)
		}
	}
	if doc.Find(`script[src^="http"], link[href^="http"]`).Length() != 0 {
		t.Error("the page loads something from the network; the booth has none")
	}
}

func TestTilesColourBySLO(t *testing.T) {
	tests := []struct {
		name string
		p95  float64
		want string
	}{
		{"under 90% of the SLO is ok", 500, "ok"},
		{"from 90% of the SLO is a warning", 540, "warn"},
		{"at the SLO is bad", 600, "bad"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			load := &fakeLoad{target: 60}
			load.snap.Window = settled(loadgen.Stats{TTFT: loadgen.Quantiles{Count: 1, P50: 100, P95: tt.p95}})
			s := New(load, newFakeRouter("round_robin"), testOptions())
			var b bytes.Buffer
			components.Tiles(tilesNow(s)).Render(context.Background(), &b)
			doc, _ := goquery.NewDocumentFromReader(&b)
			tile := doc.Find(`[data-testid=ttft-p95]`).Parent()
			if !tile.HasClass(tt.want) {
				cls, _ := tile.Attr("class")
				t.Fatalf("class = %q, want %q", cls, tt.want)
			}
		})
	}
}

func TestConcurrencyControl(t *testing.T) {
	tests := []struct {
		name       string
		value      string
		wantStatus int
		wantBody   string
		wantTarget int
	}{
		{"a value on the scale is applied", "100", 200, ">100<", 100},
		{"a value above the range is refused", "400", 400, "outside 60..180", 60},
		{"a value below the range is refused", "20", 400, "outside 60..180", 60},
		{"a value between steps is refused", "70", 400, "not on the slider's steps", 60},
		{"a non-number is refused", "lots", 400, "not a whole number", 60},
		{"a missing value is refused", "", 400, "not a whole number", 60},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			load, _, ts := newTestServer(t)
			resp, err := http.PostForm(ts.URL+"/api/concurrency", url.Values{"concurrency": {tt.value}})
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.wantStatus || !strings.Contains(string(body), tt.wantBody) {
				t.Fatalf("got %d %q, want %d containing %q", resp.StatusCode, body, tt.wantStatus, tt.wantBody)
			}
			if resp.StatusCode == 400 && strings.Count(strings.TrimSpace(string(body)), "\n") != 0 {
				t.Errorf("error is not one line: %q", body)
			}
			if got := load.Snapshot().Target; got != tt.wantTarget {
				t.Fatalf("target = %d, want %d", got, tt.wantTarget)
			}
		})
	}
}

func TestStartStop(t *testing.T) {
	load, _, ts := newTestServer(t)
	for _, step := range []struct {
		path, want string
		running    bool
	}{{"/api/start", `data-running="true"`, true}, {"/api/stop", `data-running="false"`, false}} {
		resp, err := http.Post(ts.URL+step.path, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(body), step.want) || load.Snapshot().Running != step.running {
			t.Fatalf("%s: body %q, running %v", step.path, body, load.Snapshot().Running)
		}
	}
}

func wsURL(ts *httptest.Server) string { return "ws" + strings.TrimPrefix(ts.URL, "http") + "/ws" }

func TestWebsocketRefusesForeignOrigin(t *testing.T) {
	_, _, ts := newTestServer(t)
	tests := []struct {
		name   string
		origin string
		ok     bool
	}{
		{"the dashboard's own origin is accepted", ts.URL, true},
		{"a client without Origin (not a browser) is accepted", "", true},
		{"another site's page is refused", "http://evil.example", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			if tt.origin != "" {
				h.Set("Origin", tt.origin)
			}
			c, resp, err := websocket.DefaultDialer.Dial(wsURL(ts), h)
			if tt.ok != (err == nil) {
				t.Fatalf("dial err = %v", err)
			}
			if c != nil {
				c.Close()
			}
			if !tt.ok && resp.StatusCode != http.StatusForbidden {
				t.Fatalf("status = %d, want 403", resp.StatusCode)
			}
		})
	}
}

func TestWebsocketPushesHistoryThenTicks(t *testing.T) {
	load, s, ts := newTestServer(t)
	load.mu.Lock()
	load.snap.Live = 60
	// A settled window: the live point has only settled figures.
	load.snap.Window = settled(load.snap.Window)
	load.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.Hub().Run(ctx)
	c, _, err := websocket.DefaultDialer.Dial(wsURL(ts), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var got []string
	for len(got) < 4 { // hello: history + tiles; first tick: snapshot + tiles
		_, msg, err := c.ReadMessage()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(msg))
	}
	if !strings.HasPrefix(got[0], `{"type":"history"`) {
		t.Errorf("first frame = %.60s, want the history", got[0])
	}
	if !strings.Contains(got[1], `id="tiles"`) || !strings.Contains(got[1], `hx-swap-oob="true"`) {
		t.Errorf("second frame is not the out-of-band tiles fragment: %.80s", got[1])
	}
	if !strings.HasPrefix(got[2], `{"type":"snapshot","mode":"round_robin"`) || !strings.Contains(got[2], `"ttft_p95":580`) {
		t.Errorf("tick frame = %.200s", got[2])
	}
	// The baseline chart's live point: TTFT under the stored curves' keys,
	// compared with the round-robin curve; TPOT has no data, so it is absent.
	if !strings.Contains(got[2], `"live":{"c":60,"compare":"round_robin","values":{"ttft_p50_ms":250,"ttft_p95_ms":580}}`) {
		t.Errorf("tick frame lacks the live point: %s", got[2])
	}
	for _, id := range []string{`id="live-count"`, `id="workers-panel"`} {
		if !strings.Contains(got[3], id) {
			t.Errorf("the tick's HTML frame lacks %s", id)
		}
	}
}

func TestProbes(t *testing.T) {
	load := &fakeLoad{target: 60}
	opts := testOptions()
	var notReady error
	opts.Ready = func() error { return notReady }
	ts := httptest.NewServer(New(load, newFakeRouter("round_robin"), opts).Handler())
	defer ts.Close()
	get := func(path string) (int, string) {
		resp, err := http.Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get("/healthz"); code != 200 {
		t.Fatalf("/healthz = %d", code)
	}
	if code, _ := get("/readyz"); code != 200 {
		t.Fatalf("/readyz = %d while ready", code)
	}
	notReady = io.ErrUnexpectedEOF
	if code, body := get("/readyz"); code != 503 || !strings.Contains(body, "not ready") {
		t.Fatalf("/readyz = %d %q while not ready, want 503 with the reason", code, body)
	}
}

func TestViewerCannotChangeAnything(t *testing.T) {
	load := &fakeLoad{target: 60, stopped: true}
	opts := testOptions()
	opts.Access = Access{Token: "s3cret"}
	srv := New(load, newFakeRouter("round_robin"), opts)
	// Requests here come from a visitor's phone, not from this machine.
	remote := func(r *http.Request) *http.Request { r.RemoteAddr = "192.0.2.7:50000"; return r }
	do := func(r *http.Request) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		srv.Handler().ServeHTTP(w, remote(r))
		return w
	}
	form := func(path, body string) *http.Request {
		r := httptest.NewRequest("POST", path, strings.NewReader(body))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		return r
	}
	for _, path := range []string{"/api/start", "/api/stop", "/api/concurrency"} {
		if w := do(form(path, "concurrency=120")); w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "read-only") {
			t.Errorf("viewer POST %s = %d %q, want 403 read-only", path, w.Code, w.Body.String())
		}
	}
	if s := load.Snapshot(); s.Target != 60 || s.Running {
		t.Fatalf("a viewer changed the load: %+v", s)
	}
	// The page renders its controls disabled, with a way in.
	doc, _ := goquery.NewDocumentFromReader(do(httptest.NewRequest("GET", "/", nil)).Body)
	if _, ok := doc.Find(`[data-testid=concurrency-slider]`).Attr("disabled"); !ok {
		t.Error("the slider is enabled for a viewer")
	}
	if _, ok := doc.Find(`[data-testid=start]`).Attr("disabled"); !ok {
		t.Error("Start is enabled for a viewer")
	}
	if doc.Find(`[data-testid=viewer-notice] input[name=token]`).Length() != 1 {
		t.Error("a viewer has no field to enter the operator token")
	}

	// A wrong token is refused; the right one sets a cookie that unlocks.
	if w := do(form("/api/login", "token=guess")); w.Code != http.StatusForbidden {
		t.Fatalf("wrong token: %d", w.Code)
	}
	w := do(form("/api/login", "token=s3cret"))
	cookies := w.Result().Cookies()
	if w.Code != http.StatusNoContent || len(cookies) != 1 || strings.Contains(cookies[0].Value, "s3cret") {
		t.Fatalf("login: %d, cookies %v (the cookie must not carry the token)", w.Code, cookies)
	}
	r := form("/api/concurrency", "concurrency=120")
	r.AddCookie(cookies[0])
	if w := do(r); w.Code != 200 || load.Snapshot().Target != 120 {
		t.Fatalf("operator with cookie: %d, target %d", w.Code, load.Snapshot().Target)
	}
	forged := form("/api/stop", "")
	forged.AddCookie(&http.Cookie{Name: access.CookieName, Value: "forged"})
	if w := do(forged); w.Code != http.StatusForbidden {
		t.Fatalf("a forged cookie got %d", w.Code)
	}
}

func TestLocalhostIsAlwaysOperator(t *testing.T) {
	load := &fakeLoad{target: 60}
	opts := testOptions()
	opts.Access = Access{Token: "s3cret"}
	ts := httptest.NewServer(New(load, newFakeRouter("round_robin"), opts).Handler())
	defer ts.Close()
	resp, err := http.Post(ts.URL+"/api/start", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || !load.Snapshot().Running {
		t.Fatalf("a request from this machine got %d", resp.StatusCode)
	}
}

// TestQRCode reads the QR code back with ZXing's decoder (gozxing), as a
// visitor's phone would, for addresses of each shape the booth may have.
func TestQRCode(t *testing.T) {
	tests := []struct {
		name, url string
	}{
		{"a LAN address", "http://192.0.2.1:8080/"},
		{"an IPv6 address in brackets", "http://[2001:db8::20]:8080/"},
		{"a long https name with a path", "https://kvlens-booth-hall-b.example.conference.internal:8443/demo/"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := testOptions()
			opts.PublicURL = tt.url
			srv := New(&fakeLoad{}, newFakeRouter("round_robin"), opts)
			w := httptest.NewRecorder()
			srv.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/qr.png", nil))
			if w.Code != 200 || w.Header().Get("Content-Type") != "image/png" {
				t.Fatalf("/qr.png = %d %s", w.Code, w.Header().Get("Content-Type"))
			}
			img, err := png.Decode(w.Body)
			if err != nil {
				t.Fatal(err)
			}
			if got, err := qrread.Decode(img); err != nil || got != tt.url {
				t.Fatalf("the QR code reads %q (%v), want %q", got, err, tt.url)
			}
			page := httptest.NewRecorder()
			srv.Handler().ServeHTTP(page, httptest.NewRequest("GET", "/", nil))
			doc, _ := goquery.NewDocumentFromReader(page.Body)
			if href, _ := doc.Find(`[data-testid=qr]`).Attr("href"); href != tt.url {
				t.Fatalf("QR link = %q, want the public URL", href)
			}
		})
	}
}

func TestTheFaviconIsServedOnBothPaths(t *testing.T) {
	srv := New(&fakeLoad{}, newFakeRouter("kv"), testOptions())
	for _, path := range []string{"/favicon.ico", "/static/favicon.svg"} {
		w := httptest.NewRecorder()
		srv.Handler().ServeHTTP(w, httptest.NewRequest("GET", path, nil))
		if w.Code != 200 || w.Header().Get("Content-Type") != "image/svg+xml" || !strings.HasPrefix(w.Body.String(), "<svg") {
			t.Errorf("GET %s = %d %s", path, w.Code, w.Header().Get("Content-Type"))
		}
	}
	page := httptest.NewRecorder()
	srv.Handler().ServeHTTP(page, httptest.NewRequest("GET", "/", nil))
	if !strings.Contains(page.Body.String(), `<link rel="icon" href="/static/favicon.svg"`) {
		t.Error("the page links no icon")
	}
}

func TestFirstLoadIsLightAndSelfContained(t *testing.T) {
	// The booth may have no network: everything the page needs comes from
	// the binary, and the first load stays under 300 KB.
	_, _, ts := newTestServer(t)
	fetch := func(path string) int {
		resp, err := http.Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		n, _ := io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s = %d", path, resp.StatusCode)
		}
		return int(n)
	}
	resp, err := http.Get(ts.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := goquery.NewDocumentFromReader(resp.Body)
	resp.Body.Close()
	total := fetch("/")
	var assets []string
	doc.Find("script[src], link[href], img[src]").Each(func(_ int, s *goquery.Selection) {
		for _, attr := range []string{"src", "href"} {
			if v, ok := s.Attr(attr); ok {
				assets = append(assets, v)
			}
		}
	})
	if len(assets) < 5 {
		t.Fatalf("found only %d assets: %v", len(assets), assets)
	}
	for _, a := range assets {
		if !strings.HasPrefix(a, "/") || strings.HasPrefix(a, "//") {
			t.Fatalf("asset %q is not served by kvlens itself", a)
		}
		total += fetch(a)
	}
	t.Logf("first load: %d bytes over %d requests", total, len(assets)+1)
	if total > 300_000 {
		t.Fatalf("first load is %d bytes, over the 300 KB budget", total)
	}
}

func TestChangesBecomeChartMarks(t *testing.T) {
	_, s, ts := newTestServer(t)
	for _, step := range []struct {
		path string
		form url.Values
	}{
		{"/api/concurrency", url.Values{"concurrency": {"120"}}},
		{"/api/stop", nil},
		{"/api/start", nil},
	} {
		resp, err := http.PostForm(ts.URL+step.path, step.form)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	frames := s.frames()
	if !strings.Contains(string(frames[0]), `"marks":[{"t":`) {
		t.Fatalf("tick frame carries no marks: %.300s", frames[0])
	}
	for _, want := range []string{`"label":"→ 120"`, `"kind":"stop"`, `"kind":"start"`} {
		if !strings.Contains(string(frames[0]), want) {
			t.Errorf("marks lack %s", want)
		}
	}
	if again := s.frames(); strings.Contains(string(again[0]), `"marks"`) {
		t.Error("marks were pushed twice")
	}
	if hello := s.hello(); !strings.Contains(string(hello[0]), `"kind":"concurrency"`) {
		t.Error("a browser connecting later does not get the marks")
	}
}

type fakeFrontend struct{}

func (fakeFrontend) Stats() dynamo.Stats { return dynamo.Stats{OK: true, KVHitRate: 0.93, Queued: 3} }

func TestStateReportsTheDynamoFrontend(t *testing.T) {
	opts := testOptions()
	opts.Frontend = fakeFrontend{}
	ts := httptest.NewServer(New(&fakeLoad{}, newFakeRouter("kv"), opts).Handler())
	defer ts.Close()
	resp, err := http.Get(ts.URL + "/api/state")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(body), `"frontend":{"ok":true,"kv_hit_rate":0.93,"in_flight":0,"queued":3}`) {
		t.Fatalf("state = %s", body)
	}
}

func TestModeSwitch(t *testing.T) {
	tests := []struct {
		name       string
		mode       string
		wantStatus int
		wantBody   string
		wantPolicy string
	}{
		{"a known policy becomes live and the header says so", "kv", 200, `<strong id="mode-name" hx-swap-oob="true">Plain kv</strong>`, "kv"},
		{"a policy from the more menu is accepted", "least_loaded", 200, `data-active="least_loaded"`, "least_loaded"},
		{"an unknown policy is refused and nothing changes", "fastest", 400, `routing mode "fastest" is unknown`, "round_robin"},
		{"an empty policy is refused and nothing changes", "", 400, `routing mode "" is unknown`, "round_robin"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			load := &fakeLoad{target: 60}
			rt := newFakeRouter("round_robin")
			s := New(load, rt, testOptions())
			ts := httptest.NewServer(s.Handler())
			defer ts.Close()
			resp, err := http.PostForm(ts.URL+"/api/mode", url.Values{"mode": {tt.mode}})
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.wantStatus || !strings.Contains(string(body), tt.wantBody) {
				t.Fatalf("got %d %q, want %d containing %q", resp.StatusCode, body, tt.wantStatus, tt.wantBody)
			}
			if resp.StatusCode == 400 && strings.Count(strings.TrimSpace(string(body)), "\n") != 0 {
				t.Errorf("error is not one line: %q", body)
			}
			if rt.PolicyName() != tt.wantPolicy {
				t.Fatalf("policy = %s, want %s", rt.PolicyName(), tt.wantPolicy)
			}
			marks := string(s.frames()[0])
			if got := strings.Contains(marks, `"kind":"mode"`); got != (tt.wantStatus == 200) {
				t.Fatalf("mode mark recorded = %v after a %d", got, resp.StatusCode)
			}
		})
	}
}

func TestResetClearsCachesAndWindow(t *testing.T) {
	load := &fakeLoad{target: 60}
	rt := newFakeRouter("kv")
	rt.workers = []router.WorkerState{{Name: "sim-0"}, {Name: "sim-1"}}
	s := New(load, rt, testOptions())
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	resp, err := http.Post(ts.URL+"/api/reset", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "2 workers") {
		t.Fatalf("reset = %d %q", resp.StatusCode, body)
	}
	if rt.resets != 1 || load.resets != 1 {
		t.Fatalf("router resets %d, window resets %d; want 1 and 1", rt.resets, load.resets)
	}
}

func TestViewerCannotSwitchModeOrReset(t *testing.T) {
	load := &fakeLoad{target: 60}
	rt := newFakeRouter("round_robin")
	opts := testOptions()
	opts.Access = Access{Token: "s3cret", LoopbackViewer: true}
	s := New(load, rt, opts)
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	for _, c := range []struct{ path, mode string }{{"/api/mode", "kv"}, {"/api/reset", ""}} {
		resp, err := http.PostForm(ts.URL+c.path, url.Values{"mode": {c.mode}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s from a viewer on this machine = %d, want 403", c.path, resp.StatusCode)
		}
	}
	if rt.PolicyName() != "round_robin" || rt.resets != 0 || load.resets != 0 {
		t.Fatal("a viewer changed the demo")
	}
	resp, err := http.Get(ts.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := goquery.NewDocumentFromReader(resp.Body)
	resp.Body.Close()
	for _, id := range []string{"mode-kv", "mode-round_robin", "mode-more", "reset", "concurrency-slider"} {
		if _, disabled := doc.Find(`[data-testid=` + id + `]`).Attr("disabled"); !disabled {
			t.Errorf("%s is not disabled for a viewer", id)
		}
	}
}

func TestConversations(t *testing.T) {
	load := &fakeLoad{target: 60}
	// The log lists newest first: 9 (waiting for its first answer), then 7.
	load.convs = []loadgen.ConversationLog{{ID: 9, Title: "Prefix caching", Planned: 3,
		Asking: &loadgen.AskingTurn{Index: 0, Question: "Why cache prefixes?", QuestionSource: "opening", Sent: time.Now()}},
		{ID: 7, Title: "Paged attention", Planned: 5, Turns: []loadgen.TurnLog{
			{Index: 0, Question: "Explain <this>", Answer: "It pages.", TTFT: 312, TPOT: 21.5, ISL: 4000, OSL: 300, CachedTokens: 0, Worker: "sim-1"},
		}}}
	ts := httptest.NewServer(New(load, newFakeRouter("kv"), testOptions()).Handler())
	defer ts.Close()
	get := func(path string) (int, string) {
		resp, err := http.Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	tests := []struct {
		name, path string
		status     int
		want       string
	}{
		{"the list links each conversation", "/conversations", 200, `hx-get="/conversations/7"`},
		{"a turn shows its worker and timings", "/conversations/7", 200, "worker <strong>sim-1</strong> · TTFT 312 ms · TPOT 21.5 ms"},
		{"text is escaped", "/conversations/7", 200, "Explain &lt;this&gt;"},
		{"a conversation waiting for its first answer says so in the list", "/conversations", 200, "answering turn 1/3"},
		{"a conversation waiting for its first answer shows the question, not a blank pane", "/conversations/9", 200, "waiting for the answer"},
		{"the waiting question is shown", "/conversations/9", 200, "Why cache prefixes?"},
		{"an unknown conversation is a 404 with a reason", "/conversations/8", 404, "conversation 8 is not in the log"},
		{"a malformed id is a 400", "/conversations/x", 400, `conversation "x": not a number`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := get(tt.path)
			if status != tt.status || !strings.Contains(body, tt.want) {
				t.Fatalf("GET %s = %d %q, want %d containing %q", tt.path, status, body, tt.status, tt.want)
			}
		})
	}
	t.Run("a conversation with an answered turn is listed before a newer one without", func(t *testing.T) {
		_, body := get("/conversations")
		answered, waiting := strings.Index(body, `/conversations/7"`), strings.Index(body, `/conversations/9"`)
		if answered < 0 || waiting < 0 || answered > waiting {
			t.Fatalf("7 at %d, 9 at %d in %s; want 7 first", answered, waiting, body)
		}
	})
}

func TestHowItWorksShowsTheLastDecision(t *testing.T) {
	ws, err := router.ParseWorkers([]string{"a=http://a:8000", "b=http://b:8000"})
	if err != nil {
		t.Fatal(err)
	}
	// A 1,000-token prompt in blocks of 100: b caches 8 blocks, a none.
	// KVCost, in tokens: a = (0 + 1000) + 32·2 = 1064; b = (100/4 + 200) + 32·3 = 321.
	cands := []router.Candidate{
		{Worker: ws[0], InFlight: 2, Capacity: 64, ContextTokens: 500},
		{Worker: ws[1], Overlap: 8, InFlight: 3, Capacity: 64, PrefillTokens: 100, ContextTokens: 900},
	}
	for _, tt := range []struct {
		name   string
		policy string
		chosen int
		marks  []string
	}{
		{"kv chose the worker of lowest cost, and the row says both", "kv", 1, []string{"", "chosen · lowest cost"}},
		{"round-robin chose a worker that is not the cheapest, and the rows tell them apart", "round_robin", 0,
			[]string{"chosen, by Plain round_robin's rule below", "lowest cost"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rt := newFakeRouter(tt.policy)
			rt.decision = &router.Decision{Policy: tt.policy, Chosen: tt.chosen,
				Request: router.Request{Tokens: 1000, BlockSize: 100, Chain: make([]uint64, 10)}, Candidates: cands}
			opts := testOptions()
			opts.BlockSize = 100
			srv := New(&fakeLoad{}, rt, opts)
			w := httptest.NewRecorder()
			srv.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/how", nil))
			doc, _ := goquery.NewDocumentFromReader(w.Body)
			rows := doc.Find(`[data-testid=cost-example] tbody tr`)
			if rows.Length() != 2 {
				t.Fatalf("worked example has %d rows, want 2", rows.Length())
			}
			for i, want := range []string{"1064.0", "321.0"} {
				if got := rows.Eq(i).Find("td").Eq(6).Text(); got != want {
					t.Errorf("row %d cost = %q, want %s", i, got, want)
				}
				if got := rows.Eq(i).Find("td.why").Text(); got != tt.marks[i] {
					t.Errorf("row %d says %q, want %q", i, got, tt.marks[i])
				}
			}
			if chosen := doc.Find(`tr.chosen td`).First().Text(); chosen != cands[tt.chosen].Worker.Name {
				t.Errorf("highlighted = %q, want %s", chosen, cands[tt.chosen].Worker.Name)
			}
			if n := doc.Find(`[data-testid=formulas] li`).Length(); n != 5 {
				t.Errorf("%d formula lines, want 5, one per line", n)
			}
			if n := doc.Find(`[data-testid=policies] dd`).Length(); n != len(router.Policies) {
				t.Errorf("%d policies explained, want every one of %d", n, len(router.Policies))
			}
		})
	}
}

func TestWorkersPanelShowsTheDynamoFrontend(t *testing.T) {
	opts := testOptions()
	opts.Frontend = fakeFrontend{}
	s := New(&fakeLoad{}, newFakeRouter("kv"), opts)
	frame := string(s.frames()[1])
	if !strings.Contains(frame, `data-testid="dynamo-frontend"`) || !strings.Contains(frame, "KV hit 93%, 0 in flight, 3 queued") {
		t.Fatalf("workers panel lacks the frontend's figures: %s", frame)
	}
	plain := New(&fakeLoad{}, newFakeRouter("kv"), testOptions())
	if strings.Contains(string(plain.frames()[1]), "dynamo-frontend") {
		t.Fatal("the frontend line shows without a frontend")
	}
}

func TestEveryTileHasAPlainLabelAndADefinitionOneTapAway(t *testing.T) {
	ts := httptest.NewServer(New(&fakeLoad{target: 60}, newFakeRouter("kv"), testOptions()).Handler())
	defer ts.Close()
	resp, err := http.Get(ts.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := goquery.NewDocumentFromReader(resp.Body)
	resp.Body.Close()
	tiles := doc.Find(".tile[data-tile]")
	if tiles.Length() != len(components.Terms) {
		t.Fatalf("%d tiles, %d terms: every tile needs its term", tiles.Length(), len(components.Terms))
	}
	tiles.Each(func(_ int, tile *goquery.Selection) {
		id, _ := tile.Attr("data-tile")
		t.Run(id, func(t *testing.T) {
			button := tile.Find("h3 button.term")
			label := strings.TrimSpace(button.Text())
			for _, jargon := range []string{"ITL", "TPOT", "TTFT", "E2E", "raw"} {
				if strings.Contains(label, jargon) {
					t.Errorf("label %q holds %q: the label is plain words, the acronym is in the definition", label, jargon)
				}
			}
			target, _ := button.Attr("popovertarget")
			def := doc.Find("#" + target)
			if _, ok := def.Attr("popover"); !ok || strings.TrimSpace(def.Find("p").Text()) == "" {
				t.Fatalf("label %q opens %q, which is not a popover with a definition", label, target)
			}
			if def.Closest("#tiles").Length() != 0 {
				t.Errorf("definition %s sits inside the tiles, which are redrawn every second", target)
			}
			if title, _ := button.Attr("title"); !strings.Contains(title, strings.TrimSpace(def.Find("p").Text())) {
				t.Errorf("label %q's hover text %q is not its definition", label, title)
			}
		})
	})
}

// TestPagesAndFragmentsAreHTML: a fragment opened on its own (a link, or
// curl) is read as HTML, not as markup in plain text; net/http's sniffing
// knows <html> and <div> but not <section> or <details>.
func TestPagesAndFragmentsAreHTML(t *testing.T) {
	srv := New(&fakeLoad{}, newFakeRouter("kv"), testOptions())
	for _, path := range []string{"/", "/how", "/conversations"} {
		w := httptest.NewRecorder()
		srv.Handler().ServeHTTP(w, httptest.NewRequest("GET", path, nil))
		if ct := w.Header().Get("Content-Type"); w.Code != 200 || ct != "text/html; charset=utf-8" {
			t.Errorf("GET %s = %d %q, want 200 text/html; charset=utf-8", path, w.Code, ct)
		}
	}
}

// TestEveryPageFollowsAStartOrStopMadeElsewhere: a Stop pressed in one
// browser (or by the tour's owner) reaches every other page in the next
// tick, as an out-of-band Start/Stop control that an operator's page
// enables and a viewer's keeps disabled.
func TestEveryPageFollowsAStartOrStopMadeElsewhere(t *testing.T) {
	_, s, ts := newTestServer(t)
	for _, step := range []struct {
		path, running, button string
	}{{"/api/stop", `data-running="false"`, `data-testid="start" data-operator-only="true" disabled`},
		{"/api/start", `data-running="true"`, `data-testid="stop" data-operator-only="true" disabled`}} {
		resp, err := http.Post(ts.URL+step.path, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		frames := s.frames()
		html := string(frames[len(frames)-1])
		i := strings.Index(html, `<div id="run-state"`)
		if i < 0 {
			t.Fatalf("after %s the tick's HTML frame has no Start/Stop control", step.path)
		}
		ctl := html[i : i+strings.Index(html[i:], "</div>")]
		for _, want := range []string{`hx-swap-oob="true"`, step.running, step.button} {
			if !strings.Contains(ctl, want) {
				t.Errorf("after %s the pushed control %s lacks %s", step.path, ctl, want)
			}
		}
	}
}

// raceLoad is a fakeLoad on which the dashboard's own change (a tour's
// step to 120) lands right after a snapshot is taken outside the lock that
// changes hold: that snapshot predates it.
type raceLoad struct {
	*fakeLoad
	s     *Server
	armed bool
}

func (r *raceLoad) Snapshot() loadgen.Snapshot {
	snap := r.fakeLoad.Snapshot()
	if r.armed && r.s.seen.mu.TryLock() {
		r.s.seen.mu.Unlock()
		r.armed = false
		r.s.setConcurrency(120)
	}
	return snap
}

// TestATickDoesNotTakeTheDashboardsOwnChangeForAnOutsideOne: a change the
// dashboard makes between a tick's snapshot and its look for changes made
// behind its back is one change, with one mark; before, the tick compared
// the older snapshot with the new settings, marked a second "→ 120" and,
// as for the router's admin API, paused the tour.
func TestATickDoesNotTakeTheDashboardsOwnChangeForAnOutsideOne(t *testing.T) {
	load := &raceLoad{fakeLoad: &fakeLoad{target: 60}}
	s := New(load, newFakeRouter("round_robin"), testOptions())
	load.s = s
	s.frames() // the first look records the settings
	load.armed = true
	s.frames()
	s.frames()
	if load.armed {
		t.Fatal("the change never landed")
	}
	var marks []string
	for _, m := range s.history.allMarks() {
		marks = append(marks, m.Label)
	}
	if len(marks) != 1 || marks[0] != "→ 120" {
		t.Fatalf("marks %q; want the one change, → 120", marks)
	}
}
