package web

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/kvlens/kvlens/internal/clocktest"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/kvlens/kvlens/clock"
	"github.com/kvlens/kvlens/components"
	"github.com/kvlens/kvlens/loadgen"
	"github.com/kvlens/kvlens/router"
)

// warmServer is the A/B dashboard over two fake lanes whose windows hold a
// cold start (TTFT p95 1.5 s, red against the 600 ms SLO, and settled by
// age and count), 12 s into a warm-up of 2 min at 4x, with behind as its
// check and script as its tour ("" for none).
func warmServer(t *testing.T, behind, script string) (*Server, *clocktest.Manual, *fakeLoad, *fakeLoad) {
	t.Helper()
	base := clocktest.New(time.Unix(1_750_000_000, 0))
	warp := clock.NewWarp(base, 2*time.Minute, 4)
	base.Advance(12 * time.Second)
	la, lb := &fakeLoad{target: 60}, &fakeLoad{target: 60}
	for _, l := range []*fakeLoad{la, lb} {
		l.snap.Window = settled(loadgen.Stats{TTFT: loadgen.Quantiles{Count: 100, P50: 900, P95: 1500}})
	}
	opts := testOptions()
	opts.Source = "simulated"
	opts.Lanes = []Lane{{Gen: lb, Router: newFakeRouter("kv")}}
	opts.Faults = &fakeFaults{}
	opts.Access = Access{Token: "s3cret"}
	opts.Warm = warp
	opts.WarmBehind = func() string { return behind }
	if script != "" {
		opts.Tour = mustTour(t, script)
	}
	return New(la, newFakeRouter("round_robin"), opts), base, la, lb
}

// endWarmUp runs the warm-up to its end and returns RunWarmUp's answer.
func endWarmUp(t *testing.T, s *Server, base *clocktest.Manual) string {
	t.Helper()
	got := make(chan string, 1)
	go func() { got <- s.RunWarmUp(context.Background()) }()
	eventually(t, "RunWarmUp waits for the meeting point", func() bool { return len(base.Pending()) > 0 })
	base.Advance(time.Minute)
	select {
	case r := <-got:
		return r
	case <-time.After(20 * time.Second):
		t.Fatal("RunWarmUp did not return at the meeting point")
		return ""
	}
}

