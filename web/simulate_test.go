package web

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"github.com/kvlens/kvlens/baselines"
)

// fakeSim is a Simulator whose state the test sets.
type fakeSim struct {
	mu     sync.Mutex
	starts int
	status SimStatus
}

func (f *fakeSim) Simulate() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.status.Running {
		return ErrSimulating
	}
	f.starts++
	f.status = SimStatus{Running: true, Steps: 14, Finished: 3, Phase: "measuring: KV-aware at 80"}
	return nil
}

func (f *fakeSim) SimStatus() SimStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.status
}

func TestSimulateThisCurveHandlers(t *testing.T) {
	sim := &fakeSim{}
	opts := testOptions()
	opts.Access = Access{Token: "s3cret"}
	opts.Simulator = sim
	srv := New(&fakeLoad{}, newFakeRouter("kv"), opts)
	do := func(path string, remote bool) *httptest.ResponseRecorder {
		r := httptest.NewRequest("POST", path, nil)
		r.RemoteAddr = "127.0.0.1:4000" // the operator, on this machine
		if remote {
			r.RemoteAddr = "192.0.2.9:4000" // a visitor's phone
		}
		w := httptest.NewRecorder()
		srv.Handler().ServeHTTP(w, r)
		return w
	}
	if w := do("/api/simulate", true); w.Code != http.StatusForbidden || sim.starts != 0 {
		t.Fatalf("a viewer got %d and %d simulations started", w.Code, sim.starts)
	}
	w := do("/api/simulate", false)
	doc, _ := goquery.NewDocumentFromReader(w.Body)
	if w.Code != 200 || sim.starts != 1 {
		t.Fatalf("operator: %d, %d started", w.Code, sim.starts)
	}
	if v, _ := doc.Find(`[data-testid=simulate-progress]`).Attr("value"); v != "3" {
		t.Fatalf("progress value = %q, want 3 of 14", v)
	}
	if w := do("/api/simulate", false); w.Code != http.StatusConflict || !strings.Contains(w.Body.String(), "already running") {
		t.Fatalf("second start: %d %q", w.Code, w.Body.String())
	}
	if w := do("/api/simulate/use", false); w.Code != http.StatusConflict {
		t.Fatalf("using a curve before one exists: %d", w.Code)
	}

	// Finished: the result can become the compared baseline.
	set := &baselines.Set{Name: "simulated 2026-11-22 07:00:00"}
	sim.mu.Lock()
	sim.status = SimStatus{Result: set, Finished: 14, Steps: 14, Stored: true}
	sim.mu.Unlock()
	frame := string(srv.frames()[1])
	if !strings.Contains(frame, "simulated 2026-11-22 07:00:00 (stored)") || !strings.Contains(frame, `data-testid="simulate-use"`) {
		t.Fatalf("the pushed status lacks the result and its button: %s", frame[strings.Index(frame, `id="simulate-status"`):])
	}
	if w := do("/api/simulate/use", true); w.Code != http.StatusForbidden {
		t.Fatalf("a viewer switched the baseline: %d", w.Code)
	}
	if w := do("/api/simulate/use", false); w.Code != http.StatusNoContent || w.Header().Get("HX-Refresh") != "true" {
		t.Fatalf("use: %d, HX-Refresh %q", w.Code, w.Header().Get("HX-Refresh"))
	}
	if srv.base() != set {
		t.Fatal("the dashboard does not compare with the simulated curve")
	}
	if !strings.Contains(string(srv.frames()[1]), "compared with now") {
		t.Fatal("the status does not say the curve is in use")
	}
	w = httptest.NewRecorder()
	srv.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/api/state", nil))
	var st struct{ Baseline string }
	if err := json.Unmarshal(w.Body.Bytes(), &st); err != nil || st.Baseline != set.Name {
		t.Fatalf("/api/state names the baseline %q (%v), want %q", st.Baseline, err, set.Name)
	}
	page := httptest.NewRecorder()
	srv.Handler().ServeHTTP(page, httptest.NewRequest("GET", "/", nil))
	if !strings.Contains(page.Body.String(), set.Name) {
		t.Fatal("a fresh page load does not name the simulated curve it compares with")
	}
}

func TestNoSimulatorForRealWorkers(t *testing.T) {
	srv := New(&fakeLoad{}, newFakeRouter("kv"), testOptions())
	w := httptest.NewRecorder()
	r := httptest.NewRequest("POST", "/api/simulate", nil)
	r.RemoteAddr = "127.0.0.1:40000" // the operator, on this machine
	srv.Handler().ServeHTTP(w, r)
	if w.Code != http.StatusNotFound || !strings.Contains(w.Body.String(), "off for real workers") {
		t.Fatalf("got %d %q", w.Code, w.Body.String())
	}
	if strings.Contains(string(srv.frames()[1]), "simulate-status") {
		t.Fatal("a simulation status is pushed without a simulator")
	}
}
