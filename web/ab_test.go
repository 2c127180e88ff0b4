package web

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/kvlens/kvlens/components"
	"github.com/kvlens/kvlens/loadgen"
	"github.com/kvlens/kvlens/router"
)

// abServer is a dashboard over two fake lanes: A round-robin, B kv.
func abServer(t *testing.T, a, b loadgen.Stats) (*Server, *fakeLoad, *fakeLoad, *fakeRouter, *fakeRouter) {
	t.Helper()
	la, lb := &fakeLoad{target: 120}, &fakeLoad{target: 120}
	la.snap.Window, lb.snap.Window = a, b
	ra, rb := newFakeRouter("round_robin"), newFakeRouter("kv")
	opts := testOptions()
	opts.Source = "simulated"
	opts.Lanes = []Lane{{Gen: lb, Router: rb}}
	return New(la, ra, opts), la, lb, ra, rb
}

// window is a window with TTFT p95 and KV hit rate as given.
func window(ttftP95, hit float64) loadgen.Stats {
	return loadgen.Stats{TTFT: loadgen.Quantiles{Count: 100, P50: ttftP95 / 2, P95: ttftP95}, KVHitRate: hit,
		ISL: loadgen.Quantiles{Count: 100}, KVHitRequests: 100, Completed: 100, Answers: 100, Covered: 20 * time.Second}
}

func TestABTilesCompareLaneBWithLaneA(t *testing.T) {
	tests := []struct {
		name       string
		a, b       loadgen.Stats
		tile       string
		wantValue  string
		wantBase   string
		wantDelta  string
		wantBetter bool
		wantLevel  string
		settling   bool
	}{
		// 372 against 561 ms: (372−561)/561 = −33.7%
		{"a lower TTFT in lane B is an improvement", settled(window(561, 0.86)), settled(window(372, 0.98)), "ttft-p95", "372 ms", "vs 561 ms", "−34%", true, "ok", false},
		{"a higher TTFT in lane B is worse, with a plus", settled(window(372, 0.98)), settled(window(561, 0.86)), "ttft-p95", "561 ms", "vs 372 ms", "+51%", false, "warn", false},
		// 98% against 86%: 12 percentage points, not +14%
		{"the hit rate differs in percentage points", settled(window(561, 0.86)), settled(window(372, 0.98)), "kv-hit", "98%", "vs 86%", "+12 pt", true, "none", false},
		{"equal figures are even, neither better nor worse", settled(window(500, 0.9)), settled(window(500, 0.9)), "ttft-p95", "500 ms", "vs 500 ms", "±0%", false, "ok", false},
		// 20 s of a 30 s settle: values shown, no delta, no colour even over the SLO
		{"a settling window shows both values and no delta or colour", window(561, 0.86), window(900, 0.98), "ttft-p95", "900 ms", "vs 561 ms", "", false, "none", true},
		{"one lane settling is enough to hold back the delta", settled(window(561, 0.86)), window(372, 0.98), "ttft-p95", "372 ms", "vs 561 ms", "", false, "none", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _, _, _, _ := abServer(t, tt.a, tt.b)
			td := tilesNow(s)
			got := tile(td, tt.tile)
			if got.Value != tt.wantValue || got.Baseline != tt.wantBase || got.Delta != tt.wantDelta || got.Better != tt.wantBetter || got.Level != tt.wantLevel {
				t.Fatalf("tile = value %q base %q delta %q better %v level %q; want %q %q %q %v %q",
					got.Value, got.Baseline, got.Delta, got.Better, got.Level, tt.wantValue, tt.wantBase, tt.wantDelta, tt.wantBetter, tt.wantLevel)
			}
			if (got.Settling != "") != tt.settling || (td.Settling != "") != tt.settling {
				t.Fatalf("settling %q (tiles %q), want settling %v", got.Settling, td.Settling, tt.settling)
			}
			for _, x := range td.Tiles {
				if tt.settling && (x.Delta != "" || (x.Level != "none")) {
					t.Errorf("tile %s shows delta %q level %q while settling", x.ID, x.Delta, x.Level)
				}
			}
		})
	}
}

