package web

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kvlens/kvlens/baselines"
	"github.com/kvlens/kvlens/components"
	"github.com/kvlens/kvlens/loadgen"
)

func builtinAverage(t *testing.T) *baselines.Set {
	t.Helper()
	sets, err := baselines.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	sets[0].Sort()
	return &sets[0]
}

func tile(td components.TilesData, id string) components.Tile {
	for _, x := range td.Tiles {
		if x.ID == id {
			return x
		}
	}
	return components.Tile{}
}

// tilesNow are s's tiles at this moment.
func tilesNow(s *Server) components.TilesData { return s.tiles(s.sides(time.Now(), s.snapshots())) }

// settled is a window old and full enough to compare (SettleTime,
// SettleRequests).
func settled(w loadgen.Stats) loadgen.Stats {
	w.Covered, w.Answered, w.Completed, w.Answers = time.Minute, time.Minute, 100, 100
	return w
}

func TestTilesCompareWithTheBaselineOfTheLiveMode(t *testing.T) {
	set := builtinAverage(t)
	f, _ := baselines.FieldByKey("ttft_p95_ms")
	rr, _ := set.At("round_robin", 120, f)
	kv, _ := set.At("kv", 120, f)
	tests := []struct {
		name, policy string
		target       int
		want         float64
		has          bool
	}{
		{"round-robin compares with the round-robin curve", "round_robin", 120, rr, true},
		{"least-loaded compares with round-robin too", "least_loaded", 120, rr, true},
		{"kv compares with the kv curve", "kv", 120, kv, true},
		{"dynamo compares with the kv curve", "dynamo", 120, kv, true},
		// Below the measured range there is no baseline, never an extrapolation.
		{"a concurrency outside the measured range shows a dash", "kv", 20, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			load := &fakeLoad{target: tt.target}
			load.snap.Window = settled(loadgen.Stats{TTFT: loadgen.Quantiles{Count: 10, P50: 100, P95: 2 * tt.want}})
			opts := testOptions()
			opts.Baseline = set
			s := New(load, newFakeRouter(tt.policy), opts)
			got := tile(tilesNow(s), "ttft-p95")
			if !tt.has {
				if got.Baseline != "—" || got.Delta != "" {
					t.Fatalf("baseline %q delta %q, want a dash and no delta", got.Baseline, got.Delta)
				}
				return
			}
			if want := "base " + components.FormatMs(tt.want, 1); got.Baseline != want {
				t.Fatalf("baseline = %q, want %q", got.Baseline, want)
			}
			// Live is twice the baseline: +100%, and worse for a latency.
			if got.Delta != "+100%" || got.Better {
				t.Fatalf("delta = %q better=%v, want +100%% and worse", got.Delta, got.Better)
			}
		})
	}
}

func TestTilesWithoutDataShowDashes(t *testing.T) {
	load := &fakeLoad{target: 60}
	s := New(load, newFakeRouter("kv"), testOptions())
	tiles := tilesNow(s).Tiles
	if len(tiles) != 12 {
		t.Fatalf("%d tiles, want the page's 12", len(tiles))
	}
	for _, x := range tiles {
		if x.Value != "—" {
			t.Errorf("tile %s = %q with an empty window, want a dash", x.ID, x.Value)
		}
	}
}

func TestErrorTileCountsShedRequests(t *testing.T) {
	load := &fakeLoad{target: 60}
	load.snap.Window = loadgen.Stats{Covered: time.Minute, Completed: 90, Errors: 10, Answers: 100, ErrorRate: 0.1}
	rt := newFakeRouter("kv")
	rt.shed = 7
	s := New(load, rt, testOptions())
	got := tile(tilesNow(s), "errors")
	if got.Value != "10.0%" || got.Level != "bad" || !strings.Contains(got.Note, "7 shed") {
		t.Fatalf("errors tile = %+v", got)
	}
}

func TestEnvelopeSentence(t *testing.T) {
	m := func(ttft float64) baselines.Metrics { return baselines.Metrics{TTFTP95: ttft, TPOTP95: 30} }
	measured := "3× H200 (3 nodes); TensorRT-LLM via Dynamo 0.9.0"
	set := &baselines.Set{Deployment: measured, Levels: []baselines.Level{
		{Concurrency: 60, Mode: "kv", Metrics: m(300)}, {Concurrency: 80, Mode: "kv", Metrics: m(500)}, {Concurrency: 100, Mode: "kv", Metrics: m(700)},
		{Concurrency: 60, Mode: "round_robin", Metrics: m(900)},
	}}
	tests := []struct {
		name string
		set  *baselines.Set
		want string
	}{
		{"a mode that fails inside the range holds it up to the last good level", set, "Dynamo 0.9 KV router holds it up to 80 conversations"},
		{"a mode that fails at the lowest level says so", set, "round-robin misses it even at 60, the lowest level measured"},
		{"the sentence says where the curves come from", set, "SLO (p95 TTFT ≤ 600ms, TPOT ≤ 60ms), 3×H200 · measured: "},
		{"a mode good everywhere is not claimed beyond the range", &baselines.Set{Levels: []baselines.Level{{Concurrency: 60, Mode: "kv", Metrics: m(100)}}},
			"KV router holds it at every level measured, up to 60 and perhaps beyond"},
		{"a mode without a curve says it was not measured", &baselines.Set{Levels: []baselines.Level{{Concurrency: 60, Mode: "kv", Metrics: m(100)}}},
			"round-robin was not measured"},
		{"a simulated set names kvlens's policy", &baselines.Set{Deployment: "Simulated: yes", Levels: []baselines.Level{{Concurrency: 60, Mode: "kv", Metrics: m(100)}}},
			"simulated: kvlens kv holds it at every level measured"},
		{"no set at all says so", nil, "No stored baseline"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := EnvelopeSentence(tt.set, baselines.DefaultSLO)
			if !strings.Contains(got, tt.want) {
				t.Fatalf("sentence = %q, want it to contain %q", got, tt.want)
			}
		})
	}
}

func TestHardwareCaveatOnlyWhereSimulatedMeetsMeasured(t *testing.T) {
	measured := builtinAverage(t)
	simulated := &baselines.Set{Name: "sweep", Deployment: "Simulated: yes: virtual time; GPU: 3x simulated worker (kvlens sim)"}
	tests := []struct {
		name      string
		set       *baselines.Set
		simulated bool
		want      bool
	}{
		{"simulated workers against the seeds' hardware curves are warned about", measured, true, true},
		{"real workers against hardware curves need no warning", measured, false, false},
		{"simulated workers against a simulated curve compare like with like", simulated, true, false},
		{"no curves, nothing to warn about", nil, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := HardwareCaveat(tt.set, tt.simulated)
			if (got != "") != tt.want {
				t.Fatalf("caveat %q, want one: %v", got, tt.want)
			}
		})
	}
}

func TestPageShowsTheCaveatForASimulatedFleet(t *testing.T) {
	for _, simulated := range []bool{false, true} {
		opts := testOptions()
		if simulated {
			opts.Faults = &fakeFaults{}
		}
		ts := httptest.NewServer(New(&fakeLoad{target: 60}, newFakeRouter("round_robin"), opts).Handler())
		resp, err := http.Get(ts.URL + "/")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		ts.Close()
		if got := strings.Contains(string(body), `data-testid="baseline-caveat"`); got != simulated {
			t.Errorf("simulated fleet %v: caveat shown %v", simulated, got)
		}
	}
}
