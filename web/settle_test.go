package web

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kvlens/kvlens/loadgen"
)

func TestSettling(t *testing.T) {
	tests := []struct {
		name        string
		covered     time.Duration
		firstTokens int
		completed   int
		errors      int
		want        string
	}{
		{"a window just begun is settling from zero", 0, 0, 0, 0, "settling (0 s of 30)"},
		{"a young window counts its seconds", 12500 * time.Millisecond, 300, 40, 0, "settling (12 s of 30)"},
		{"plenty of requests do not shorten the time", 29 * time.Second, 900, 500, 0, "settling (29 s of 30)"},
		{"thirty seconds with too few first tokens waits for them", 45 * time.Second, 12, 0, 0, "settling (12 of 20 requests)"},
		// after a cache reset at 180 conversations nothing ends for some
		// 45 s, while first tokens come every second
		{"thirty seconds and twenty first tokens are settled, with nothing ended", SettleTime, SettleRequests, 0, 0, ""},
		// a fleet answering every request with 503 has no first token: its
		// error tile is the figure to read
		{"failed requests count as heard from", time.Minute, 0, 0, 20, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := settling(loadgen.Stats{Covered: tt.covered, TTFT: loadgen.Quantiles{Count: tt.firstTokens}, Completed: tt.completed, Errors: tt.errors})
			if got != tt.want {
				t.Fatalf("settling = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestAnswering(t *testing.T) {
	tests := []struct {
		name    string
		covered time.Duration
		answers int
		want    string
	}{
		{"a young window says its seconds, as for TTFT", 12 * time.Second, 40, "settling (12 s of 30)"},
		{"thirty seconds wait for answers from requests all of whose predecessors ended", 40 * time.Second, 3, "answers (3 of 20)"},
		{"twenty such answers are settled", 40 * time.Second, SettleRequests, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Plenty of first tokens and ended requests: they settle TTFT,
			// not the answers.
			w := loadgen.Stats{Covered: tt.covered, TTFT: loadgen.Quantiles{Count: 500}, Completed: 100, Answers: tt.answers}
			if got := answering(w); got != tt.want {
				t.Fatalf("answering = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestFlowing(t *testing.T) {
	tests := []struct {
		name              string
		covered, answered time.Duration
		answers           int
		want              string
	}{
		{"a young window says its seconds, as for TTFT", 12 * time.Second, 0, 0, "settling (12 s of 30)"},
		{"thirty seconds without twenty answers wait for them first", 35 * time.Second, 2 * time.Second, 3, "answers (3 of 20)"},
		// 30 s after a start or a change the answers that ended are mostly
		// those sent before it, or the first wave of an empty loop
		{"answers whose first 30 s have not all ended hold the rates", 40 * time.Second, 12500 * time.Millisecond, 60, "rates: 12 s of 30"},
		{"every request of the window's first 30 s ended: the rates compare", 58 * time.Second, SettleTime, 150, ""},
		{"a window that began long ago has its rates", time.Minute, time.Minute, 300, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := loadgen.Stats{Covered: tt.covered, Answered: tt.answered, TTFT: loadgen.Quantiles{Count: 500}, Completed: 100, Answers: tt.answers}
			if got := flowing(w); got != tt.want {
				t.Fatalf("flowing = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestRatesSettleLastAfterAChange: 40 s after a change TTFT and the
// figures read at an answer's end compare, the rates not yet: they count
// answers sent before the change.
func TestRatesSettleLastAfterAChange(t *testing.T) {
	young := func(w loadgen.Stats) loadgen.Stats {
		w = settled(w)
		w.Covered, w.Answered = 40*time.Second, 12*time.Second
		w.OutputTokensPerSec, w.RequestsPerSec, w.GoodputPerSec = 1500, 1.8, 1.8
		return w
	}
	a, b := young(window(561, 0.86)), young(window(372, 0.98))
	b.OutputTokensPerSec = 1900
	s, _, _, _, _ := abServer(t, a, b)
	td := tilesNow(s)
	for _, tt := range []struct {
		tile        string
		wantCompare bool
	}{{"ttft-p95", true}, {"kv-hit", true}, {"tops", false}, {"rps", false}, {"goodput", false}} {
		got := tile(td, tt.tile)
		if compared := got.Delta != ""; compared != tt.wantCompare {
			t.Errorf("tile %s: delta %q, settling %q; want compared %v", tt.tile, got.Delta, got.Settling, tt.wantCompare)
		}
		if !tt.wantCompare && got.Settling != "rates: 12 s of 30" {
			t.Errorf("tile %s says %q, want the rates' wait", tt.tile, got.Settling)
		}
	}
	if td.Settling == "" {
		t.Error("the tiles as a whole count as settled while their rates wait")
	}
}

func TestRatesWaitForAFewSecondsOfWindow(t *testing.T) {
	tests := []struct {
		name    string
		covered time.Duration
		want    bool
	}{
		// one 1,000-token answer ending 0.2 s into a window is not 5,000 tok/s
		{"a window 0.2 s old has no rate", 200 * time.Millisecond, false},
		{"a window just short of rateSpan has none", rateSpan - time.Millisecond, false},
		{"a window of rateSpan has its rates", rateSpan, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := loadgen.Snapshot{Window: loadgen.Stats{Covered: tt.covered, Completed: 1, RequestsPerSec: 5, OutputTokensPerSec: 5000}}
			p := point(snap)
			if got := p.OutputTokensPerSec != nil && p.RequestsPerSec != nil; got != tt.want {
				t.Fatalf("rates in the chart point: %v, want %v", got, tt.want)
			}
			s := New(&fakeLoad{snap: snap}, newFakeRouter("kv"), testOptions())
			if got := tile(tilesNow(s), "tops").Value != "—"; got != tt.want {
				t.Fatalf("throughput tile shows a figure: %v, want %v", got, tt.want)
			}
		})
	}
}

// TestTheErrorChartWaitsForAnAnswer: after a change the error rate is read
// over the requests answered since; before the first answer the chart
// point has none, rather than a 0% while requests fail.
func TestTheErrorChartWaitsForAnAnswer(t *testing.T) {
	tests := []struct {
		name    string
		w       loadgen.Stats
		want    string // the point's error_pct, "" for none
		wantErr string // the tile's value
	}{
		{"five failures and no answer yet plot no rate", loadgen.Stats{Covered: 20 * time.Second, Errors: 5}, "", "—"},
		{"an answer plots the rate over the answered span", loadgen.Stats{Covered: 40 * time.Second, Errors: 5, Answers: 45, ErrorRate: 0.1}, "10", "10.0%"},
		{"answers without failures plot 0%", loadgen.Stats{Covered: 40 * time.Second, Answers: 45}, "0", "0.0%"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := loadgen.Snapshot{Window: tt.w}
			got := ""
			if p := point(snap); p.ErrorPct != nil {
				got = strconv.FormatFloat(*p.ErrorPct, 'f', -1, 64)
			}
			if got != tt.want {
				t.Fatalf("chart point's error_pct %q, want %q", got, tt.want)
			}
			s := New(&fakeLoad{snap: snap}, newFakeRouter("kv"), testOptions())
			if v := tile(tilesNow(s), "errors").Value; v != tt.wantErr {
				t.Fatalf("errors tile %q, want %q", v, tt.wantErr)
			}
		})
	}
}

// TestTheErrorsTileIsRedOnlyForARateItShows: the tile's colour follows its
// figure; failures of requests sent before a change count in the note
// beside it, not in the rate, and a "0.0%" is not red.
func TestTheErrorsTileIsRedOnlyForARateItShows(t *testing.T) {
	tests := []struct {
		name        string
		errs        int
		rate        float64
		value, note string
		level       string
	}{
		{"no failure is green", 0, 0, "0.0%", "0 failed · 0 shed", "ok"},
		{"failures before the change alone leave the rate at 0", 3, 0, "0.0%", "3 failed · 0 shed", "ok"},
		{"a rate that rounds to 0.0% is not red", 1, 0.0004, "0.0%", "1 failed · 0 shed", "ok"},
		{"a rate shown is red", 5, 0.004, "0.4%", "5 failed · 0 shed", "bad"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := settled(loadgen.Stats{Errors: tt.errs, ErrorRate: tt.rate, TTFT: loadgen.Quantiles{Count: 500, P50: 200, P95: 300}})
			s := New(&fakeLoad{snap: loadgen.Snapshot{Window: w}}, newFakeRouter("kv"), testOptions())
			x := tile(tilesNow(s), "errors")
			if x.Value != tt.value || x.Note != tt.note || x.Level != tt.level {
				t.Fatalf("errors tile %q, %q, %q; want %q, %q, %q", x.Value, x.Note, x.Level, tt.value, tt.note, tt.level)
			}
		})
	}
}

// TestAStoppedDemoComparesNothing stops both lanes of a settled A/B view:
// their windows run on with nothing sent, so every tile keeps its figure
// but shows no difference and no colour, and says why; the headline says
// the load is stopped where it gave the conversations each lane runs (it
// kept "120 conversations each", the target, with none running).
func TestAStoppedDemoComparesNothing(t *testing.T) {
	s, la, lb, _, _ := abServer(t, settled(window(561, 0.86)), settled(window(372, 0.98)))
	for _, x := range tilesNow(s).Tiles {
		if x.ID == "ttft-p95" && x.Delta == "" {
			t.Fatalf("running, the TTFT tile shows no difference: %+v", x)
		}
	}
	if h := s.headline(s.sides(time.Now(), s.snapshots())); h.Stopped {
		t.Fatalf("running, the headline says the load is stopped: %+v", h)
	}
	la.Stop()
	lb.Stop()
	for _, x := range tilesNow(s).Tiles {
		if x.Delta != "" || x.Level != "none" || !strings.Contains(x.Settling, "stopped") {
			t.Errorf("stopped, tile %s shows %q, level %q, settling %q; want no difference, no colour and \"stopped\"", x.ID, x.Delta, x.Level, x.Settling)
		}
	}
	if h := s.headline(s.sides(time.Now(), s.snapshots())); !h.Stopped || h.Delta != "" {
		t.Errorf("stopped, the headline is %+v; want it stopped, with no difference", h)
	}
}

// TestNoLivePointWithoutConversations: a stopped lane's window still has
// figures, but no conversation runs, so the baseline chart gets no point
// (it drew one at 0 conversations, stretching its axis to 0).
func TestNoLivePointWithoutConversations(t *testing.T) {
	snap := loadgen.Snapshot{Window: settled(window(561, 0.86))}
	if lp := livePoint(snap, "kv"); len(lp.Values) != 0 {
		t.Errorf("with no conversation running, the live point has values %v", lp.Values)
	}
	snap.Live = 60
	if lp := livePoint(snap, "kv"); lp.Values["ttft_p95_ms"] != 561 || lp.Conversations != 60 {
		t.Errorf("with 60 running, the live point is %+v; want TTFT p95 561 at 60", lp)
	}
}

// TestTheThroughputChartDrawsOnlySettledRates: the chart points pushed to
// the page carry a lane's rates only once its tile would compare them
// (flowing); until then they carry none and say the rates are settling,
// which the chart shades. Before, a window 12 s after a fault drew lane
// B's 2,830 tok/s, counted over answers sent before the fault, beside a
// steady 2,300. A stopped lane's falling rates are drawn.
func TestTheThroughputChartDrawsOnlySettledRates(t *testing.T) {
	// frame is the chart frame of one tick: each lane's point.
	frame := func(s *Server) []Point {
		var f Frame
		if err := json.Unmarshal(s.frames()[0], &f); err != nil {
			t.Fatal(err)
		}
		out := f.Points
		for _, l := range f.Lanes {
			out = append(out, l.Points...)
		}
		return out
	}
	after := func(age time.Duration, answered time.Duration) loadgen.Stats {
		w := settled(window(400, 0.9))
		w.Covered, w.Answered = age, answered
		w.OutputTokensPerSec, w.RequestsPerSec = 2830, 2.9
		return w
	}
	tests := []struct {
		name     string
		w        loadgen.Stats
		stop     bool
		want     bool // rates in the point
		settling bool
	}{
		{"12 s after a change", after(12*time.Second, 3*time.Second), false, false, true},
		{"40 s after, the answers settled but not the rates", after(40*time.Second, 20*time.Second), false, false, true},
		{"settled", after(time.Minute, time.Minute), false, true, false},
		{"stopped, 12 s after a change", after(12*time.Second, 12*time.Second), true, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, la, lb, _, _ := abServer(t, tt.w, tt.w)
			if tt.stop {
				la.Stop()
				lb.Stop()
			}
			for i, p := range frame(s) {
				if got := p.OutputTokensPerSec != nil && p.RequestsPerSec != nil; got != tt.want || p.RatesSettling != tt.settling {
					t.Errorf("lane %d's point: rates %v, rates_settling %v; want %v, %v", i, got, p.RatesSettling, tt.want, tt.settling)
				}
			}
			// The tile shows the figure either way, labelled when settling.
			if x := tile(tilesNow(s), "tops"); x.Value != "2830" {
				t.Errorf("the throughput tile shows %q, want the window's 2830", x.Value)
			}
		})
	}
}

// TestTheLivePointWaitsForItsFigureToSettle: the baseline chart's point
// for a figure comes with its tile's comparison, and until then the frame
// says the figure is settling, as the tile does. Before, the point sat at
// the young window's TTFT p95 (1,181 ms 14 s after a cache reset) while
// every tile said "settling (14 s of 30)".
func TestTheLivePointWaitsForItsFigureToSettle(t *testing.T) {
	base := window(1181, 0.9)
	base.TPOT = loadgen.Quantiles{Count: 100, P50: 28, P95: 30}
	base.OutputTokensPerSec = 1600
	young := base
	young.Covered, young.Answered, young.Answers = 14*time.Second, 2*time.Second, 3
	answersWait := base
	answersWait.Covered, answersWait.Answered, answersWait.Answers = 40*time.Second, 10*time.Second, 3
	tests := []struct {
		name     string
		w        loadgen.Stats
		placed   []string
		settling map[string]string
	}{
		{"14 s after a change", young, nil, map[string]string{
			"ttft_p50_ms": "settling (14 s of 30)", "ttft_p95_ms": "settling (14 s of 30)",
			"tpot_p50_ms": "settling (14 s of 30)", "tpot_p95_ms": "settling (14 s of 30)", "tops": "settling (14 s of 30)"}},
		{"40 s after, TTFT settled but not the answers", answersWait, []string{"ttft_p50_ms", "ttft_p95_ms"}, map[string]string{
			"tpot_p50_ms": "answers (3 of 20)", "tpot_p95_ms": "answers (3 of 20)", "tops": "answers (3 of 20)"}},
		{"settled", settled(base), []string{"ttft_p50_ms", "ttft_p95_ms", "tpot_p50_ms", "tpot_p95_ms", "tops"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lp := livePoint(loadgen.Snapshot{Live: 60, Window: tt.w}, "kv")
			if len(lp.Values) != len(tt.placed) {
				t.Errorf("the point has %v; want only %v", lp.Values, tt.placed)
			}
			for _, k := range tt.placed {
				if _, ok := lp.Values[k]; !ok {
					t.Errorf("the point has no %s: %v", k, lp.Values)
				}
			}
			if fmt.Sprint(lp.Settling) != fmt.Sprint(tt.settling) {
				t.Errorf("settling %v, want %v", lp.Settling, tt.settling)
			}
		})
	}
}