func TestABHeadline(t *testing.T) {
	tests := []struct {
		name         string
		a, b         loadgen.Stats
		wantTTFT     [2]string // B, A
		wantDelta    string
		wantSettling bool
		wantEven     bool // within TTFT p95's noise band: shown, not coloured
	}{
		{"a settled pair names the difference", settled(window(561, 0.86)), settled(window(372, 0.98)), [2]string{"372 ms", "561 ms"}, "−34%", false, false},
		{"a difference within the noise band is named but not coloured", settled(window(561, 0.86)), settled(window(520, 0.98)), [2]string{"520 ms", "561 ms"}, "−7%", false, true},
		{"a settling pair shows the figures and no difference", window(561, 0.86), window(372, 0.98), [2]string{"372 ms", "561 ms"}, "", true, false},
		{"a lane without TTFT data shows a dash and no difference", settled(window(561, 0.86)), settled(loadgen.Stats{}), [2]string{"—", "561 ms"}, "", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _, _, _, _ := abServer(t, tt.a, tt.b)
			h := s.headline(s.sides(time.Now(), s.snapshots()))
			if !h.Show || h.B != "Plain kv" || h.A != "Plain round_robin" || h.Conversations != 120 {
				t.Fatalf("headline %+v names the wrong pair or concurrency", h)
			}
			if h.TTFTB != tt.wantTTFT[0] || h.TTFTA != tt.wantTTFT[1] || h.Delta != tt.wantDelta || (h.Settling != "") != tt.wantSettling {
				t.Fatalf("headline TTFT %q vs %q, delta %q, settling %q", h.TTFTB, h.TTFTA, h.Delta, h.Settling)
			}
			if h.Delta != "" && (h.Even != tt.wantEven || (h.Noise != "") != tt.wantEven || (tt.wantEven && h.Better)) {
				t.Fatalf("headline delta %q: even %v better %v noise %q; want even %v, with the noise band said when even", h.Delta, h.Even, h.Better, h.Noise, tt.wantEven)
			}
		})
	}
}

