package loadgen

import (
	"errors"
	"math"
	"testing"
	"time"
)

// fakeClock is a settable clock for window tests.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time      { return c.t }
func (c *fakeClock) add(d time.Duration) { c.t = c.t.Add(d) }
func newFakeClock() *fakeClock           { return &fakeClock{t: time.Unix(1_700_000_000, 0)} }
func ok(ttft, e2e time.Duration, osl int) Result {
	return Result{TTFT: ttft, E2E: e2e, OSL: osl, ISL: 1000, CachedTokens: 900}
}

func TestResultTPOT(t *testing.T) {
	tests := []struct {
		name string
		r    Result
		want time.Duration
		ok   bool
	}{
		// 100 ms to first token, 10 s in all, 100 tokens => 9.9 s / 99 gaps
		{"one token per chunk divides by OSL-1", Result{TTFT: 100 * time.Millisecond, E2E: 10 * time.Second, OSL: 100}, 100 * time.Millisecond, true},
		// first chunk carried 4 tokens => 9.9 s / 96
		{"a multi-token first chunk divides by OSL-k", Result{TTFT: 100 * time.Millisecond, E2E: 10 * time.Second, OSL: 100, FirstChunkTokens: 4}, 9900 * time.Millisecond / 96, true},
		{"a single-token answer has no TPOT", Result{TTFT: time.Second, E2E: time.Second, OSL: 1}, 0, false},
		{"a failed request has no TPOT", Result{OSL: 50, Err: errors.New("x")}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := tt.r.TPOT()
			if got != tt.want || ok != tt.ok {
				t.Fatalf("TPOT = %v, %v; want %v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestWindowRatesDivideByCoveredTime(t *testing.T) {
	clk := newFakeClock()
	w := NewWindow(60*time.Second, DefaultSLO, clk.now)
	// 10 s after start, 5 requests of 200 tokens each: 0.5 req/s, 100 tok/s,
	// not the 1/6 of that a fixed 60 s divisor would give.
	clk.add(10 * time.Second)
	for range 5 {
		w.ObserveDone(ok(100*time.Millisecond, 5*time.Second, 200))
	}
	s := w.Stats()
	if s.Covered != 10*time.Second {
		t.Fatalf("covered = %v, want 10s", s.Covered)
	}
	if s.RequestsPerSec != 0.5 || s.OutputTokensPerSec != 100 {
		t.Fatalf("rates = %v req/s, %v tok/s; want 0.5 and 100", s.RequestsPerSec, s.OutputTokensPerSec)
	}
	if math.Abs(s.KVHitRate-0.9) > 1e-9 {
		t.Fatalf("KV hit rate = %v, want 0.9", s.KVHitRate)
	}
}

func TestWindowErrorsAreInTheDenominator(t *testing.T) {
	clk := newFakeClock()
	w := NewWindow(60*time.Second, DefaultSLO, clk.now)
	for range 3 {
		w.ObserveDone(ok(100*time.Millisecond, time.Second, 10))
	}
	w.ObserveDone(Result{Err: errors.New("503"), Class: ErrHTTP503})
	s := w.Stats()
	if s.Errors != 1 || s.Completed != 3 || s.ErrorRate != 0.25 {
		t.Fatalf("errors %d, completed %d, rate %v; want 1, 3, 0.25", s.Errors, s.Completed, s.ErrorRate)
	}
}

func TestWindowForgetsOldSamples(t *testing.T) {
	clk := newFakeClock()
	w := NewWindow(60*time.Second, DefaultSLO, clk.now)
	w.ObserveFirstToken("", 5*time.Second) // slow, early
	clk.add(30 * time.Second)
	w.ObserveFirstToken("", 100*time.Millisecond)
	if got := w.Stats().TTFT.Count; got != 2 {
		t.Fatalf("after 30 s the window holds %d TTFTs, want 2", got)
	}
	clk.add(40 * time.Second) // the first sample is now 70 s old
	s := w.Stats()
	if s.TTFT.Count != 1 || math.Abs(s.TTFT.P95-100) > 1 {
		t.Fatalf("after 70 s: count %d, p95 %v ms; want 1 sample of 100 ms", s.TTFT.Count, s.TTFT.P95)
	}
	if s.Covered > 60*time.Second || s.Covered < 55*time.Second {
		t.Fatalf("covered = %v, want the window length less at most one step", s.Covered)
	}
}

func TestWindowQuantilesWithinSketchAccuracy(t *testing.T) {
	clk := newFakeClock()
	w := NewWindow(60*time.Second, DefaultSLO, clk.now)
	for i := 1; i <= 1000; i++ { // 1..1000 ms
		w.ObserveFirstToken("", time.Duration(i)*time.Millisecond)
	}
	q := w.Stats().TTFT
	for _, c := range []struct {
		name      string
		got, want float64
	}{{"p50", q.P50, 500}, {"p95", q.P95, 950}, {"p99", q.P99, 990}, {"mean", q.Mean, 500.5}} {
		if math.Abs(c.got-c.want)/c.want > 0.02 {
			t.Errorf("%s = %v, want %v within 2%%", c.name, c.got, c.want)
		}
	}
}

func TestWindowReset(t *testing.T) {
	clk := newFakeClock()
	w := NewWindow(60*time.Second, DefaultSLO, clk.now)
	w.ObserveFirstToken("", time.Second)
	clk.add(5 * time.Second)
	w.Reset()
	clk.add(2 * time.Second)
	s := w.Stats()
	if s.TTFT.Count != 0 || s.Covered != 2*time.Second {
		t.Fatalf("after reset: %d samples over %v; want 0 over 2s", s.TTFT.Count, s.Covered)
	}
}
