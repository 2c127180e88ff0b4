package web

import (
	"strings"
	"testing"
	"time"

	"github.com/kvlens/kvlens/loadgen"
)

// altServer is the alternating view over one fake fleet: round-robin then
// kv, turns of 90 s.
func altServer(t *testing.T) (*Server, *fakeLoad, *fakeRouter) {
	t.Helper()
	load, rt := &fakeLoad{target: 120}, newFakeRouter("round_robin")
	opts := testOptions()
	opts.Source = "3 real workers"
	opts.Alternate = &Alternation{Pair: [2]string{"round_robin", "kv"}, Every: 90 * time.Second}
	return New(load, rt, opts), load, rt
}

func TestAlternationTakesTurnsAndKeepsSettledWindows(t *testing.T) {
	s, load, rt := altServer(t)
	t0 := time.Unix(1_700_000_000, 0)
	load.snap.Window = settled(window(561, 0.86))
	shortOfAnswers := settled(window(600, 0.85))
	shortOfAnswers.Answers = 5
	steps := []struct {
		name       string
		at         time.Duration // after t0
		window     loadgen.Stats
		wantPolicy string
		// wantSides are each side's state: "live", "none" or a kept window's age.
		wantSides [2]string
	}{
		{"round-robin runs its first turn; kv has not run yet", 0, settled(window(561, 0.86)), "round_robin", [2]string{"live", "none"}},
		{"before its turn ends nothing changes", 89 * time.Second, settled(window(561, 0.86)), "round_robin", [2]string{"live", "none"}},
		{"at the turn's end kv takes over and round-robin's window is kept", 90 * time.Second, window(372, 0.98), "kv", [2]string{"just now", "live"}},
		{"the kept window ages in steps of 10 s", 125 * time.Second, window(372, 0.98), "kv", [2]string{"30 s ago", "live"}},
		{"and in minutes after the first", 150 * time.Second, window(372, 0.98), "kv", [2]string{"1 min ago", "live"}},
		// kv's window was settling when its turn ended: nothing to keep
		// round-robin's new window is settled on TTFT but holds few answers
		{"an unsettled window is not kept", 180 * time.Second, shortOfAnswers, "round_robin", [2]string{"live", "none"}},
		{"nor one short of answers: the kept window is the older one", 270 * time.Second, window(372, 0.98), "kv", [2]string{"3 min ago", "live"}},
	}
	for _, st := range steps {
		now := t0.Add(st.at)
		s.alternate(now, load.Snapshot())
		load.snap.Window = st.window
		if rt.PolicyName() != st.wantPolicy {
			t.Fatalf("%s: policy %s, want %s", st.name, rt.PolicyName(), st.wantPolicy)
		}
		sides := s.sides(now, s.snapshots())
		for i, want := range st.wantSides {
			got := sides[i].ago
			switch {
			case sides[i].none:
				got = "none"
			case got == "":
				got = "live"
			}
			if got != want {
				t.Errorf("%s: side %d is %q, want %q", st.name, i, got, want)
			}
		}
	}
}

func TestAlternationForgetsKeptWindowsAfterAChange(t *testing.T) {
	s, load, rt := altServer(t)
	t0 := time.Unix(1_700_000_000, 0)
	load.snap.Window = settled(window(561, 0.86))
	s.alternate(t0, load.Snapshot())
	s.alternate(t0.Add(90*time.Second), load.Snapshot()) // round-robin's window is kept
	if rt.PolicyName() != "kv" || s.sides(t0, s.snapshots())[0].none {
		t.Fatal("the first turn did not end with a kept window")
	}
	// A window at another concurrency does not compare with this one.
	s.change(Mark{Kind: "concurrency", Label: "→ 140"}, nil)
	sides := s.sides(t0.Add(91*time.Second), s.snapshots())
	if !sides[0].none || !strings.HasPrefix(sides[0].settling, "its turn comes in") {
		t.Fatalf("after a concurrency change side A = %+v, want no window and when its turn comes", sides[0])
	}
	if h := s.headline(sides); h.Delta != "" || h.TTFTA != "—" {
		t.Fatalf("the headline compares with a forgotten window: %+v", h)
	}
}

func TestAlternationPairChangeRunsTheNewPolicyAtOnce(t *testing.T) {
	s, load, rt := altServer(t)
	s.alternate(time.Unix(1_700_000_000, 0), load.Snapshot())
	if err := s.change(Mark{Kind: "mode", Label: "A: least-loaded"}, func() error {
		if run := s.alt.setPair(0, "least_loaded", rt.PolicyName()); run != rt.PolicyName() {
			return rt.SwitchPolicy(run)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if rt.PolicyName() != "least_loaded" || s.alt.Pair() != [2]string{"least_loaded", "kv"} {
		t.Fatalf("policy %s, pair %v; want least_loaded running as A", rt.PolicyName(), s.alt.Pair())
	}
	if got := s.compareText(s.sides(time.Now(), s.snapshots())); !strings.Contains(got, "taking turns of 1m30s") {
		t.Fatalf("compare line %q does not say the pair takes turns", got)
	}
}

// TestAKeptWindowWhoseRatesHadNotSettledComparesNoRates: a turn may end
// once its answers have settled but before its rates have (at 180
// conversations on real workers); the window is kept, and compared on
// everything but the rates.
func TestAKeptWindowWhoseRatesHadNotSettledComparesNoRates(t *testing.T) {
	s, load, _ := altServer(t)
	t0 := time.Unix(1_700_000_000, 0)
	young := settled(window(561, 0.86))
	young.Answered = 20 * time.Second
	young.OutputTokensPerSec = 2000
	load.snap.Window = young
	s.alternate(t0, load.Snapshot())
	s.alternate(t0.Add(90*time.Second), load.Snapshot()) // round-robin's window is kept
	live := settled(window(372, 0.98))
	live.OutputTokensPerSec = 2400
	load.snap.Window = live
	sides := s.sides(t0.Add(100*time.Second), s.snapshots())
	if sides[0].none || sides[0].ago == "" {
		t.Fatal("round-robin's window, settled but for its rates, was not kept")
	}
	td := s.tiles(sides)
	if got := tile(td, "ttft-p95"); got.Delta == "" {
		t.Errorf("TTFT p95 of a kept window settled on its answers is not compared: %+v", got)
	}
	if got := tile(td, "tops"); got.Delta != "" || got.Settling != "rates: its turn ended before they settled" {
		t.Errorf("tokens/s of a kept window whose rates had not settled: delta %q, settling %q; want no delta, and why", got.Delta, got.Settling)
	}
}

func TestAgoSaysAKeptWindowsAge(t *testing.T) {
	tests := []struct {
		name string
		d    time.Duration
		want string
	}{
		{"a window that just ended", 9 * time.Second, "just now"},
		{"ten seconds on", 10 * time.Second, "10 s ago"},
		{"seconds round down to tens", 59 * time.Second, "50 s ago"},
		{"the first minute", 119 * time.Second, "1 min ago"},
		{"minutes round down", 5*time.Minute + 59*time.Second, "5 min ago"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ago(tt.d); got != tt.want {
				t.Fatalf("ago(%v) = %q, want %q", tt.d, got, tt.want)
			}
		})
	}
}