func TestEveryChangeBeginsAWindowInEveryLane(t *testing.T) {
	tests := []struct {
		name string
		path string
		form url.Values
		mark string
	}{
		{"a concurrency change", "/api/concurrency", url.Values{"concurrency": {"140"}}, `"label":"→ 140"`},
		{"lane B's policy, marked as lane B's", "/api/mode", url.Values{"mode": {"least_loaded"}, "lane": {"b"}}, `"label":"B: Plain least_loaded","lane":"b"`},
		{"lane A's policy, marked as lane A's", "/api/mode", url.Values{"mode": {"kv"}, "lane": {"a"}}, `"label":"A: Plain kv","lane":"a"`},
		{"a cache reset", "/api/reset", nil, `"kind":"reset"`},
		{"a start", "/api/start", nil, `"kind":"start"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, la, lb, _, _ := abServer(t, settled(window(561, 0.86)), settled(window(372, 0.98)))
			s.frames() // the dashboard has looked once
			ts := httptest.NewServer(s.Handler())
			defer ts.Close()
			resp, err := http.PostForm(ts.URL+tt.path, tt.form)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("%s = %d %s", tt.path, resp.StatusCode, body)
			}
			if la.resets != 1 || lb.resets != 1 {
				t.Fatalf("windows begun: lane A %d, lane B %d; want 1 each", la.resets, lb.resets)
			}
			frame := string(s.frames()[0])
			if strings.Count(frame, `"kind":`) != 1 || !strings.Contains(frame, tt.mark) {
				t.Fatalf("want one mark %s, got %s", tt.mark, frame)
			}
			if !strings.Contains(tt.mark, `"lane"`) && strings.Contains(frame, `"lane":`) {
				t.Fatalf("a change to every lane was marked as one lane's: %s", frame)
			}
			if la.resets != 1 || lb.resets != 1 {
				t.Fatal("the tick began the window again for a change the dashboard made")
			}
		})
	}
}

func TestAChangeBehindTheDashboardsBackBeginsAWindow(t *testing.T) {
	s, la, lb, _, rb := abServer(t, settled(window(561, 0.86)), settled(window(372, 0.98)))
	s.frames()
	rb.SwitchPolicy("dynamo") // the router's admin API, say
	frame := string(s.frames()[0])
	if la.resets != 1 || lb.resets != 1 || !strings.Contains(frame, `"label":"B: Plain dynamo","lane":"b"`) {
		t.Fatalf("resets %d/%d, frame %s; want a new window in both lanes and a mark", la.resets, lb.resets, frame)
	}
	la.SetConcurrency(160) // a script driving the generator directly
	if frame := string(s.frames()[0]); la.resets != 2 || !strings.Contains(frame, `"label":"→ 160"`) {
		t.Fatalf("resets %d, frame %s; want a new window for the new concurrency", la.resets, frame)
	}
	if frame := string(s.frames()[0]); strings.Contains(frame, `"marks"`) || la.resets != 2 {
		t.Fatal("a change was taken twice")
	}
}

func TestModeNamesItsLane(t *testing.T) {
	tests := []struct {
		name       string
		form       url.Values
		wantStatus int
		wantA      string
		wantB      string
		wantBody   string
	}{
		{"lane b switches lane B only", url.Values{"mode": {"dynamo"}, "lane": {"b"}}, 200, "round_robin", "dynamo", `data-testid="pair-b"`},
		{"no lane is lane A", url.Values{"mode": {"random"}}, 200, "random", "kv", `data-testid="pair-a"`},
		{"an unknown lane is refused in one line", url.Values{"mode": {"kv"}, "lane": {"z"}}, 400, "round_robin", "kv", `lane "z" is unknown: this dashboard's lanes are "a" and "b"`},
		{"a lane's letter in capitals is refused with the names to use", url.Values{"mode": {"kv"}, "lane": {"B"}}, 400, "round_robin", "kv", `lane "B" is unknown: this dashboard's lanes are "a" and "b"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _, _, ra, rb := abServer(t, loadgen.Stats{}, loadgen.Stats{})
			ts := httptest.NewServer(s.Handler())
			defer ts.Close()
			resp, err := http.PostForm(ts.URL+"/api/mode", tt.form)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.wantStatus || !strings.Contains(string(body), tt.wantBody) {
				t.Fatalf("got %d %q, want %d containing %q", resp.StatusCode, body, tt.wantStatus, tt.wantBody)
			}
			if ra.PolicyName() != tt.wantA || rb.PolicyName() != tt.wantB {
				t.Fatalf("pair = %s, %s; want %s, %s", ra.PolicyName(), rb.PolicyName(), tt.wantA, tt.wantB)
			}
		})
	}
}

func TestStateCarriesThePair(t *testing.T) {
	s, _, _, _, _ := abServer(t, settled(window(561, 0.86)), window(372, 0.98))
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	resp, err := http.Get(ts.URL + "/api/state")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct {
		Pair  []string `json:"pair"`
		Lanes []struct {
			Lane, Policy, Name, Settling string
			Window                       *loadgen.Stats
		} `json:"lanes"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	if strings.Join(st.Pair, ",") != "round_robin,kv" || len(st.Lanes) != 2 {
		t.Fatalf("state pair %v, %d lanes", st.Pair, len(st.Lanes))
	}
	b := st.Lanes[1]
	if b.Lane != "b" || b.Name != "kvlens kv · simulated" || b.Settling != "settling (20 s of 30)" || b.Window == nil || b.Window.TTFT.P95 != 372 {
		t.Fatalf("lane B = %+v", b)
	}
	if st.Lanes[0].Settling != "" {
		t.Fatalf("lane A is settled, state says %q", st.Lanes[0].Settling)
	}
}

func TestFramesCarryEveryLaneAtOneTime(t *testing.T) {
	s, _, _, _, _ := abServer(t, settled(window(561, 0.86)), settled(window(372, 0.98)))
	var f Frame
	if err := json.Unmarshal(s.frames()[0], &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Points) != 1 || len(f.Lanes) != 1 || len(f.Lanes[0].Points) != 1 {
		t.Fatalf("frame has %d points and %d more lanes", len(f.Points), len(f.Lanes))
	}
	b := f.Lanes[0]
	if b.Mode != "kv" || b.Name != "kvlens kv · simulated" || *b.Points[0].TTFTp95 != 372 || b.Points[0].T != f.Points[0].T {
		t.Fatalf("lane B in the frame: %+v, point %+v; lane A's point at %d", b, b.Points[0], f.Points[0].T)
	}
	if strings.Join(f.Pair, ",") != "round_robin,kv" {
		t.Fatalf("frame pair %v", f.Pair)
	}
	hello := string(s.hello()[0])
	if !strings.Contains(hello, `"lanes":[{"mode":"kv"`) {
		t.Fatalf("a browser connecting later gets no lane B history: %.300s", hello)
	}
}

func TestPanelsShowBothFleets(t *testing.T) {
	s, _, _, ra, rb := abServer(t, settled(window(561, 0.86)), settled(window(372, 0.98)))
	ra.workers = fakeWorkers("sim-0", "sim-1", "sim-2")
	rb.workers = fakeWorkers("sim-3", "sim-4", "sim-5")
	html := string(s.frames()[1])
	for _, want := range []string{`id="headline"`, `id="pair-names"`, "A · round-robin · simulated", "B · kvlens kv · simulated", ">sim-5<"} {
		if !strings.Contains(html, want) {
			t.Errorf("panels lack %s", want)
		}
	}
	var d components.WorkersData = s.workers(s.snapshots())
	if len(d.Lanes) != 2 || len(d.Lanes[1].Rows) != 3 {
		t.Fatalf("workers panel has %d lanes", len(d.Lanes))
	}
}

func fakeWorkers(names ...string) []router.WorkerState {
	var out []router.WorkerState
	for _, n := range names {
		out = append(out, router.WorkerState{Name: n, Healthy: true, Capacity: 64})
	}
	return out
}

// TestTTFTComparesWhileTheAnswersStillSettle: some 30 s after a change TTFT
// is settled, but too few answers have come in from the span whose every
// request has ended (loadgen.Stats.Answered): the TTFT tiles and headline
// compare, every figure read at an answer's end waits, and the tiles as a
// whole still say they settle.
func TestTTFTComparesWhileTheAnswersStillSettle(t *testing.T) {
	young := func(ttftP95, hit float64) loadgen.Stats {
		w := settled(window(ttftP95, hit))
		w.Answers = 5
		w.TPOT = loadgen.Quantiles{Count: 5, P50: 30, P95: 70} // over the 60 ms SLO
		return w
	}
	s, _, _, _, _ := abServer(t, young(561, 0.86), young(372, 0.98))
	td := tilesNow(s)
	if x := tile(td, "ttft-p95"); x.Settling != "" || x.Delta != "−34%" {
		t.Fatalf("TTFT p95 tile settling %q, delta %q; want it compared, −34%%", x.Settling, x.Delta)
	}
	for _, id := range []string{"tpot-p50", "tpot-p95", "chunk-gap-p50", "e2e-p50", "e2e-p95", "kv-hit", "errors"} {
		if x := tile(td, id); x.Settling != "answers (5 of 20)" || x.Delta != "" || x.Level != "none" {
			t.Errorf("tile %s: settling %q, delta %q, level %q; want it settling on its answers, uncompared and uncoloured", id, x.Settling, x.Delta, x.Level)
		}
	}
	if td.Settling == "" {
		t.Error("the tiles say they are settled while some still settle")
	}
	if h := s.headline(s.sides(time.Now(), s.snapshots())); h.Settling != "" || h.Delta != "−34%" || h.HitB != "98%" {
		t.Errorf("headline settling %q, delta %q, hit %q; want TTFT compared and the hit rate shown", h.Settling, h.Delta, h.HitB)
	}
}

// TestWorkerRowsShowAHitRateOnlyFromAnswers: a worker's hit rate and share,
// like the tiles' figures, come from the requests of its window's answered
// span (loadgen.Stats.Answered); a young window that has none there shows
// no rate, not 0%, and a worker's share is not skewed by the short requests
// that end first after a change.
func TestWorkerRowsShowAHitRateOnlyFromAnswers(t *testing.T) {
	rt := newFakeRouter("kv")
	rt.workers = []router.WorkerState{{Name: "a", Healthy: true}, {Name: "b", Healthy: true}, {Name: "c", Healthy: true}, {Name: "d", Healthy: true}}
	snap := loadgen.Snapshot{Workers: map[string]loadgen.Stats{
		"a": {Completed: 30, Answers: 30, ISL: loadgen.Quantiles{Count: 30}, KVHitRequests: 30, KVHitRate: 0.9},
		"b": {Completed: 40, Answers: 10, ISL: loadgen.Quantiles{Count: 10}, KVHitRequests: 10, KVHitRate: 0.5}, // 30 short ones sent later ended too
		"c": {Completed: 10},                                                                                    // ended since the change, none in the answered span yet
	}}
	rows := workerRows(Lane{Router: rt}, snap)
	tests := []struct {
		name      string
		row       int
		wantHit   float64
		wantShare float64
	}{
		{"a worker with answers shows their hit rate and share", 0, 0.9, 0.75},
		{"a share counts the answered span, not every request ended", 1, 0.5, 0.25},
		{"a worker without answers in the span shows no hit rate and no share of it", 2, -1, 0},
		{"a worker that ended nothing shows neither", 3, -1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if r := rows[tt.row]; r.HitRate != tt.wantHit || r.Share != tt.wantShare {
				t.Fatalf("hit rate %v, share %v; want %v, %v", r.HitRate, r.Share, tt.wantHit, tt.wantShare)
			}
		})
	}
}

func TestDeltaColoursOnlyDifferencesBeyondTheNoise(t *testing.T) {
	tests := []struct {
		name             string
		live, ref        float64
		higher, points   bool
		noise            float64
		want             string
		better, wantEven bool
	}{
		{"a drop beyond the band is coloured better", 372, 561, false, false, 15, "−34%", true, false},
		{"a rise beyond the band is coloured worse", 561, 372, false, false, 15, "+51%", false, false},
		{"a difference within the band is shown but even", 520, 561, false, false, 15, "−7%", false, true},
		{"a shown difference equal to the band is even: the band is how far chance goes", 505, 500, false, false, 1, "+1%", false, true},
		{"one just past the band, as shown, is coloured", 534.5, 500, false, false, 6, "+7%", false, false},
		{"under half a unit is ±0", 561.2, 561, false, false, 15, "±0%", false, true},
		{"a rate above is better when higher is better", 2.7, 2.4, true, false, 5, "+13%", true, false},
		{"hit-rate points within their band are even", 92, 90.5, true, true, 3, "+2 pt", false, true},
		{"hit-rate points beyond their band are coloured", 99, 85, true, true, 3, "+14 pt", true, false},
		{"without a band every difference is coloured", 505, 500, false, false, 0, "+1%", false, false},
		{"no reference, no difference", 500, 0, false, false, 15, "", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text, better, even := delta(tt.live, tt.ref, tt.higher, tt.points, tt.noise)
			if text != tt.want || better != tt.better || even != tt.wantEven {
				t.Fatalf("delta(%v, %v) = %q better %v even %v; want %q %v %v", tt.live, tt.ref, text, better, even, tt.want, tt.better, tt.wantEven)
			}
		})
	}
}

// TestEveryTileHasANoiseBand: a tile without one would colour differences
// two lanes of one policy show by chance.
func TestEveryTileHasANoiseBand(t *testing.T) {
	s, _, _, _, _ := abServer(t, settled(window(561, 0.86)), settled(window(372, 0.98)))
	if n := len(s.metrics()); n != 11 {
		t.Fatalf("%d tiles' metrics, want the page's 11 (all 12 tiles but Errors, which has its own rule)", n)
	}
	for _, m := range s.metrics() {
		if m.noise <= 0 {
			t.Errorf("tile %s has no noise band", m.id)
		}
	}
}

// TestAHitRateTheWorkersDoNotReportIsNotZero runs windows whose answers
// carried no cached-token counts (vLLM without
// --enable-prompt-tokens-details): the cache-hit tile and the worker's row
// show no rate, and the tile says why, rather than a 0% that reads as
// every prompt missing the cache.
func TestAHitRateTheWorkersDoNotReportIsNotZero(t *testing.T) {
	unreported := loadgen.Stats{TTFT: loadgen.Quantiles{Count: 50, P50: 200, P95: 400}, ISL: loadgen.Quantiles{Count: 50},
		Completed: 50, Answers: 50, Covered: 20 * time.Second}
	rt := newFakeRouter("kv")
	rt.workers = []router.WorkerState{{Name: "a", Healthy: true}}
	if row := workerRows(Lane{Router: rt}, loadgen.Snapshot{Workers: map[string]loadgen.Stats{"a": unreported}})[0]; row.HitRate != -1 {
		t.Errorf("the worker's row shows a hit rate of %v, want none (-1)", row.HitRate)
	}
	s := New(&fakeLoad{target: 60}, rt, testOptions())
	d := s.tiles([]side{{policy: "kv", target: 60, window: unreported}})
	for _, tile := range d.Tiles {
		if tile.ID != "kv-hit" {
			continue
		}
		if tile.Value != "—" || tile.Note != "the workers report no cached tokens" {
			t.Errorf("the cache-hit tile reads %q, note %q; want a dash and the reason", tile.Value, tile.Note)
		}
		return
	}
	t.Fatal("no cache-hit tile")
}

// TestFiguresThatReadTheSameAreEven: a loaded client reads chunks in bursts,
// so both lanes' chunk gaps fall under a millisecond and read "0 ms"; a
// difference between them must not show, let alone be coloured.
func TestFiguresThatReadTheSameAreEven(t *testing.T) {
	tests := []struct {
		name       string
		a, b       float64 // chunk gap p50 in lanes A and B, ms
		wantDelta  string
		wantBetter bool
		wantEven   bool
	}{
		{"0.46 against 0.45 ms both read 0 ms: even", 0.46, 0.45, "±0%", false, true},
		{"29.6 against 30.4 ms both read 30 ms: even", 29.6, 30.4, "±0%", false, true},
		{"figures that read differently keep their difference", 30, 27, "−10%", true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := settled(window(561, 0.86)), settled(window(372, 0.98))
			a.InterChunk = loadgen.Quantiles{Count: 1000, P50: tt.a, P95: 2 * tt.a}
			b.InterChunk = loadgen.Quantiles{Count: 1000, P50: tt.b, P95: 2 * tt.b}
			s, _, _, _, _ := abServer(t, a, b)
			got := tile(tilesNow(s), "chunk-gap-p50")
			if got.Delta != tt.wantDelta || got.Better != tt.wantBetter || got.Even != tt.wantEven {
				t.Fatalf("chunk gap %s, %s: delta %q better %v even %v; want %q %v %v",
					got.Value, got.Baseline, got.Delta, got.Better, got.Even, tt.wantDelta, tt.wantBetter, tt.wantEven)
			}
		})
	}
}