func TestWhileWarmingThePageShowsNoFigures(t *testing.T) {
	s, _, _, _ := warmServer(t, "", "")
	const sentence = "Warming up: the fleets run 2 min of traffic ahead, 18 s left"
	tiles := tilesNow(s)
	if tiles.Compare != s.compareText(s.sides(time.Now(), s.snapshots())) || strings.Contains(tiles.Compare, "Warming") {
		t.Errorf("the tiles' line says %q; want what the tiles compare, the warm-up said once in the headline", tiles.Compare)
	}
	for _, x := range tiles.Tiles {
		if x.Value != "—" || x.Baseline != "—" || x.Delta != "" || x.Level != "none" || x.Settling != "warm-up: 18 s left" {
			t.Errorf("tile %s: %+v; want dashes, no delta, no colour, warming up", x.ID, x)
		}
	}
	h := s.headline(s.sides(time.Now(), s.snapshots()))
	if h.Warming != sentence || h.Delta != "" {
		t.Errorf("headline %+v; want only %q", h, sentence)
	}
	var f Frame
	if err := json.Unmarshal(s.frames()[0], &f); err != nil {
		t.Fatal(err)
	}
	if f.Live == nil || len(f.Lanes) != 1 || f.Lanes[0].Live == nil || len(f.Live.Values) != 0 || len(f.Lanes[0].Live.Values) != 0 {
		t.Errorf("the frame places a live point on the baseline chart while warming, or names no lane's curve: %+v", f)
	}

	w := httptest.NewRecorder()
	s.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/api/state", nil))
	var st struct {
		Warmup *warmState  `json:"warmup"`
		Lanes  []laneState `json:"lanes"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &st); err != nil {
		t.Fatal(err)
	}
	if want := (warmState{SpanSeconds: 120, Speed: 4, SecondsLeft: 18}); st.Warmup == nil || *st.Warmup != want {
		t.Errorf("/api/state warmup %+v, want %+v", st.Warmup, want)
	}
	for _, l := range st.Lanes {
		if l.Window != nil || l.Settling != "warm-up: 18 s left" {
			t.Errorf("/api/state lane %s: settling %q, window %v; want no window while warming", l.Lane, l.Settling, l.Window)
		}
	}
}

// TestWhileWarmingTheWorkersShowNoHitRate: the workers panel shows each
// worker's load while the fleets warm up, but its hit rate and share only
// once the warm-up ends, as the tiles do: they are read from the window
// that holds the cold start.
func TestWhileWarmingTheWorkersShowNoHitRate(t *testing.T) {
	s, base, la, lb := warmServer(t, "", "")
	for i, l := range []*fakeLoad{la, lb} {
		name := fmt.Sprintf("sim-%d", i)
		l.mu.Lock()
		l.snap.Workers = map[string]loadgen.Stats{name: {KVHitRate: 0.72, KVHitRequests: 40, Answers: 40}}
		l.mu.Unlock()
		s.lanes[i].Router.(*fakeRouter).workers = []router.WorkerState{{Name: name, Healthy: true, InFlight: 20, Capacity: 64}}
	}
	rows := func() []components.WorkerRow {
		var out []components.WorkerRow
		for _, l := range s.workers(s.snapshots()).Lanes {
			out = append(out, l.Rows...)
		}
		return out
	}
	for _, r := range rows() {
		if r.HitRate != -1 || r.Share != -1 || r.InFlight != 20 {
			t.Errorf("while warming, worker %s: hit rate %v, share %v, in flight %d; want no hit rate or share (-1), and its 20 in flight", r.Name, r.HitRate, r.Share, r.InFlight)
		}
	}
	endWarmUp(t, s, base)
	for _, r := range rows() {
		if r.HitRate != 0.72 || r.Share != 1 {
			t.Errorf("after the warm-up, worker %s: hit rate %v, share %v; want 0.72 and 1", r.Name, r.HitRate, r.Share)
		}
	}
}

// TestASlowedWarmUpSaysWhatItPlaysAndHowLongIsLeft slows the warm-up 12 s
// into 2 min at 4x, as a host that cannot keep the pace does (the warp
// reads 54 s behind its base then): at 2x it meets the base 54 s later,
// having played 2 min 36 s, and the page and /api/state say so.
func TestASlowedWarmUpSaysWhatItPlaysAndHowLongIsLeft(t *testing.T) {
	s, _, _, _ := warmServer(t, "", "")
	if !s.opts.Warm.Slow(2) {
		t.Fatal("the warm-up did not slow")
	}
	const sentence = "Warming up: the fleets run 2 min 36 s of traffic ahead, 54 s left"
	if got := s.headline(s.sides(time.Now(), s.snapshots())).Warming; got != sentence {
		t.Errorf("the headline says %q, want %q", got, sentence)
	}
	for _, x := range tilesNow(s).Tiles {
		if x.Settling != "warm-up: 54 s left" {
			t.Errorf("tile %s says %q, want the slowed warm-up's 54 s left", x.ID, x.Settling)
		}
	}
	if want := (warmState{SpanSeconds: 156, Speed: 2, SecondsLeft: 54}); *s.warmState() != want {
		t.Errorf("/api/state warmup %+v, want %+v", *s.warmState(), want)
	}
}

func TestWarmUpPointsSitAtTheWarpsTime(t *testing.T) {
	s, base, _, _ := warmServer(t, "", "")
	s.frames()
	base.Advance(time.Second)
	s.frames()
	pts := s.history.all(0)
	// 12 s into a 2 min warm-up at 4x, the warp has played 48 s from 90 s
	// before its start: it reads 54 s behind the base. A second later it
	// is 4 s on.
	want := base.Now().Add(-time.Second - 54*time.Second).Unix()
	if len(pts) != 2 || pts[0].T != want || pts[1].T-pts[0].T != 4 {
		t.Fatalf("points at %+v, want the warp's times, 4 s apart, from %d", pts, want)
	}
}

func TestControlsWaitForTheWarmUp(t *testing.T) {
	tests := []struct {
		path string
		form url.Values
	}{
		{"/api/start", nil},
		{"/api/stop", nil},
		{"/api/concurrency", url.Values{"concurrency": {"120"}}},
		{"/api/mode", url.Values{"mode": {"random"}, "lane": {"a"}}},
		{"/api/reset", nil},
		{"/api/fault", url.Values{"fault": {"slow:2"}}},
		{"/api/simulate", url.Values{"mode": {"kv"}}},
		{"/api/tour/pause", nil},
		{"/api/tour/resume", nil},
	}
	s, base, la, _ := warmServer(t, "", "1h watch \"w\"\n")
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			r := httptest.NewRequest("POST", tt.path, strings.NewReader(tt.form.Encode()))
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			r.RemoteAddr = "192.0.2.7:40000"
			r.AddCookie(s.rule.Cookie())
			w := httptest.NewRecorder()
			s.Handler().ServeHTTP(w, r)
			if w.Code != http.StatusConflict || strings.TrimSpace(w.Body.String()) != "warming up, 18 s left" {
				t.Fatalf("%d %q; want 409 \"warming up, 18 s left\"", w.Code, w.Body)
			}
		})
	}
	if la.target != 60 || la.resets != 0 || la.stopped {
		t.Fatalf("a refused control changed lane A: target %d, %d new windows, running %v", la.target, la.resets, !la.stopped)
	}
	// Another handler guarded likewise (the router's admin API): reads pass.
	admin := s.AfterWarmUp(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	for method, want := range map[string]int{"GET": 200, "PUT": 409, "POST": 409} {
		w := httptest.NewRecorder()
		admin.ServeHTTP(w, httptest.NewRequest(method, "/admin/policy", nil))
		if w.Code != want {
			t.Errorf("admin %s during the warm-up: %d, want %d", method, w.Code, want)
		}
	}
	endWarmUp(t, s, base)
	if code := post(s, "/api/concurrency", url.Values{"concurrency": {"120"}}, true); code != http.StatusOK || la.target != 120 {
		t.Fatalf("after the warm-up the slider got %d, target %d", code, la.target)
	}
}

func TestTheTourBeginsWhenTheWarmUpEnds(t *testing.T) {
	s, base, la, lb := warmServer(t, "", "1h concurrency 120 \"first\"\n")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.PlayTour(ctx)
	time.Sleep(50 * time.Millisecond) // a tour that did not wait would have played its step
	if la.target != 60 || lb.target != 60 {
		t.Fatalf("the tour's first step played during the warm-up: targets %d and %d", la.target, lb.target)
	}
	if d := s.tourData(false); d.Caption != "The tour begins when the warm-up ends." || d.Left != "in 18 s" {
		t.Fatalf("the tour's bar while warming: %+v", d)
	}
	endWarmUp(t, s, base)
	eventually(t, "the tour's first step after the warm-up", func() bool {
		return s.tourState().Caption == "first" && s.tourState().SecondsLeft > 0
	})
	la.mu.Lock()
	defer la.mu.Unlock()
	if la.target != 120 {
		t.Fatalf("the first step left lane A at %d", la.target)
	}
}

func TestTheWarmUpsEnd(t *testing.T) {
	tests := []struct {
		name, behind string
		// wantWindows is the new windows each lane begins; wantMark the
		// chart's mark.
		wantWindows int
		wantMark    string
		// wantLevel is the TTFT p95 tile's colour just after: the kept
		// windows are compared at once, new ones settle first.
		wantLevel string
	}{
		{"a warm-up that kept its pace keeps its windows", "", 0, "warmed up: 2 min ahead", "bad"},
		{"a warm-up that fell behind begins new windows", "sim-4 delivered 3.0% of its steps late", 1, "warm-up fell behind: new window", "none"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, base, la, lb := warmServer(t, tt.behind, "")
			if got := endWarmUp(t, s, base); got != tt.behind {
				t.Fatalf("RunWarmUp said %q, want %q", got, tt.behind)
			}
			if la.resets != tt.wantWindows || lb.resets != tt.wantWindows {
				t.Errorf("new windows A %d B %d, want %d each", la.resets, lb.resets, tt.wantWindows)
			}
			marks := s.history.allMarks()
			if len(marks) != 1 || marks[0].Kind != "warm" || marks[0].Label != tt.wantMark {
				t.Errorf("marks %+v, want one warm mark %q", marks, tt.wantMark)
			}
			if tt.wantWindows > 0 {
				// A fresh window, as the fakes cannot empty theirs.
				for _, l := range []*fakeLoad{la, lb} {
					l.snap.Window.Covered, l.snap.Window.Completed = 0, 0
				}
			}
			if got := tilesNow(s).Tiles[1]; got.Level != tt.wantLevel {
				t.Errorf("TTFT p95 tile %+v, want level %q", got, tt.wantLevel)
			}
			if st := s.warmState(); !st.Over || st.SecondsLeft != 0 || st.Behind != tt.behind {
				t.Errorf("warm state %+v", st)
			}
		})
	}
}
