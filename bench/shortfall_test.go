package bench

import (
	"math"
	"testing"
	"time"

	"github.com/kvlens/kvlens/baselines"
	"github.com/kvlens/kvlens/sim"
)

// pair is a one-row grid of round-robin against kv over the given seeds'
// TTFT p95s, with goodput level.
func pair(t *testing.T, rr, kv []float64) *Result {
	g := Grid{
		Policies: []string{"round_robin", "kv"}, Workloads: workloads(t, "chat"), Levels: []int{100},
		Workers: 3, Profile: sim.MustProfile(sim.DefaultProfile), Measure: 120 * time.Second, SLO: baselines.DefaultSLO,
	}
	res := &Result{Grid: g}
	for i := range rr {
		seed := uint64(i + 1)
		g.Seeds = append(g.Seeds, seed)
		res.Runs = append(res.Runs,
			Run{Workload: "chat", Policy: "round_robin", Level: 100, Seed: seed, TTFTP95: rr[i], Goodput: 3},
			Run{Workload: "chat", Policy: "kv", Level: 100, Seed: seed, TTFTP95: kv[i], Goodput: 3})
	}
	res.Grid.Seeds = g.Seeds
	return res
}

func TestShortfalls(t *testing.T) {
	tests := []struct {
		name      string
		rr, kv    []float64
		listed    bool
		gap       float64
		real      bool // the interval lies wholly above the tolerance
		undecided bool // no interval: one seed
	}{
		{"a steady 10% loss is listed and its interval excludes noise", []float64{500, 600, 700}, []float64{550, 660, 770}, true, 10, true, false},
		{"a 10% loss on the mean from one bad seed is listed but not told from noise", []float64{500, 500, 500}, []float64{450, 450, 750}, true, 10, false, false},
		{"a 1.5% loss is within the tolerance and not listed", []float64{600, 600}, []float64{609, 609}, false, 0, false, false},
		{"a win is not listed", []float64{600, 600}, []float64{500, 500}, false, 0, false, false},
		{"one seed gives a gap without an interval", []float64{500}, []float64{600}, true, 20, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := pair(t, tt.rr, tt.kv).Shortfalls("kv")
			if !tt.listed {
				if len(fs) != 0 {
					t.Fatalf("listed %+v, want nothing", fs)
				}
				return
			}
			if len(fs) != 1 || fs[0].Figure != "TTFT p95" || fs[0].BestPolicy != "round_robin" {
				t.Fatalf("got %+v, want one TTFT p95 shortfall against round_robin", fs)
			}
			s := fs[0]
			if math.Abs(s.Gap-tt.gap) > 0.01 {
				t.Errorf("gap %.2f%%, want %.2f%%", s.Gap, tt.gap)
			}
			if got := math.IsNaN(s.Low); got != tt.undecided {
				t.Fatalf("interval [%v, %v]: undecided %v, want %v", s.Low, s.High, got, tt.undecided)
			}
			if tt.undecided {
				return
			}
			if s.Low > s.Gap || s.High < s.Gap {
				t.Errorf("interval [%.2f, %.2f] does not hold the gap %.2f", s.Low, s.High, s.Gap)
			}
			if got := s.Low > 100*Tolerance; got != tt.real {
				t.Errorf("interval [%.2f, %.2f]: real %v, want %v", s.Low, s.High, got, tt.real)
			}
		})
	}
}

func TestBehind(t *testing.T) {
	tests := []struct {
		name   string
		rr, kv []float64
		listed bool
	}{
		{"a 1% loss to round-robin is listed: the bound is no loss at all", []float64{600, 600}, []float64{606, 606}, true},
		{"a tie with round-robin is not listed", []float64{600, 600}, []float64{600, 600}, false},
		{"a win over round-robin is not listed", []float64{600, 600}, []float64{500, 500}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := pair(t, tt.rr, tt.kv).Behind("kv", "round_robin")
			if !tt.listed {
				if len(fs) != 0 {
					t.Fatalf("listed %+v, want nothing", fs)
				}
				return
			}
			if len(fs) != 1 || fs[0].Figure != "TTFT p95" || fs[0].BestPolicy != "round_robin" || math.Abs(fs[0].Gap-1) > 0.01 {
				t.Fatalf("got %+v, want one TTFT p95 loss of 1%% to round_robin", fs)
			}
		})
	}
}

func TestHitGaps(t *testing.T) {
	tests := []struct {
		name        string
		workload    string
		hit, oracle float64
		listed      bool
	}{
		{"0.4 points under on the chat is within its 0.5", "chat", 98.8, 99.2, false},
		{"0.6 points under on the chat is outside its 0.5", "chat", 98.6, 99.2, true},
		{"1.9 points under on another workload is within its 2", "think", 97.3, 99.2, false},
		{"2.1 points under on another workload is outside its 2", "think", 97.1, 99.2, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := &Result{Grid: Grid{Policies: []string{"kv"}, Workloads: workloads(t, tt.workload), Levels: []int{100}, Seeds: []uint64{1}}}
			res.Runs = []Run{{Workload: tt.workload, Policy: "kv", Level: 100, Seed: 1, HitRate: tt.hit, OracleHitRate: tt.oracle}}
			gaps := res.HitGaps("kv")
			if got := len(gaps) == 1; got != tt.listed {
				t.Fatalf("listed %+v, want listed %v", gaps, tt.listed)
			}
		})
	}
}
