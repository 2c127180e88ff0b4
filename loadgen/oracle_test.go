package loadgen

import (
	"math"
	"testing"
	"time"
)

func TestWindowOracleHitRate(t *testing.T) {
	// Every result has a 1000-token prompt with 900 tokens from cache (ok).
	withOracle := func(tokens int) Result {
		r := ok(100*time.Millisecond, time.Second, 10)
		r.OracleTokens, r.HasOracle = tokens, true
		return r
	}
	tests := []struct {
		name    string
		results []Result
		want    float64 // -1: absent
	}{
		{"results without an oracle give none", []Result{ok(time.Millisecond, time.Second, 10)}, -1},
		{"the oracle is Σ oracle tokens / Σ prompt tokens", []Result{withOracle(1000), withOracle(960)}, 0.98},
		{"a request that got more than the oracle at routing counts what it got", []Result{withOracle(500)}, 0.9},
		{"an oracle beyond the prompt is capped at the prompt", []Result{withOracle(5000)}, 1},
		// The result without one weighs in neither sum.
		{"only results with an oracle are in its denominator", []Result{withOracle(1000), ok(time.Millisecond, time.Second, 10)}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newFakeClock()
			w := NewWindow(time.Minute, DefaultSLO, clk.now)
			clk.add(time.Second)
			for _, r := range tt.results {
				w.ObserveDone(r)
			}
			got := w.Stats().OracleHitRate
			switch {
			case tt.want < 0 && got != nil:
				t.Fatalf("oracle = %v, want none", *got)
			case tt.want >= 0 && (got == nil || math.Abs(*got-tt.want) > 1e-9):
				t.Fatalf("oracle = %v, want %v", got, tt.want)
			}
		})
	}
}
